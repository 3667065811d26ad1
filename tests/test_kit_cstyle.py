"""The kit's C-style renderer in a dialect other than C99 / CUDA C: an OpenCL-C-like configuration
of its tables (integer types, index type, literal and math suffixes, NaN/inf literals, workgroup
memory at function scope), checked on the source text, without OpenCL installed."""

import re

import numpy as np
import pytest

from ug_core.kit import (BOOL, INDEX, CStyleRenderer, LoopBuilder, LoopProgram, Op, Opc, ParamSpec, Special,
                         c_helpers, int_helpers, int_types, lower_kernel, wrap_types)
from ug_core.kit import DeviceInfo, LowerOptions
from ug_core.testing import lowering_cases

F32, F64, I64, U64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.uint64)
OPENCL_INTS = int_types("char", "short", "int", "long", "uchar", "ushort", "uint", "ulong")


class OpenCLLike(CStyleRenderer):
    ctypes = {F32: "float", F64: "double", np.dtype(bool): "bool", **OPENCL_INTS}
    unsigned = wrap_types(OPENCL_INTS)
    index_type = "long"
    int_suffixes = {I64: "L", U64: "UL", **{dt: "u" for dt in OPENCL_INTS if dt.kind == "u" and dt != U64}}
    math_suffixes = {}   # exp, log, ... are overloaded
    nan_literal = "(({t})NAN)"
    inf_literal = "(({t})INFINITY)"
    shared_at_function_scope = True

    def head(self, name, program):
        params = [f"__global {'' if p.is_output else 'const '}{self.ctype(p.dtype)}* b{i}" for i, p in enumerate(program.params)]
        return f"__kernel void {name}({', '.join(params)}) {{"

    def special(self, kind, dim):
        return {Special.GROUP_ID: f"(long)get_group_id({dim})", Special.LOCAL_ID: f"(long)get_local_id({dim})",
                Special.GLOBAL_ID: f"(long)get_global_id({dim})"}[kind]

    def shared(self, ctype, name, n):
        return f"__local {ctype} {name}[{n}];"

    def barrier(self):
        return "barrier(CLK_LOCAL_MEM_FENCE);"

    def bitcast(self, expr, src, dst):
        return f"as_{self.ctype(dst)}({expr})"


def _nested_local_program() -> LoopProgram:
    """A gpu program whose shared array is defined inside two IFs (as a guarded grid
    makes them): out[g] = exp(x[g * 64]) through shared memory, NaN where
    it is negative, and two int64 constants stored into ints[g]."""
    b = LoopBuilder()
    out, x, ints = b.emit(Opc.PARAM, F32, (), 0), b.emit(Opc.PARAM, F32, (), 1), b.emit(Opc.PARAM, I64, (), 2)
    group = b.emit(Opc.SPECIAL, INDEX, (), (Special.GROUP_ID, 0))
    lid = b.emit(Opc.SPECIAL, INDEX, (), (Special.LOCAL_ID, 0))
    b.if_(b.alu(Op.CMPLT, (group, b.const(5)), BOOL))
    b.if_(b.alu(Op.CMPLE, (b.const(0), group), BOOL))   # (uniform in a workgroup, as a grid's guard)
    smem = b.emit(Opc.DEFINE_LOCAL, F32, (), 64)
    value = b.load(x, b.add(b.mul(group, 64), lid), F32, True)
    b.emit(Opc.LOCAL_STORE, None, (smem, lid, value))
    b.emit(Opc.BARRIER, None)
    total = b.emit(Opc.LOCAL_LOAD, F32, (smem, b.const(0)))
    nan = b.const(float("nan"), F32)
    total = b.alu(Op.WHERE, (b.alu(Op.CMPLT, (total, b.const(0.0, F32)), BOOL), nan, b.alu(Op.EXP, (total,), F32)), F32)
    b.emit(Opc.STORE, None, (out, group, total))
    b.close()
    r = b.open(Opc.RANGE, INDEX, (b.const(0), b.const(2)), 1)
    b.emit(Opc.STORE, None, (ints, b.add(b.mul(group, 2), r), b.const(-2**63, I64)))
    b.close()
    b.emit(Opc.STORE, None, (ints, b.add(group, b.const(10)), b.const(3 << 33, I64)))
    b.close()
    params = (ParamSpec(F32, True, 5), ParamSpec(F32, False, 320), ParamSpec(I64, True, 15))
    program = LoopProgram("nested", "gpu", params, (5,), (64,), b.finish())
    program.verify()
    return program


def _body(source: str) -> list[str]:
    return source.splitlines()[1:]


def test_an_opencl_like_dialect_declares_local_memory_at_kernel_scope_in_its_own_types():
    program = _nested_local_program()
    source = OpenCLLike().render(program, "nested")
    lines = source.splitlines()
    assert lines[0] == "__kernel void nested(__global float* b0, __global const float* b1, __global long* b2) {"
    # the __local array is the body's first statement, at the kernel's top level, before any block
    assert re.fullmatch(r"  __local float local\d+\[64\];", lines[1]), source
    assert sum("__local" in line for line in lines) == 1
    first_block = next(i for i, line in enumerate(lines) if line.rstrip().endswith("{") and i > 0)
    assert first_block > 1
    # index math and loop counters in the dialect's index type, literals with its suffixes
    assert re.search(r"for \(long v\d+ = 0L; v\d+ < 2L; v\d+ \+= 1L\) \{", source), source
    assert "(-9223372036854775807L - 1L)" in source and "25769803776L" in source
    assert "LL" not in source and "long long" not in source
    # no C99 math suffix or GCC builtin: exp is overloaded, NaN is the macro
    assert re.search(r"\bexp\(", source) and "expf" not in source
    assert "((float)NAN)" in source and "__builtin" not in source and "memcpy" not in source
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in source and "(long)get_local_id(0)" in source


def test_the_c99_default_keeps_shared_memory_where_the_program_defines_it():
    class CudaLike(OpenCLLike):
        shared_at_function_scope = False

        def shared(self, ctype, name, n):
            return f"__shared__ {ctype} {name}[{n}];"
    source = CudaLike().render(_nested_local_program(), "nested")
    inner = next(line for line in source.splitlines() if "__shared__" in line)
    assert inner.startswith("      __shared__")   # inside the two IFs


def test_a_lowered_kernel_in_the_opencl_like_dialect():
    """A real kernel (a row softmax, lowered for a gpu target with workgroups of 64 and
    legalized by the kit) renders with no C99 spelling left."""
    kernel = lowering_cases.softmax(np.random.default_rng(0), 40, 3000).kernel
    info = DeviceInfo("opencl-like", frozenset(map(np.dtype, ["float32", "int32", "int64", "bool"])),
                      LowerOptions(target="gpu", local_size=64))
    source = OpenCLLike().render(lower_kernel(kernel, info), "softmax")
    body = "\n".join(_body(source))
    assert body.count("__local") >= 1 and all(line.startswith("  __local") for line in body.splitlines() if "__local" in line)
    declared = [i for i, line in enumerate(body.splitlines()) if "__local" in line]
    assert declared == list(range(len(declared)))   # the first lines of the body
    assert "LL" not in source and "long long" not in source and "expf" not in source and "__builtin" not in source


def test_the_helpers_have_a_spelling_without_memcpy_and_in_the_dialects_int_types():
    helpers = c_helpers(bitcast="union")
    assert "memcpy" not in helpers and "union { T a; U b; } u;" in helpers
    assert "memcpy" in c_helpers()
    ints = int_helpers(OPENCL_INTS)
    assert "UG_INT_HELPERS(i64, long, ulong)" in ints and "UG_UINT_HELPERS(u8, uchar, uint)" in ints
    assert "long long" not in ints and "unsigned" not in ints
    with pytest.raises(ValueError, match="bitcast"):
        c_helpers(bitcast="builtin")
    with pytest.raises(ValueError, match="8 type names"):
        int_types("int", "long")
