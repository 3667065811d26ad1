"""The Array API's elementwise functions of a complex argument, over pairs of real tensors.

Each function takes the real and imaginary parts of its complex argument(s) as two real ug
tensors of one dtype (float32 for complex64, float64 for complex128) and returns the parts of
its result: `exp(re, im) -> (re, im)`. Every one is built only from ug's real tensor ops (where,
exp, log, sin, cos, sqrt, atan2, hypot, log1p, ...), so it is lazy, fuses into one kernel with
its neighbours, runs on every device, and differentiates (the holomorphic ones with their own
derivative, f'(z), so that the careful formulas' unused branches give no NaN gradients). The
complex tensors of the graph reach these through the REAL/IMAG/COMPLEX ops (tensor_arith's
parts and combine).

The formulas are those of C99's Annex G as FreeBSD's msun writes them (which numpy's npymath
copies): Kahan's for sqrt and tanh, the scaled exp for the hyperbolic functions, CPython's
log1p form for a logarithm near 1, and Hull, Fairgrieve and Tang's for asinh, acos and their
relatives (msun's catrig.c). Their special cases (infinities, NaNs, signed zeros) are the
standard's (2024.12) and C99's; where numpy (glibc underneath) differs from the standard the
standard wins, and where the standard leaves a sign open, C99's symmetries do (f(conj z) ==
conj(f(z)), the odd and even functions): docs/array-api.md lists the differences from numpy.
pow is numpy's: z**0 == 1, 0**w, and the integer exponents below 100 in magnitude by repeated
multiplication (exact for z**2).

Accuracy (tests/test_complex_math.py measures it against mpmath; the bounds are there, the
table per device in docs/array-api.md, "Complex functions: accuracy"): within 3.5 ulp of
|result| in float32 and float64 on cpu, ref, c and vulkan.

The functions, by family: exp_log.py (exp, expm1, log, log1p, log2, log10, sqrt), power.py
(pow), trig.py (sinh, cosh, tanh, sin, cos, tan), inverse_trig.py (asinh, asin, acos, acosh,
atanh, atan), arithmetic.py (products and quotients of pairs, reciprocal, square, sign, round,
and |z|); common.py holds the dtypes' constants and the helpers they share.
"""

import sys

from .. import _complex
from .arithmetic import absolute, reciprocal, round, sign, square
from .exp_log import exp, expm1, log, log10, log1p, log2, sqrt
from .inverse_trig import acos, acosh, asin, asinh, atan, atanh
from .power import pow
from .trig import cos, cosh, sin, sinh, tan, tanh

__all__ = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1", "log", "log10", "log1p",
           "log2", "pow", "reciprocal", "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh"]

# elementwise's and transcendental's functions, and the Tensor's operators, hand complex
# arguments to _complex, which is below this module: it finds these functions there
_complex.register_math(sys.modules[__name__])
