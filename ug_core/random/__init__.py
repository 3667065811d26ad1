"""`ug.random`: counter-based random numbers, computed inside the kernels that use them.

JAX's functional design: a key is a uint32 tensor of shape (2,) (`key(seed)`), every function
takes a key and returns the same numbers for the same key, and new keys come from `split` and
`fold_in`. The numbers are a pure function of (key, position), so they are lazy graph nodes like
any other: `uniform(k, (1024,)) * 2 + 1` is one kernel, and under `ug.jit` a key is an argument
(a jitted function called with another key gives other numbers, without a retrace).

The generator is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011; the Random123 known-answer vectors are in the tests), built from uint32 ADD
(wrapping), XOR, SHL, SHR and OR, with JAX's "partitionable" counter scheme (JAX's default since
0.5): element i of `bits(key, shape)` is the two output words of Threefry(key, counter = i as
(high, low) 32-bit words) xored (uint64: high word, low word). `key`, `split`, `fold_in`, `bits`,
`uniform`, `randint`, `bernoulli`, `permutation` and `choice` give JAX's numbers bit for bit
(jax 0.10's numbers are frozen in ug_core/testing/test_random.py); `uniform` with bounds other
than [0, 1) differs from JAX on cpu in the last bit where XLA contracts u * (maxval - minval) +
minval into an fma. `normal` and
`truncated_normal` use JAX's method (sqrt(2) erfinv(u), u uniform in (-1, 1), Giles' erfinv) with
ug's own logarithm, so they agree with JAX's to a few ulp, not bit for bit.

Reproducibility: the same key gives the same bits on every device (cpu, vulkan, cuda, c, ref).
The integers are exact by construction; floats are made from them by an int -> float conversion of
a value below 2**mantissa (exact) times a power of two (exact). `normal` uses nothing but + - *
(correctly rounded on every device; the core never contracts a * b + c into an fma), comparisons,
selections and bit casts: its logarithm (exponent/mantissa split by bit cast, Cephes' polynomial
for float32, an atanh series for float64), its reciprocal and its square root (Newton iterations
from a bit-cast start) are ug's own, never the device's log, division or sqrt (which Vulkan allows
to be a few ulp off), and no intermediate is subnormal (which some GPUs flush to zero).
"""

# (threefry2x32, erfinv and _log: checked on their own by ug_core/testing/test_random.py;
# _check_key: ug.nn.dropout checks its key with it)
from .distributions import bernoulli, gumbel, normal, randint, truncated_normal, uniform
from .erfinv import _log, erfinv
from .permutations import choice, permutation
from .threefry import _check_key, bits, fold_in, key, split, threefry2x32

__all__ = ["key", "split", "fold_in", "bits", "uniform", "normal", "truncated_normal", "randint", "bernoulli",
           "gumbel", "permutation", "choice"]
