"""Tensors that travel between processes (issue 28, "chunks that travel"): a pickled tensor is its
value on the host (a lazy one is realized first) with its dtype and device name; where it lands in
the reading process is `ug_core.plugins.unpickle_device`'s rule:
- by default on the device of the same name (a ValueError naming it and the usable devices there
  when the reader has no such device);
- $UG_UNPICKLE_DEVICE=preferred: on the reader's preferred device ($UG_DEVICE, else the first usable);
- $UG_UNPICKLE_DEVICE=NAME: on that device (the same clear error when it is absent).
The value travels out of band under pickle protocol 5 (what dask.distributed uses), and the rule
holds in a fresh process (a spawned child reads the parent's pickle under its own environment)."""
from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

import ug_core as ug
from ug_core.plugins import UNPICKLE_DEVICE_ENV, unpickle_device

DEVICES = [d for d in ("ref", "cpu") if d in ug.devices()]
VALUES = (np.arange(24).reshape(4, 6) * 0.5).astype(np.float32)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(UNPICKLE_DEVICE_ENV, raising=False)
    monkeypatch.delenv("UG_DEVICE", raising=False)


@pytest.mark.parametrize("dev", DEVICES)
def test_the_default_keeps_the_device_and_realizes_lazy_tensors(dev):
    lazy = ug.asarray(VALUES, device=dev)[1:].T * 2 + 1
    back = pickle.loads(pickle.dumps(lazy))
    assert back.device == dev and back.dtype == np.float32 and back.shape == (6, 3)
    np.testing.assert_array_equal(back.numpy(), VALUES[1:].T * 2 + 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_preferred_puts_it_on_the_readers_preferred_device(dev, monkeypatch):
    data = pickle.dumps(ug.asarray(VALUES, device=dev))
    other = next(d for d in ug.devices() if d != dev)
    monkeypatch.setenv("UG_DEVICE", other)
    monkeypatch.setenv(UNPICKLE_DEVICE_ENV, "preferred")
    back = pickle.loads(data)
    assert back.device == other == unpickle_device(dev)
    np.testing.assert_array_equal(back.numpy(), VALUES)


def test_a_named_device_and_an_absent_one(monkeypatch):
    data = pickle.dumps(ug.asarray(VALUES, device=DEVICES[-1]))
    monkeypatch.setenv(UNPICKLE_DEVICE_ENV, "ref")
    assert pickle.loads(data).device == "ref"
    monkeypatch.setenv(UNPICKLE_DEVICE_ENV, "nodevice")
    with pytest.raises(ValueError, match=r"device 'nodevice' here \(UG_UNPICKLE_DEVICE='nodevice' names it\)"
                                         r".*usable devices here: .*ref"):
        pickle.loads(data)


def test_a_device_the_reader_lacks_names_it_and_the_usable_ones():
    data = pickle.dumps(ug.ones(3, device="ref"))
    absent = data.replace(bytes([3]) + b"ref", bytes([8]) + b"nodevice")
    with pytest.raises(ValueError, match=r"cannot unpickle a tensor of device 'nodevice' here \(it was pickled on "
                                         r"device 'nodevice'\).*usable devices here: .*ref.*UG_UNPICKLE_DEVICE"):
        pickle.loads(absent)


@pytest.mark.parametrize("dev", DEVICES)
def test_protocol_5_sends_the_value_out_of_band(dev):
    big = np.random.default_rng(0).random((256, 256))
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(ug.asarray(big, device=dev) + 0, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and buffers[0].raw().nbytes == big.nbytes
    assert len(data) < 1024           # the stream holds the metadata only
    back = pickle.loads(data, buffers=buffers)
    assert back.device == dev and back.dtype == np.float64
    np.testing.assert_array_equal(back.numpy(), big + 0)


def test_dask_distributed_serialization_round_trips():
    protocol = pytest.importorskip("distributed.protocol")
    t = ug.asarray(VALUES, device=DEVICES[-1]) * 3
    header, frames = protocol.serialize(t)
    back = protocol.deserialize(header, frames)
    assert isinstance(back, ug.Tensor) and back.device == DEVICES[-1]
    np.testing.assert_array_equal(back.numpy(), VALUES * 3)


def _load_in_child(data: bytes, env: dict[str, str]) -> tuple[str, np.ndarray] | str:
    import os
    os.environ.update(env)
    try:
        t = pickle.loads(data)
    except ValueError as e:
        return f"ValueError: {e}"
    return t.device, t.numpy()


def test_a_fresh_process_reads_it_under_its_own_environment():
    data = pickle.dumps(ug.asarray(VALUES, device=DEVICES[-1]) - 1)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        same = pool.apply(_load_in_child, (data, {}))
        moved = pool.apply(_load_in_child, (data, {"UG_DEVICE": "ref", UNPICKLE_DEVICE_ENV: "preferred"}))
        absent = pool.apply(_load_in_child, (data, {UNPICKLE_DEVICE_ENV: "nodevice"}))
    assert same[0] == DEVICES[-1] and moved[0] == "ref"
    for _, values in (same, moved):
        np.testing.assert_array_equal(values, VALUES - 1)
    assert isinstance(absent, str) and "'nodevice'" in absent and "usable devices here" in absent
