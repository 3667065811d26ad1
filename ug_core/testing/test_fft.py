"""The fft extension (ug.fft) on the device under test, against numpy.fft computed in float64:
every function, lengths that are powers of two, odd, prime (Bluestein's algorithm on a gpu
target) and 1, batches on both sides of the axis, n-d transforms, every norm, `n` / `s` padding
and truncation, the dtypes (float32 -> complex64 as numpy 2), the frequencies and shifts, the
derivatives against torch.autograd, and fusion with the work around a transform.

Accuracy: each transform within ||y - exact||_2 <= 2 eps log2(m) ||exact||_2 (eps of the
result's dtype; m the transform's length rounded up to a power of two, or Bluestein's 2n - 1
rounded up; docs/fft.md)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ug_core as ug

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
NORMS = ("backward", "ortho", "forward")
SIZES = [1, 2, 3, 8, 16, 64, 12, 15, 97]   # powers of two, odd, composite, prime
SIZE_IDS = [f"n{n}" for n in SIZES]


def cplx(rng, shape, dtype=C64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def bound(n: int) -> float:
    """2 log2(m) for the transform of length n (see the module doc), at least 2."""
    m = n if n & (n - 1) == 0 else 1 << (2 * n - 2).bit_length()
    return 2 * max(1.0, math.log2(m))


def check(got, want, n: int, axis: int = -1) -> None:
    """got (a ug tensor) against want (numpy's, in float64: dtype and shape from `dtype_of`),
    each transform along `axis` within the accuracy bound."""
    arr = got.numpy()
    assert arr.shape == want.shape, (arr.shape, want.shape)
    eps = np.finfo(arr.dtype).eps
    diff = np.moveaxis(arr.astype(want.dtype) - want, axis, -1).reshape(-1, want.shape[axis])
    ref = np.moveaxis(want, axis, -1).reshape(-1, want.shape[axis])
    scale = np.linalg.norm(ref, axis=-1)
    error = np.linalg.norm(diff, axis=-1)
    assert np.all(error <= bound(n) * eps * scale + np.finfo(arr.dtype).tiny), (error / np.maximum(scale, 1e-300)).max()


@pytest.mark.parametrize("n", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("name", ["fft", "ifft"])
@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_fft_ifft(device, require_dtype, rng, name, n, dtype):
    require_dtype(dtype)
    x = cplx(rng, (3, n), dtype)
    t = ug.tensor(x, device=device)
    for norm in NORMS:
        got = getattr(ug.fft, name)(t, norm=norm)
        assert got.dtype == dtype and got.shape == x.shape
        check(got, getattr(np.fft, name)(x.astype(C128), norm=norm), n)


@pytest.mark.parametrize("n", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("name", ["rfft", "ihfft"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_rfft_ihfft(device, require_dtype, rng, name, n, dtype):
    require_dtype(dtype, C64 if dtype == F32 else C128)
    x = rng.standard_normal((2, n)).astype(dtype)
    t = ug.tensor(x, device=device)
    for norm in NORMS:
        got = getattr(ug.fft, name)(t, norm=norm)
        assert got.dtype == (C64 if dtype == F32 else C128) and got.shape == (2, n // 2 + 1)
        check(got, getattr(np.fft, name)(x.astype(F64), norm=norm), n)


@pytest.mark.parametrize("n", [1 << 14, 3 << 14, (1 << 14) + 2], ids=["n16384", "n49152", "n16386"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_long_rfft_is_a_packed_half_length_transform(device, require_dtype, rng, n, dtype):
    """A long rfft (even n, contiguous axis) transforms the n / 2 (even, odd) sample pairs as
    complex numbers and finishes in one fused kernel: the item and a kernel after it, numpy's
    values within the bound, rfft's derivative."""
    require_dtype(dtype, C64 if dtype == F32 else C128)
    x = rng.standard_normal((2, n)).astype(dtype)
    t = ug.tensor(x, device=device)
    for norm in NORMS:
        check(ug.fft.rfft(t, norm=norm), np.fft.rfft(x.astype(F64), norm=norm), n)
    assert [i.kind for i in ug.schedule(ug.fft.rfft(t)).items] == ["fft", "kernel"]
    w = rng.standard_normal((2, n // 2 + 1))
    grad = ug.grad(lambda v: ug.real(ug.fft.rfft(v) * ug.tensor(w.astype(dtype), device=device)).sum())(t).numpy()
    # d/dx of sum(real(rfft(x) * w)) = sum_k w_k cos(2 pi j k / n): numpy's irfft of w, times n,
    # with the inner bins counted twice
    want = np.fft.irfft(w * np.where((np.arange(n // 2 + 1) == 0) | (np.arange(n // 2 + 1) * 2 == n), 1.0, 0.5),
                        n=n) * n
    np.testing.assert_allclose(grad, want, rtol=1e-4 if dtype == F32 else 1e-10,
                               atol=(1e-3 if dtype == F32 else 1e-9) * np.abs(want).max())


def test_long_transforms(device, require_dtype, rng):
    """One long row (on the host devices Bailey's four-step algorithm: 2^19, and its rfft's packed
    half 2^18; tests/test_fft_host.py checks the path itself on odd and non-power-of-two lengths,
    and lengths that keep the direct transform, which are Bluestein's, slow, on a gpu target), fft
    and ifft of complex64 and the rfft of float32, within the bound."""
    n = 1 << 19
    require_dtype(F32, C64)
    x = cplx(rng, (1, n))
    t = ug.tensor(x, device=device)
    check(ug.fft.fft(t), np.fft.fft(x.astype(C128)), n)
    check(ug.fft.ifft(t, norm="ortho"), np.fft.ifft(x.astype(C128), norm="ortho"), n)
    r = x.real.copy()
    check(ug.fft.rfft(ug.tensor(r, device=device)), np.fft.rfft(r.astype(F64)), n)


@pytest.mark.parametrize("n", [n for n in SIZES if n > 1], ids=[f"n{n}" for n in SIZES if n > 1])
@pytest.mark.parametrize("name", ["irfft", "hfft"])
@pytest.mark.parametrize("dtype", [C64, C128], ids=str)
def test_irfft_hfft(device, require_dtype, rng, name, n, dtype):
    """A half spectrum of n // 2 + 1 in, n real out (odd n too); the imaginary parts of the first
    (and, for an even n, the last) bins do not count."""
    require_dtype(dtype)
    x = cplx(rng, (2, n // 2 + 1), dtype)
    t = ug.tensor(x, device=device)
    for norm in NORMS:
        got = getattr(ug.fft, name)(t, n=n, norm=norm)
        assert got.dtype == (F32 if dtype == C64 else F64) and got.shape == (2, n)
        check(got, getattr(np.fft, name)(x.astype(C128), n=n, norm=norm), n)
    if n % 2 == 0:   # n = None: 2 (m - 1)
        check(getattr(ug.fft, name)(t), getattr(np.fft, name)(x.astype(C128)), n)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "ihfft", "irfft", "hfft"])
def test_n_pads_and_truncates(device, require_dtype, rng, name):
    real = name in ("rfft", "ihfft")
    require_dtype(F32, C64)
    m = 10
    x = rng.standard_normal((2, m)).astype(F32) if real else cplx(rng, (2, m))
    t = ug.tensor(x, device=device)
    for n in (1, 4, 7, 10, 16, 23):
        got = getattr(ug.fft, name)(t, n=n)
        want = getattr(np.fft, name)(x.astype(C128 if not real else F64), n=n)
        check(got, want, n)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft"])
def test_along_any_axis(device, require_dtype, rng, name):
    """A batch on both sides of the axis, read in place (no transposed copy)."""
    real = name == "rfft"
    require_dtype(F32, C64)
    shape = (3, 6, 5, 2)
    x = rng.standard_normal(shape).astype(F32) if real else cplx(rng, shape)
    t = ug.tensor(x, device=device)
    for axis in (0, 1, 2, -1):
        got = getattr(ug.fft, name)(t, axis=axis)
        want = getattr(np.fft, name)(x.astype(F64 if real else C128), axis=axis)
        check(got, want, got.shape[axis] if name != "irfft" else want.shape[axis], axis)
        if axis in (1, 2):
            assert len(ug.schedule(getattr(ug.fft, name)(t, axis=axis)).kernels) == 0


def test_fftn_ifftn(device, require_dtype, rng):
    require_dtype(C64)
    x = cplx(rng, (4, 6, 5))
    t = ug.tensor(x, device=device)
    xw = x.astype(C128)
    for s, axes in ((None, None), (None, (0, 2)), ((3, 8), (2, 0)), ((4, -1, 7), None), ((5,), (1,))):
        for norm in NORMS:
            got = ug.fft.fftn(t, s=s, axes=axes, norm=norm)
            assert got.dtype == C64
            np_axes = axes if axes is not None or s is None else tuple(range(x.ndim - len(s), x.ndim))
            np.testing.assert_allclose(got.numpy(), np.fft.fftn(xw, s=s, axes=np_axes, norm=norm), rtol=2e-5,
                                       atol=2e-5 * np.abs(x).max() * x.size ** (0.5 if norm == "ortho" else 1.0 if
                                                                                  norm == "backward" else 0.0))
            back = ug.fft.ifftn(ug.fft.fftn(t, axes=axes, norm=norm), axes=axes, norm=norm)
            np.testing.assert_allclose(back.numpy(), x, rtol=1e-5, atol=1e-5)


def test_rfftn_irfftn(device, require_dtype, rng):
    require_dtype(F32, C64)
    x = rng.standard_normal((4, 6, 8)).astype(F32)
    t = ug.tensor(x, device=device)
    for s, axes in ((None, None), (None, (0, 2)), ((3, 8), (2, 0)), ((5,), (1,))):
        got = ug.fft.rfftn(t, s=s, axes=axes)
        assert got.dtype == C64
        want = np.fft.rfftn(x.astype(F64), s=s, axes=axes)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    for axes in (None, (0, 2), (1,)):
        y = ug.fft.rfftn(t, axes=axes)
        back = ug.fft.irfftn(y, s=[x.shape[a] for a in (axes or range(3))], axes=axes)
        assert back.dtype == F32
        np.testing.assert_allclose(back.numpy(), x, rtol=1e-5, atol=1e-5)
    require_dtype(C64)
    y = np.fft.rfftn(x)
    got = ug.fft.irfftn(ug.tensor(y.astype(C64), device=device))
    np.testing.assert_allclose(got.numpy(), np.fft.irfftn(y), rtol=1e-5, atol=1e-5)


def test_dtypes_follow_numpy(device, require_dtype, rng):
    """float32 -> complex64, float64 -> complex128 (numpy 2), float16 computes in float32,
    integers in float64; irfft / hfft give the part dtype."""
    for dt, want in ((np.float32, C64), (np.float16, C64), (np.float64, C128), (np.int32, C128), (np.bool_, C128)):
        require_dtype(dt, want)
        x = (rng.standard_normal(8) * 4).astype(dt)
        got = ug.fft.fft(ug.tensor(x, device=device))
        assert got.dtype == want == np.fft.fft(x).dtype, (dt, got.dtype)
        np.testing.assert_allclose(got.numpy(), np.fft.fft(x.astype(np.float64)), rtol=1e-5, atol=1e-4)
        assert ug.fft.rfft(ug.tensor(x, device=device)).dtype == np.fft.rfft(x).dtype


def test_length_one_and_empty(device, require_dtype, rng):
    require_dtype(C64)
    x = cplx(rng, (3, 1))
    for name in ("fft", "ifft"):
        check(getattr(ug.fft, name)(ug.tensor(x, device=device)), getattr(np.fft, name)(x.astype(C128)), 1)
    empty = ug.tensor(np.zeros((0, 4), C64), device=device)
    assert ug.fft.fft(empty).shape == (0, 4) and ug.fft.rfft(ug.zeros((0, 6), device=device)).shape == (0, 4)
    padded = ug.fft.fft(ug.tensor(np.zeros((2, 0), C64), device=device), n=3)   # an empty axis padded: zeros
    np.testing.assert_array_equal(padded.numpy(), np.zeros((2, 3), C64))


def test_frequencies(device):
    for n in (1, 2, 7, 8, 33):
        for d in (1.0, 0.1, 2.5):
            got = ug.fft.fftfreq(n, d=d, device=device)
            assert got.dtype == F32 and got.shape == (n,)
            np.testing.assert_array_equal(got.numpy(), np.fft.fftfreq(n, d).astype(F32))
            got = ug.fft.rfftfreq(n, d=d, device=device, dtype=np.float64)
            np.testing.assert_array_equal(got.numpy(), np.fft.rfftfreq(n, d))
    assert len(ug.schedule(ug.fft.fftfreq(16, device=device) * 2).items) == 1   # lazy: one fused kernel


def test_shifts(device, require_dtype, rng):
    x = rng.standard_normal((4, 5, 6)).astype(F32)
    t = ug.tensor(x, device=device)
    for axes in (None, 0, (1,), (0, 2), (-1, 1)):
        np.testing.assert_array_equal(ug.fft.fftshift(t, axes=axes).numpy(), np.fft.fftshift(x, axes=axes))
        np.testing.assert_array_equal(ug.fft.ifftshift(t, axes=axes).numpy(), np.fft.ifftshift(x, axes=axes))
    np.testing.assert_array_equal(ug.fft.ifftshift(ug.fft.fftshift(t)).numpy(), x)
    require_dtype(C64)
    # a shifted power spectrum: the shift fuses (a view) into the kernel after the transform
    y = ug.fft.fftshift(abs(ug.fft.fft(t, axis=1)) ** 2, axes=1)
    assert [i.kind for i in ug.schedule(y).items] == ["fft", "kernel"]


def test_window_and_power_spectrum_fuse(device, require_dtype, rng):
    """(x * w) -> fft -> |.|^2: the window multiply is the kernel that makes the transform's
    source, the power spectrum the kernel that reads its result: the item and 2 kernels."""
    require_dtype(C64)
    x = rng.standard_normal((16, 64)).astype(F32)
    w = np.hanning(64).astype(F32)
    power = abs(ug.fft.rfft(ug.tensor(x, device=device) * ug.tensor(w, device=device))) ** 2
    schedule = ug.schedule(power)
    assert [i.kind for i in schedule.items] == ["kernel", "fft", "kernel"], schedule
    np.testing.assert_allclose(power.numpy(), np.abs(np.fft.rfft(x * w)) ** 2, rtol=1e-4, atol=1e-4)


def test_errors():
    x = ug.zeros((4, 6))
    with pytest.raises(ValueError, match="n must be at least 1"):
        ug.fft.fft(x, n=0)
    with pytest.raises(TypeError, match="n must be an int"):
        ug.fft.fft(x, n=2.0)
    with pytest.raises(ValueError, match="norm must be one of"):
        ug.fft.ifft(x, norm="bad")
    with pytest.raises(TypeError, match="must be real-valued"):
        ug.fft.rfft(ug.tensor(np.zeros(4, C64), device=x.device))
    with pytest.raises(ValueError, match="has no transform"):
        ug.fft.irfft(ug.zeros((4, 1)))
    with pytest.raises(ValueError, match="same length"):
        ug.fft.fftn(x, s=(2, 3), axes=(0,))
    with pytest.raises(ValueError, match="at least one dimension"):
        ug.fft.fft(ug.zeros(()))
    with pytest.raises(ValueError, match="at least 1"):
        ug.fft.fftfreq(0)
    with pytest.raises(TypeError, match="real floating-point"):
        ug.fft.rfftfreq(4, dtype=np.int32)


def test_a_device_without_the_complex_dtype_refuses(device, rng):
    """rfft of float32 on a device without complex64 is a TypeError when the call is made."""
    if C64 in ug.registry.get(device).dtypes:
        pytest.skip(f"device {device!r} has complex64")
    with pytest.raises(TypeError, match="has no complex64"):
        ug.fft.rfft(ug.tensor(rng.standard_normal(8).astype(F32), device=device))


# --- derivatives ------------------------------------------------------------------------------

GRAD_CASES = [   # (function, input is complex, kwargs)
    ("fft", True, {}), ("fft", True, {"n": 12, "norm": "ortho"}), ("fft", True, {"n": 5}),
    ("fft", False, {"norm": "forward"}), ("ifft", True, {"n": 7}),
    ("rfft", False, {}), ("rfft", False, {"n": 9, "norm": "ortho"}), ("ihfft", False, {"n": 6}),
    ("irfft", True, {}), ("irfft", True, {"n": 9, "norm": "forward"}), ("hfft", True, {"n": 7}),
    ("fftn", True, {"s": (3, 10)}), ("rfftn", False, {}), ("irfftn", True, {"s": (4, 6)}),
]


@pytest.mark.parametrize("name,complex_in,kwargs", GRAD_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(GRAD_CASES)])
def test_vjp_matches_torch(device, require_dtype, rng, name, complex_in, kwargs):
    """ug.vjp of each transform with a random cotangent against torch.autograd (whose complex
    gradients follow the same convention: dL/dre + i dL/dim)."""
    torch = pytest.importorskip("torch")
    require_dtype(C128)
    shape = (3, 8)
    x = cplx(rng, shape, C128) if complex_in else rng.standard_normal(shape)
    fn = getattr(ug.fft, name)
    out, pullback = ug.vjp(lambda t: fn(t, **kwargs), ug.tensor(x, device=device))
    ct = cplx(rng, out.shape, C128) if out.dtype.kind == "c" else rng.standard_normal(out.shape)
    (got,) = pullback(ug.tensor(ct.astype(out.dtype), device=device))

    tx = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.fft, name)(tx, **kwargs)
    tct = torch.tensor(ct)
    loss = (ty.real * tct.real + ty.imag * tct.imag).sum() if ty.is_complex() else (ty * tct).sum()
    loss.backward()
    np.testing.assert_allclose(out.numpy(), ty.detach().resolve_conj().numpy(), rtol=1e-9, atol=1e-9)
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_allclose(got.numpy(), tx.grad.resolve_conj().numpy(), rtol=1e-9, atol=1e-9)


def test_grad_of_a_power_spectrum(device, require_dtype, rng):
    """ug.grad of a real loss through rfft (the half spectrum's weights), against finite differences."""
    require_dtype(F64, C128)
    x = rng.standard_normal(11)

    def loss(t):
        y = ug.fft.rfft(t * t)
        return (y.real ** 2 + y.imag ** 2 * 0.5).sum()

    g = ug.grad(loss)(ug.tensor(x, device=device)).numpy()
    h = 1e-6
    fd = np.array([(loss(ug.tensor(x + h * e, device=device)).item() - loss(ug.tensor(x - h * e, device=device)).item())
                   / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
