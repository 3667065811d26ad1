"""Lowering kernel IR to loop IR, checked by running the loop IR in tests/loop_interp.py.

Each kernel is built directly in kernel IR, lowered for several targets / workgroup
sizes, interpreted with numpy and compared with a numpy reference. The kernels are the kit's
(ug_core/testing/lowering_cases.py), whose test_lowering_on_device.py has each device compile
and run them itself.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

from ug_core.kernel_ir import BufferArg, ExprBuilder, Kernel, Store
from ug_core.loop_ir import INDEX, Inst, LoopProgram, Opc, ParamSpec, Special
from ug_core.lower import LowerOptions, lower
from ug_core.ops import ALU, Op
from ug_core.testing.lowering_cases import (BASIC, CASTS, F32, ROW_LENGTHS, Case, add_broadcast, alu_case, big_sum_case, c,
                                            cast_case, chained, check_outputs, column_softmax, column_sum,
                                            column_sum_accuracy_case, empty_outer, full_sum, initial_buffers, layernorm,
                                            middle_mean_max, outer_blocked_cases, random_case, row_length_cases,
                                            row_reduce, softmax)

sys.path.insert(0, os.path.dirname(__file__))
import loop_interp  # noqa: E402

CONFIGS = {
    "cpu": LowerOptions("cpu"),
    "cpu-block16": LowerOptions("cpu", sum_block=16),
    # outer-blocked: every kernel with a reduction, B outer indices per global id
    "cpu-outer5": LowerOptions("cpu", sum_block=16, outer_block=5, outer_block_always=True),
    "cpu-outer64": LowerOptions("cpu", outer_block=64, outer_block_always=True),
    "gpu-l1": LowerOptions("gpu", local_size=1, gpu_serial_max_extent=0),
    "gpu-l7": LowerOptions("gpu", local_size=7, gpu_serial_max_extent=0),
    "gpu-l32": LowerOptions("gpu", local_size=32, gpu_serial_max_extent=0),
    "gpu-l64": LowerOptions("gpu", local_size=64, gpu_serial_max_extent=0),
    "gpu-l256": LowerOptions("gpu", local_size=256, gpu_serial_max_extent=0),
    "gpu-atomics": LowerOptions("gpu", local_size=64, atomic_int_bits=(32, 64)),
    "gpu-atomics32": LowerOptions("gpu", local_size=7, atomic_int_bits=(32,), max_global_size=(2, 2, 65535)),
    "gpu-default": LowerOptions("gpu"),
    "gpu-serial": LowerOptions("gpu", local_size=32, gpu_serial_max_extent=10**9),
    "gpu-grid-spill": LowerOptions("gpu", local_size=4, max_global_size=(3, 2, 65535), gpu_serial_max_extent=0),
    "gpu-serial-spill": LowerOptions("gpu", local_size=4, max_global_size=(2, 3, 65535)),
}


def run_case(case: Case, opts: LowerOptions) -> LoopProgram:
    """Lower the case's kernel with `opts`, run it in the interpreter (outputs start as poison, so
    that elements never written show up) and check what it wrote."""
    program = lower(case.kernel, opts)
    buffers = initial_buffers(case)
    loop_interp.run(program, buffers)
    check_outputs(case, buffers, program)
    return program


# --- kernels -------------------------------------------------------------------------------


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(BASIC))
def test_kernel(rng, name, config):
    run_case(BASIC[name](rng), CONFIGS[config])


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_row_lengths(rng, n, config):
    for case in row_length_cases(rng, n):   # softmax, layernorm and a row min over rows of n
        run_case(case, CONFIGS[config])


# --- properties of the generated code -------------------------------------------------------


def opcodes(program: LoopProgram) -> list[Opc]:
    return [i.opc for i in program.instructions]


def test_gpu_scatter_uses_atomics_for_ints_where_the_target_has_them(rng):
    from ug_core.testing.lowering_cases import scatter
    with_atomics = LowerOptions("gpu", local_size=64, atomic_int_bits=(32,))
    assert "atomic.add" in str(lower(scatter(rng, Op.SUM, np.int32).kernel, with_atomics))
    assert "atomic.max" in str(lower(scatter(rng, Op.RMAX, np.uint32).kernel, with_atomics))
    for case, opts in [(scatter(rng, Op.SUM, np.int64), with_atomics),           # no 64-bit atomics
                       (scatter(rng, Op.SUM, np.float32), with_atomics),         # floats: in order
                       (scatter(rng, Op.SUM, np.int32), LowerOptions("gpu")),    # no atomics
                       (scatter(rng, Op.SUM, np.int32), LowerOptions("cpu", atomic_int_bits=(32,)))]:
        assert "atomic" not in str(lower(case.kernel, opts))


def test_print_shows_structure(rng):
    gpu = str(lower(softmax(rng, 4, 300).kernel, LowerOptions("gpu", local_size=64)))
    for word in ("range", "endrange", "barrier", "define_local [64]", "local_load", "special group_id.0",
                 "special local_id.0", "acc_update.max", "acc_update.add", "exp"):
        assert word in gpu, gpu
    cpu = str(lower(softmax(rng, 4, 3000).kernel, LowerOptions("cpu")))
    assert "special global_id.0" in cpu and "barrier" not in cpu and "define_acc" in cpu, cpu
    # the inner loop body is indented more than its loop
    lines = cpu.splitlines()
    loop = next(i for i, line in enumerate(lines) if " = range " in line)
    indent = lambda s: len(s) - len(s.lstrip())  # noqa: E731
    assert indent(lines[loop + 1]) > indent(lines[loop])


def test_index_math_is_simple(rng):
    # contiguous elementwise: the buffer index is the global index, no div/mod
    prog = lower(add_broadcast(rng, 8, 16).kernel, LowerOptions("cpu"))
    ops = opcodes(prog)
    assert ops.count(Opc.IDIV) == 0 and ops.count(Opc.MOD) == 1  # gidx % 16 for the broadcast row only
    eb = ExprBuilder()
    x = eb.load(0, (c((8, 16)),), F32)
    k = Kernel("copy", (BufferArg(F32, 128, False), BufferArg(F32, 128, True)), (8, 16), (), (),
               (Store(1, (8, 16), c((8, 16)), x),))
    ops = opcodes(lower(k, LowerOptions("cpu")))
    assert Opc.IDIV not in ops and Opc.MOD not in ops and Opc.ALU not in ops, ops
    # chains need div/mod
    assert Opc.MOD in opcodes(lower(chained(rng).kernel, LowerOptions("cpu")))


def test_transposing_copy_runs_rows(rng):
    # a copy whose load walks the outer dims in two runs (a transpose) would divide per element
    # with a flat index: on cpu each global id is a row of the output, looping over its 16
    # elements (the division by the row length happens once per row, outside the loop)
    from ug_core.view import View
    eb = ExprBuilder()
    x = eb.load(0, (View((8, 16), (1, 8)),), F32)
    k = Kernel("transpose", (BufferArg(F32, 128, False), BufferArg(F32, 128, True)), (8, 16), (), (),
               (Store(1, (8, 16), c((8, 16)), x),))
    prog = lower(k, LowerOptions("cpu"))
    assert prog.global_size == (8,)
    loop_start = next(i.id for i in prog.instructions if i.opc is Opc.RANGE)
    assert not [i for i in prog.instructions if i.opc in (Opc.IDIV, Opc.MOD) and i.id > loop_start], prog
    a = rng.standard_normal(128).astype(F32)
    out = np.zeros(128, F32)
    loop_interp.run(prog, [a, out])
    np.testing.assert_array_equal(out, a.reshape(16, 8).T.ravel())


def test_loop_invariant_index_is_hoisted_and_shared(rng):
    prog = lower(softmax(rng, 4, 300).kernel, LowerOptions("cpu"))
    insts = prog.instructions
    first_range = next(i for i in insts if i.opc is Opc.RANGE)
    row_base = [i for i in insts if i.opc is Opc.ALU and i.arg is Op.MUL and i.dtype == INDEX]
    assert len(row_base) == 1, prog  # gidx * 300, computed once for the three phases
    assert row_base[0].id < first_range.id


def test_cpu_sum_blocked_accuracy(rng):
    case = big_sum_case(rng, 3_000_000)
    a = case.inputs[0]
    prog = lower(case.kernel, LowerOptions("cpu"))
    out = np.zeros(1, F32)
    t = time.perf_counter()
    loop_interp.run(prog, [a, out])
    elapsed = time.perf_counter() - t
    exact = a.astype(np.float64).sum()
    assert abs(float(out[0]) - exact) / exact < 1e-4
    assert elapsed < 10
    # the interpreter really accumulates in float32: a plain sequential float32 loop is worse
    seq = np.add.accumulate(a)[-1]
    assert abs(float(seq) - exact) > abs(float(out[0]) - exact)


# --- the outer-blocked cpu strategy ----------------------------------------------------------


OUTER_BLOCKS = [1, 3, 8, 16, 64]


@pytest.mark.parametrize("block", OUTER_BLOCKS)
@pytest.mark.parametrize("sum_block", [16, 1024])
def test_outer_blocked(rng, block, sum_block):
    opts = LowerOptions("cpu", sum_block=sum_block, outer_block=block)
    for case in outer_blocked_cases(rng):
        prog = run_case(case, opts)
        blocked = Opc.DEFINE_LOCAL in opcodes(prog)
        n_outer = int(np.prod(case.kernel.outer))
        assert blocked == (block > 1 and n_outer > 1), prog
        if blocked:
            assert prog.global_size == (-(-n_outer // block),)


def test_outer_blocked_is_chosen_only_when_it_pays(rng):
    opts = LowerOptions("cpu", outer_block=16)
    blocked = lambda case: Opc.DEFINE_LOCAL in opcodes(lower(case.kernel, opts))  # noqa: E731
    assert (blocked(column_sum(rng, 100, 100)) and blocked(column_softmax(rng, 10, 50))
            and blocked(middle_mean_max(rng, 2, 9, 40)))
    # row reductions read the reduced index contiguously: the serial loop vectorizes
    assert (not blocked(row_reduce(rng, 8, 100)) and not blocked(softmax(rng, 8, 100))
            and not blocked(layernorm(rng, 4, 64)))
    assert not blocked(full_sum(rng, 7, 13)) and not blocked(add_broadcast(rng, 33, 70))
    # the lane loop is innermost: it reads x[i, o + lane], the loop over rows encloses it
    prog = lower(column_sum(rng, 100, 100).kernel, opts)
    loads = [i for i in prog.instructions if i.opc is Opc.LOAD]
    assert len(loads) == 1 and loads[0].srcs[1].opc is Opc.ALU
    assert prog.global_size == (7,)


def test_outer_blocked_sum_accuracy(rng):
    # per column: 1024 blocks of 16 rows; float32 as a sequential loop would drift
    run_case(column_sum_accuracy_case(rng, 16384, 3), LowerOptions("cpu", sum_block=16, outer_block=4))


def test_interpreter_runs_shared_memory_updates_in_order():
    # for i in 0..4: local[0] += 1 (a loop-carried update): must give 4, not 1
    out = Inst(Opc.PARAM, F32, (), 0)
    zero, four = Inst(Opc.CONST, INDEX, (), 0), Inst(Opc.CONST, INDEX, (), 4)
    one = Inst(Opc.CONST, F32, (), 1.0)
    local = Inst(Opc.DEFINE_LOCAL, F32, (), 1)
    init = Inst(Opc.LOCAL_STORE, None, (local, zero, Inst(Opc.CONST, F32, (), 0.0)))
    loop = Inst(Opc.RANGE, INDEX, (zero, four), 1)
    cur = Inst(Opc.LOCAL_LOAD, F32, (local, zero))
    new = Inst(Opc.ALU, F32, (cur, one), Op.ADD)
    body = [loop, cur, new, Inst(Opc.LOCAL_STORE, None, (local, zero, new)), Inst(Opc.ENDRANGE, None, (loop,))]
    final = Inst(Opc.LOCAL_LOAD, F32, (local, zero))
    insts = [out, zero, four, one, local, init.srcs[2], init] + body + [final, Inst(Opc.STORE, None, (out, zero, final))]
    prog = _program(insts, 1)
    prog.verify()
    buf = np.zeros(1, F32)
    loop_interp.run(prog, [buf])
    assert buf[0] == 4


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize("op", list(ALU), ids=lambda op: op.name)
def test_every_alu_op_lowers(rng, op, target):
    prog = run_case(alu_case(rng, op), LowerOptions(target, local_size=16))
    assert any(i.opc is Opc.ALU and i.arg is op for i in prog.instructions)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize("src,dst", CASTS)
def test_cast_lowers(rng, src, dst, target):
    prog = run_case(cast_case(rng, src, dst), LowerOptions(target))
    assert any(i.opc is Opc.CAST for i in prog.instructions)


def test_empty_kernel_is_empty_program():
    prog = lower(empty_outer().kernel, LowerOptions("gpu"))
    assert prog.is_empty and prog.instructions == []
    assert prog.params == (ParamSpec(F32, False, 0), ParamSpec(F32, True, 0))


def test_gpu_strategies_and_geometry(rng):
    k = softmax(rng, 5, 1000).kernel
    coop = lower(k, LowerOptions("gpu", local_size=128))
    assert coop.global_size == (5,) and coop.local_size == (128,)
    assert Opc.BARRIER in opcodes(coop)
    short = lower(softmax(rng, 1024, 8).kernel, LowerOptions("gpu", local_size=128))
    assert short.global_size == (8,) and short.local_size == (128,)  # one thread per row
    assert Opc.BARRIER not in opcodes(short) and Opc.IF not in opcodes(short)
    ragged = lower(softmax(rng, 1000, 8).kernel, LowerOptions("gpu", local_size=128))
    assert ragged.global_size == (8,) and opcodes(ragged).count(Opc.IF) == 1  # bounds check
    spill = lower(k, LowerOptions("gpu", local_size=64, max_global_size=(2, 2, 2)))
    assert spill.global_size == (2, 2, 2) and spill.local_size == (64, 1, 1)
    with pytest.raises(ValueError):
        lower(softmax(rng, 9, 100).kernel, LowerOptions("gpu", max_global_size=(2, 2, 2), gpu_serial_max_extent=0))
    cpu = lower(softmax(rng, 5, 1000).kernel, LowerOptions("cpu"))
    assert cpu.global_size == (5,) and cpu.local_size == (1,)


def test_lowering_is_fast(rng):
    kernel = layernorm(rng, 64, 4096).kernel
    t = time.perf_counter()
    for _ in range(20):
        lower(kernel, LowerOptions("gpu"))
        lower(kernel, LowerOptions("cpu"))
    assert time.perf_counter() - t < 2


# --- the interpreter's own checks -------------------------------------------------------------


def _program(insts: list[Inst], local: int) -> LoopProgram:
    for pos, inst in enumerate(insts):
        inst.id = pos
    return LoopProgram("hand", "gpu", (ParamSpec(F32, True, local),), (1,), (local,), insts)


def _shared_exchange(with_barrier: bool) -> LoopProgram:
    out = Inst(Opc.PARAM, F32, (), 0)
    smem = Inst(Opc.DEFINE_LOCAL, F32, (), 4)
    lid = Inst(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0))
    val = Inst(Opc.CAST, F32, (lid,))
    store = Inst(Opc.LOCAL_STORE, None, (smem, lid, val))
    one = Inst(Opc.CONST, INDEX, (), 1)
    four = Inst(Opc.CONST, INDEX, (), 4)
    nxt = Inst(Opc.MOD, INDEX, (Inst(Opc.ALU, INDEX, (lid, one), Op.ADD), four))
    insts = [out, smem, lid, val, store, one, four, nxt.srcs[0], nxt]
    if with_barrier:
        insts.append(Inst(Opc.BARRIER, None))
    load = Inst(Opc.LOCAL_LOAD, F32, (smem, nxt))
    insts += [load, Inst(Opc.STORE, None, (out, lid, load))]
    return _program(insts, 4)


def test_interpreter_detects_shared_memory_race():
    ok = _shared_exchange(with_barrier=True)
    ok.verify()
    buf = np.zeros(4, F32)
    loop_interp.run(ok, [buf])
    np.testing.assert_array_equal(buf, [1, 2, 3, 0])
    with pytest.raises(loop_interp.InterpError, match="since the last barrier"):
        loop_interp.run(_shared_exchange(with_barrier=False), [np.zeros(4, F32)])


def test_verify_rejects_bad_programs():
    out = Inst(Opc.PARAM, F32, (), 0)
    zero = Inst(Opc.CONST, INDEX, (), 0)
    end = Inst(Opc.CONST, INDEX, (), 4)
    loop = Inst(Opc.RANGE, INDEX, (zero, end), 1)
    barrier = Inst(Opc.BARRIER, None)
    close = Inst(Opc.ENDRANGE, None, (loop,))
    with pytest.raises(AssertionError, match="barrier inside a loop"):
        _program([out, zero, end, loop, barrier, close], 4).verify()
    # the loop counter is not visible after the loop
    val = Inst(Opc.CONST, F32, (), 1.0)
    use = Inst(Opc.STORE, None, (out, loop, val))
    with pytest.raises(AssertionError, match="not visible"):
        _program([out, zero, end, loop, Inst(Opc.ENDRANGE, None, (loop,)), val, use], 4).verify()


# --- random kernels ---------------------------------------------------------------------------


@pytest.mark.parametrize("config", list(CONFIGS))
def test_random_kernels(config):
    for seed in range(40):
        case = random_case(seed)
        try:
            run_case(case, CONFIGS[config])
        except Exception as e:
            raise AssertionError(f"seed {seed}:\n{case.kernel}") from e
