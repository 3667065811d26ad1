"""Realizing a graph shaped like one realized before reuses its compiled steps (execute.realize_nodes,
structure.graph_key): right answers on the new buffers, no reuse across graphs that differ in
anything the schedule depends on, and no buffers of the old graph kept alive."""

import gc
import weakref

import numpy as np
import pytest

import ug_core as ug
from ug_core.testing.data import rand


def layer(x, w, b):
    return ((x @ w + b).exp().sum(-1, keepdims=True) * x).softmax(-1)


def test_same_structure_on_new_buffers_reuses_the_steps(device, compile_cache):
    xs = [rand((4, 8)) for _ in range(3)]
    w, b = rand((8, 8)), rand(8)
    tw, tb = ug.tensor(w, device=device), ug.tensor(b, device=device)
    first = layer(ug.tensor(xs[0], device=device), tw, tb).numpy()
    assert len(compile_cache.schedules) == 1
    misses, hits = compile_cache.misses, compile_cache.hits
    for x in xs[1:]:
        got = layer(ug.tensor(x, device=device), tw, tb).numpy()
        xe = x.astype(np.float64)
        s = np.exp(xe @ w + b).sum(-1, keepdims=True) * xe
        want = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(got, want / want.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
    assert compile_cache.misses == misses            # nothing compiled again
    assert compile_cache.hits > hits                 # the reused programs count as hits
    assert len(compile_cache.schedules) == 1
    np.testing.assert_allclose(first, layer(ug.tensor(xs[0], device=device), tw, tb).numpy())


@pytest.mark.parametrize("first, second", [
    (lambda x, y: x * 2.0, lambda x, y: x * 3.0),             # another constant
    (lambda x, y: x * 0.0, lambda x, y: x * -0.0),            # -0.0 is not 0.0
    (lambda x, y: x + y, lambda x, y: x + x),                 # which buffer is read where
    (lambda x, y: x + y, lambda x, y: x * y),
    (lambda x, y: x.sum(0), lambda x, y: x.sum(1)),           # another axis
    (lambda x, y: x.exp(), lambda x, y: x.exp().astype(np.float16).astype(np.float32)),
    (lambda x, y: x.T + y, lambda x, y: x + y.T),             # another view
    (lambda x, y: x.max(-1), lambda x, y: x.min(-1)),
])
def test_graphs_that_differ_get_their_own_schedule(device, compile_cache, first, second):
    a, b = rand((6, 6)), rand((6, 6))
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    try:
        second_want = second(ug.tensor(a, device="ref"), ug.tensor(b, device="ref")).numpy()
        compile_cache.schedules.clear()  # (the reference's own)
        first(x, y).numpy()
        got = second(x, y).numpy()
    except TypeError:  # float16 on a device without it
        pytest.skip("dtype not supported here")
    np.testing.assert_allclose(got, second_want, rtol=1e-3, atol=1e-6)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(second_want))
    assert len(compile_cache.schedules) == 2


def test_operands_are_matched_by_position_in_the_graph(device, compile_cache):
    a, b = rand(5), rand(5)
    x, y = ug.tensor(a, device=device), ug.tensor(b, device=device)
    np.testing.assert_allclose((x - y).numpy(), a - b)
    np.testing.assert_allclose((y - x).numpy(), b - a)  # the same structure, read the other way
    np.testing.assert_allclose((x - x).numpy(), np.zeros(5))
    assert len(compile_cache.schedules) == 2


def test_other_shapes_and_dtypes_are_other_graphs(device, compile_cache):
    for shape in [(3, 5), (5, 3), (15,)]:
        a = rand(shape)
        np.testing.assert_allclose((ug.tensor(a, device=device) * 2 + 1).numpy(), a * 2 + 1, rtol=1e-6)
    a = np.arange(15, dtype=np.int32)
    np.testing.assert_array_equal((ug.tensor(a, device=device) * 2 + 1).numpy(), a * 2 + 1)
    assert len(compile_cache.schedules) == 4


def test_a_realized_intermediate_changes_the_graph(device, compile_cache):
    a = rand(8)
    x = ug.tensor(a, device=device)
    h = x.exp()
    (h + 1).realize()                      # h fused: computed inside the kernel
    h2 = ug.tensor(a, device=device).exp().realize()
    got = (h2 + 1).numpy()                 # h2 is a buffer now: another graph
    np.testing.assert_allclose(got, np.exp(a) + 1, rtol=1e-5)
    assert len(compile_cache.schedules) == 3


def test_several_targets_in_order(device, compile_cache):
    a = rand((4, 4))
    for _ in range(2):
        x = ug.tensor(a, device=device)
        s, m = x.sum(-1), x.max(-1)
        ug.realize(s, m)
        np.testing.assert_allclose(s.numpy(), a.sum(-1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.numpy(), a.max(-1))
        x = ug.tensor(a, device=device)
        s, m = x.sum(-1), x.max(-1)
        ug.realize(m, s)                   # the same graph, targets the other way round
        np.testing.assert_allclose(s.numpy(), a.sum(-1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.numpy(), a.max(-1))
    assert len(compile_cache.schedules) == 2


def test_a_kept_schedule_holds_no_buffer(device, compile_cache):
    x = ug.tensor(rand(64), device=device)
    y = (x * 2).sum()
    y.realize()
    ref = weakref.ref(y.node.buffer)
    del y
    gc.collect()
    assert ref() is None
    assert len(compile_cache.schedules) == 1


def test_assign_replays_in_place(device, compile_cache):
    # `x -= m` in a loop (scikit-learn's logsumexp): the write's schedule is kept and replayed,
    # still writing into x's own buffer
    a = rand(8)
    x = ug.tensor(a, device=device)
    x.realize()
    buffer = x._node.buffer
    for i in range(3):
        x.assign(x + 1).realize()
        assert x._node.buffer is buffer
    np.testing.assert_allclose(x.numpy(), a + 3, rtol=1e-6)
    assert len(compile_cache.schedules) == 1


def test_assign_replay_keeps_a_live_readers_old_value(device, compile_cache):
    # the kept schedule wrote in place; a graph of its structure whose target's old value a live
    # tensor still reads (another tensor of the same value, or a lazy one reading it) must not
    a = rand(8)
    x = ug.tensor(a, device=device)
    x.assign(x + 1).realize()
    x.assign(x + 1).realize()
    assert len(compile_cache.schedules) == 1
    same = x.to(device)          # a second tensor of x's value
    lazy = x * 2.0               # a lazy reader of it
    x.assign(x + 1).realize()
    np.testing.assert_allclose(same.numpy(), a + 2, rtol=1e-6)
    np.testing.assert_allclose(lazy.numpy(), (a + 2) * 2, rtol=1e-6)
    np.testing.assert_allclose(x.numpy(), a + 3, rtol=1e-6)
    x.assign(x + 1).realize()   # (nothing reads the old value again: the kept replay)
    np.testing.assert_allclose(x.numpy(), a + 4, rtol=1e-6)
    np.testing.assert_allclose(same.numpy(), a + 2, rtol=1e-6)


def test_assign_replay_never_writes_read_only_memory(device, compile_cache):
    a = rand(8)
    x = ug.tensor(a, device=device)
    x.assign(x + 1).realize()
    x.assign(x + 1).realize()
    lent = a.copy()
    lent.flags.writeable = False
    y = ug.asarray(lent, device=device)   # (on a host-memory device: lent memory, read-only)
    y.assign(y + 1).realize()
    np.testing.assert_allclose(y.numpy(), a + 1, rtol=1e-6)
    np.testing.assert_array_equal(lent, a)


def test_clear_forgets_schedules_and_the_cache_is_bounded(device, compile_cache, monkeypatch):
    monkeypatch.setattr(compile_cache.schedules, "max_entries", 3)
    x = ug.tensor(rand(8), device=device)
    for k in range(6):
        (x * float(k)).realize()
    assert len(compile_cache.schedules) == 3
    compile_cache.clear()
    assert len(compile_cache.schedules) == 0
    misses = compile_cache.misses
    (x * 5.0).realize()
    assert compile_cache.misses == misses + 1


def test_debug_output_shows_the_schedule_every_time(device, compile_cache, monkeypatch, capsys):
    x = ug.tensor(rand(8), device=device)
    (x + 1).realize()
    monkeypatch.setenv("UG_DEBUG", "1")
    (x + 1).realize()
    assert "schedule: 1 kernel" in capsys.readouterr().err


