"""torch.nn.functional.interpolate on ug tensors.

Interpolation: per spatial axis, a gather (`take`) of the source rows at indices computed from
the shapes alone (host ints, as torch computes them), and for the linear modes a lerp of two
gathers with weights from the shapes. The 'area' mode is adaptive average pooling (pool.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..array_api.indexing import take
from ..tensor import Tensor, tensor
from .pool import _adaptive
from .windows import _check_tensor, _ints

__all__ = ["interpolate"]


_MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3}
_CUBIC_A = -0.75
"""torch's (and OpenCV's) bicubic convolution coefficient."""


def _source_scale(n: int, m: int, scale: float | None, align_corners: bool, ftype: type) -> Any:
    """torch's area_pixel_compute_scale, in the input's float precision (ftype): the source
    step per output step."""
    if align_corners:
        return ftype((n - 1) / (m - 1)) if m > 1 else ftype(0)
    if scale is not None and scale > 0:
        return ftype(1.0 / scale)
    return ftype(n) / ftype(m)


def _nearest_index(n: int, m: int, scale: float | None, exact: bool) -> np.ndarray:
    """torch's nearest source indices (computed in float32 as torch does, so ties round alike)."""
    dst = np.arange(m)
    if not exact and m == n:
        return dst
    if not exact and m == 2 * n:
        return dst >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n) / np.float32(m)
    if exact:
        src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(dst.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), n - 1)


def _linear_taps(n: int, m: int, scale: float | None, align_corners: bool,
                 dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch's linear interpolation per output index: (i0, i1, lambda1), in the input's precision."""
    ftype = np.float64 if dtype == np.float64 else np.float32
    s = _source_scale(n, m, scale, align_corners, ftype)
    dst = np.arange(m).astype(ftype)
    src = s * dst if align_corners else np.maximum(s * (dst + ftype(0.5)) - ftype(0.5), ftype(0))
    i0 = src.astype(np.int64)
    i1 = np.where(i0 < n - 1, i0 + 1, i0)
    lam = (src - i0.astype(ftype)).astype(ftype)
    return i0, i1, lam


def _cubic_taps(n: int, m: int, scale: float | None, align_corners: bool,
                dtype: np.dtype) -> list[tuple[np.ndarray, np.ndarray]]:
    """torch's bicubic taps per output index: four (index, weight) pairs, the source indices
    floor(x) - 1 .. floor(x) + 2 clamped into [0, n), the weights Keys' cubic convolution (a =
    -0.75) at the fraction t, in the input's precision; the source x is not clamped at 0."""
    ftype = np.float64 if dtype == np.float64 else np.float32
    s = _source_scale(n, m, scale, align_corners, ftype)
    dst = np.arange(m).astype(ftype)
    src = s * dst if align_corners else s * (dst + ftype(0.5)) - ftype(0.5)
    base = np.floor(src)
    t = (src - base).astype(ftype)
    a = ftype(_CUBIC_A)

    def near(x: np.ndarray) -> np.ndarray:     # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:      # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
    return [(np.clip(base.astype(np.int64) - 1 + j, 0, n - 1), w.astype(ftype)) for j, w in enumerate(weights)]


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of input (N, C, *spatial; 1 to 3 of them) to `size`, or by
    `scale_factor` (then the size is floor(n * scale_factor)), as torch.nn.functional.interpolate,
    for modes 'nearest', 'nearest-exact', 'linear' (3-d input), 'bilinear' (4-d), 'bicubic' (4-d),
    'trilinear' (5-d) and 'area' (adaptive average pooling to the size); align_corners for the
    linear and cubic modes only. Each dim is a gather of source rows (and a lerp, or the four
    taps of a cubic: torch's a = -0.75 kernel, unclamped, so values may overshoot the input's)."""
    fn = "interpolate"
    _check_tensor(input, fn, "input")
    if mode not in _MODES:
        raise ValueError(f"{fn}: mode must be one of {sorted(_MODES)}, got {mode!r}")
    if antialias:
        raise ValueError(f"{fn}: antialias=True is not supported")
    nd = input.ndim - 2
    if nd < 1 or nd > 3:
        raise ValueError(f"{fn}: input must be 3-d, 4-d or 5-d (N, C, *spatial), got shape {input.shape}")
    want = _MODES[mode]
    if want is not None and want != nd:
        raise ValueError(f"{fn}: mode {mode!r} needs a {want + 2}-d input, got shape {input.shape}")
    if want is None and align_corners is not None:
        raise ValueError(f"{fn}: align_corners only has an effect with the linear and cubic modes, not mode={mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{fn}: exactly one of size and scale_factor must be given, got size={size!r}, "
                         f"scale_factor={scale_factor!r}")
    spatial = input.shape[2:]
    scales: list[float | None]
    if size is not None:
        outs = _ints(size, nd, fn, "size", 1) if not isinstance(size, (tuple, list)) or len(size) == nd \
            else None
        if outs is None:
            raise ValueError(f"{fn}: size must be an int or a tuple of {nd} ints for input of shape "
                             f"{input.shape}, got {size!r}")
        scales = [None] * nd
    else:
        items = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * nd
        if len(items) != nd:
            raise ValueError(f"{fn}: scale_factor must be a number or a tuple of {nd} numbers for input of shape "
                             f"{input.shape}, got {scale_factor!r}")
        try:
            factors = [float(f) for f in items]
        except (TypeError, ValueError):
            raise TypeError(f"{fn}: scale_factor must be a number or a tuple of numbers, got {scale_factor!r}") \
                from None
        if any(not f > 0 or not math.isfinite(f) for f in factors):
            raise ValueError(f"{fn}: scale_factor must be positive and finite, got {scale_factor!r}")
        outs = tuple(int(math.floor(n * f)) for n, f in zip(spatial, factors))
        if any(m < 1 for m in outs):
            raise ValueError(f"{fn}: scale_factor {scale_factor!r} makes an empty output {outs} from input "
                             f"of shape {input.shape}")
        scales = [None] * nd if recompute_scale_factor else list(factors)
    if (want is not None or mode == "area") and input.dtype.kind != "f":
        raise TypeError(f"{fn}: mode {mode!r} needs a floating-point input, got {input.dtype}")
    if mode == "area":   # torch's: adaptive average pooling to the output size
        return _adaptive(input, outs, nd, False, fn)
    # one gather per corner of the source cell (2 ** nd for the linear modes, 1 for nearest) from
    # the flattened spatial dims, at flat indices (and with weights) that are broadcast sums (and
    # products) of per-dim host vectors: the whole resize is one kernel reading the input
    flat = input.reshape(*input.shape[:2], math.prod(spatial))
    inner = [math.prod(spatial[a + 1:]) for a in range(nd)]

    def along(values: np.ndarray, a: int) -> Tensor:
        """A per-dim host vector as a tensor broadcasting along output dim a."""
        return tensor(values, device=input.device).reshape(*(1,) * a, -1, *(1,) * (nd - a - 1))

    if want is None:
        index: Tensor | None = None
        for a, (n, m, scale) in enumerate(zip(spatial, outs, scales)):
            term = along(_nearest_index(n, m, scale, mode == "nearest-exact") * inner[a], a)
            index = term if index is None else index + term
        assert index is not None
        return take(flat, index, axis=2)
    taps: list[list[tuple[np.ndarray, np.ndarray]]] = []
    for n, m, scale in zip(spatial, outs, scales):
        if mode == "bicubic":
            taps.append(_cubic_taps(n, m, scale, bool(align_corners), input.dtype))
        else:
            i0, i1, lam = _linear_taps(n, m, scale, bool(align_corners), input.dtype)
            taps.append([(i0, 1 - lam), (i1, lam)])
    out: Tensor | None = None
    for corner in np.ndindex(*(len(t) for t in taps)):
        index = weight = None
        for a, (j, per_dim) in enumerate(zip(corner, taps)):
            i_term = along(per_dim[j][0] * inner[a], a)
            w_term = along(per_dim[j][1].astype(input.dtype), a)
            index = i_term if index is None else index + i_term
            weight = w_term if weight is None else weight * w_term
        assert index is not None and weight is not None
        term = take(flat, index, axis=2) * weight
        out = term if out is None else out + term
    assert out is not None
    return out
