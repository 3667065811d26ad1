"""signbit and nextafter (Op.SIGNBIT, Op.NEXTAFTER) from a float's bits (BITCAST), for every
target: what no comparison can see (the sign of -0.0 and of a NaN) and steps of one ulp.

ug has no 16-bit integer, so float16 values are handled as float32 (which holds every float16
exactly, the sign of zeros and NaNs included): one float16 ulp is 2**13 float32 ulps over
float16's normal range; below it (float16's subnormals, float32 normals) it is 2**-24.
"""

from __future__ import annotations

import math

import numpy as np

from ..loop_ir import Inst
from ..ops import Op
from .emitter import F16, F32, INT_OF, MANTISSA_BITS, Emitter

F16_MANTISSA_BITS = 10
F16_MIN_NORMAL = 2.0 ** -14
F16_TINY = 2.0 ** -24   # the smallest float16 subnormal, and float16's ulp below F16_MIN_NORMAL
F16_MAX = 65504.0


def _bits(e: Emitter, x: Inst) -> Inst:
    """The bits of a float32 / float64 as the signed integer of its width (float64's need
    int64 on the target: see mathlib.expand_exact)."""
    return e.bitcast(x, INT_OF[x.dtype])


def signbit(e: Emitter, x: Inst) -> Inst:
    """Whether x's sign bit is set: its bits, as a signed integer, are negative."""
    return e.cmp(Op.CMPLT, _bits(e, e.cast(x, F32) if x.dtype == F16 else x), 0)


def nextafter(e: Emitter, x: Inst, y: Inst) -> Inst:
    """numpy's nextafter(x, y) in x's dtype: |x|'s bits one step up (away from zero) or down."""
    dt = x.dtype
    a, b = (e.cast(x, F32), e.cast(y, F32)) if dt == F16 else (x, y)
    ax = e.abs(a)
    away = e.cmp(Op.CMPEQ, e.cmp(Op.CMPLT, a, b), e.cmp(Op.CMPLT, 0.0, a))
    bits = _bits(e, ax)
    step = 1 << (MANTISSA_BITS[a.dtype] - F16_MANTISSA_BITS if dt == F16 else 0)
    magnitude = e.bitcast(e.where(away, e.add(bits, step), e.sub(bits, step)), a.dtype)
    if dt == F16:
        toward = e.not_(away)
        low = e.or_(e.cmp(Op.CMPLT, ax, F16_MIN_NORMAL), e.and_(e.cmp(Op.CMPEQ, ax, F16_MIN_NORMAL), toward))
        magnitude = e.where(low, e.where(away, e.add(ax, F16_TINY), e.sub(ax, F16_TINY)), magnitude)
        magnitude = e.where(e.and_(e.cmp(Op.CMPEQ, ax, math.inf), toward), F16_MAX, magnitude)
    tiny = F16_TINY if dt == F16 else float(np.finfo(dt).smallest_subnormal)
    out = e.where(e.cmp(Op.CMPLT, a, 0.0), e.neg(magnitude), magnitude)
    out = e.where(e.cmp(Op.CMPEQ, a, 0.0), e.where(signbit(e, b), -tiny, tiny, a.dtype), out)
    out = e.where(e.cmp(Op.CMPEQ, a, b), b, out)   # y, as C and numpy >= 2.5 (for float16 too)
    out = e.where(e.or_(e.is_nan(a), e.is_nan(b)), e.add(a, b), out)
    return e.cast(out, dt)
