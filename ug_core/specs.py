"""What the runtime hands a device for the schedule items that are not kernels (a matmul, a fused
attention, a sort, an FFT): each item's layout and meaning as plain frozen data, which the
scheduler builds and the device (ug_core.device.Device; the kit's devices) runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .view import View


@dataclass(frozen=True)
class MatmulSpec:
    """out[b..., m, n] = sum_k a[b..., m, k] * b[b..., k, n]; the views give each operand's layout
    (any strides, stride 0 for broadcast batch dims) inside its buffer.

    A split operand (a_split or b_split > 1, only for a device whose `reads_split_operands` is
    True): A's m (B's k) is a flattening of that many dims of its view, which no single stride
    walks: a_view's shape is (b..., *m dims, k), b_view's (b..., *k dims, n). The rows of a
    convolution's im2col matrix are (channel, tap row, tap column) of the image: so the matmul
    reads them in place instead of from a copy laid out as a matrix (ug_core.nn.conv)."""

    a_view: "View"
    b_view: "View"
    out_shape: tuple[int, ...]
    dtype: np.dtype
    a_split: int = 1
    b_split: int = 1


@dataclass(frozen=True)
class SortSpec:
    """Sort each of `rows` rows of `n` contiguous elements of the source (ug's sort order: NaN
    after every number; descending is the exact reverse, NaN first, except that equal elements
    keep their order when `stable`), writing the first `k` of each sorted row (k == n: all; a
    top-k otherwise) into the output's rows of k: the values (the source's dtype) or, with
    `indices`, their positions in the row (the output's integer dtype)."""

    rows: int
    n: int
    k: int
    descending: bool
    stable: bool
    indices: bool


FFT_NORMS = ("backward", "ortho", "forward")
"""The Array API's (numpy's) normalizations of a transform: which direction is scaled by 1/n
("backward": the inverse; "forward": the forward one), or both by 1/sqrt(n) ("ortho")."""


@dataclass(frozen=True)
class FftSpec:
    """A discrete Fourier transform of length `n` along the middle axis of the source, read as
    (outer, n_in, inner) contiguous elements (`inner` is the axis's stride), into the output's
    (outer, n_out, inner): out[o, k, i] = scale * sum_j x[o, j, i] exp(-+2 pi i j k / n), the sign
    + where `inverse`. The source is zero-padded (n_in < n) or truncated (n_in > n) to the
    length the transform uses; complex values are pairs of `dtype` (float32 / float64: a
    complex64 buffer is byte for byte float32 pairs).

    The variants (numpy's names for the common ones):
    - complex in, complex out (real_in = real_out = onesided = False): fft / ifft;
    - real in, complex out: every one of the n outputs (fft of a real array), or with `onesided`
      the first n // 2 + 1 (rfft; ihfft when `inverse`);
    - complex in, real out: with `onesided`, the first n // 2 + 1 inputs are the half of a
      Hermitian spectrum (the rest are their conjugates; the imaginary parts of the first and,
      for even n, the middle one do not count) and the result is real (irfft; hfft when not
      `inverse`); without, the real part of the complex transform (a gradient's).
    `norm` scales the result (`scale`): 1, 1 / sqrt(n) or 1 / n as FFT_NORMS says.

    `packed`: the source is a real array of 2 n_in elements of `dtype` along the axis (inner ==
    1), read as n_in complex pairs (a complex transform of its even and odd elements, which an
    rfft of twice the length finishes in a fused kernel: array_api.fft). Its buffer is byte for
    byte those pairs, so a device that reads the source's bytes as the spec's complex values
    (every implementation in the kit does) has nothing else to do."""

    outer: int
    inner: int
    n: int
    n_in: int
    real_in: bool
    real_out: bool
    onesided: bool
    inverse: bool
    norm: str
    dtype: np.dtype
    packed: bool = False

    def __post_init__(self) -> None:
        assert self.n >= 1 and self.n_in >= 1 and self.outer >= 0 and self.inner >= 0, self
        assert not (self.real_in and self.real_out) and self.norm in FFT_NORMS, self
        assert not self.packed or (self.inner == 1 and not self.real_in), self
        assert not self.onesided or self.real_in or self.real_out, self

    @property
    def rows(self) -> int:
        """How many transforms: outer * inner."""
        return self.outer * self.inner

    @property
    def n_used(self) -> int:
        """How many of the source's elements along the axis the transform reads (before the
        zeros of a padding): a half spectrum's n // 2 + 1, else n."""
        return self.n // 2 + 1 if self.onesided and self.real_out else self.n

    @property
    def n_out(self) -> int:
        """The output's extent along the axis: a half spectrum's n // 2 + 1, else n."""
        return self.n // 2 + 1 if self.onesided and not self.real_out else self.n

    @property
    def scale(self) -> float:
        """What the sums are multiplied by: 1, 1 / sqrt(n) or 1 / n (norm and direction)."""
        if self.norm == "ortho":
            return 1.0 / float(np.sqrt(self.n))
        return 1.0 / self.n if (self.norm == "backward") == self.inverse else 1.0


@dataclass(frozen=True)
class AttentionSpec:
    """out[b..., i, :] = softmax_j(q[b..., i, :] . k[b..., j, :] * scale + mask[b..., i, j]) @ v[b..., :, :]
    (torch's scaled_dot_product_attention): q (..., L, E), k (..., S, E), v (..., S, Ev), the
    additive float mask (..., L, S) (None: none); `causal` keeps key j for query i where j <= i
    (on top of the mask). The views give each operand's layout inside its buffer (any strides,
    stride 0 for broadcast dims); every operand's batch dims are out's (..., L, Ev). A query that
    keeps no key (every score -inf) is NaN."""

    q_view: "View"
    k_view: "View"
    v_view: "View"
    mask_view: "View | None"
    out_shape: tuple[int, ...]
    dtype: np.dtype
    scale: float
    causal: bool
