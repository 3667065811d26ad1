"""The host paths of Device.fft, each against numpy.fft in float64: the kit's HostFft through
SciPy's pocketfft binding (out=), through scipy.fft's public functions, and through numpy over
threads (the fallbacks where SciPy is missing or its binding changed); and the default
Device.fft of a device written to the low-level interface (a copy to the host and back)."""
from __future__ import annotations

import numpy as np
import pytest

from ug_core.device import Buffer, Device
from ug_core.specs import FftSpec
from ug_core.kit import hostfft
from ug_core.plugins import registry

VARIANTS = {   # (real_in, real_out, onesided)
    "c2c": (False, False, False), "r2c_full": (True, False, False), "r2c": (True, False, True),
    "c2r": (False, True, True), "c2c_real_part": (False, True, False),
}


def cases(rng):
    for name, (real_in, real_out, onesided) in VARIANTS.items():
        for n, n_in in ((8, 8), (9, 5), (6, 11), (1, 1)):
            for inverse, norm in ((False, "backward"), (True, "ortho"), (True, "forward")):
                for outer, inner in ((3, 1), (1, 4), (2, 3)):
                    spec = FftSpec(outer, inner, n, n_in, real_in, real_out, onesided, inverse, norm,
                                   np.dtype(np.float64))
                    x = rng.standard_normal((outer, n_in, inner))
                    if not real_in:
                        x = x + 1j * rng.standard_normal((outer, n_in, inner))
                    yield name, spec, x


def expected(x: np.ndarray, spec: FftSpec) -> np.ndarray:
    return hostfft.transform(np.fft, x, spec)


@pytest.mark.parametrize("path", ["binding", "scipy.fft", "numpy threads"])
def test_host_fft_paths(rng, monkeypatch, path):
    if path != "binding":
        monkeypatch.setattr(hostfft, "_pocketfft", None)
    if path == "numpy threads":
        monkeypatch.setattr(hostfft, "_scipy_fft", None)
    runner = hostfft.HostFft(threads=2)
    for name, spec, x in cases(rng):
        out = np.zeros(spec.outer * spec.n_out * spec.inner, np.float64 if spec.real_out else np.complex128)
        runner.run(x.reshape(-1), out, spec)
        want = expected(x, spec)
        np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-12, atol=1e-12, err_msg=f"{name} {spec}")


def test_the_default_device_fft_is_a_host_round_trip(rng):
    """Device.fft of a device without its own (the base class's): numpy's, computed on the host."""
    ref = registry.get("ref")
    spec = FftSpec(2, 3, 12, 10, False, False, False, False, "ortho", np.dtype(np.float32))
    x = (rng.standard_normal((2, 10, 3)) + 1j * rng.standard_normal((2, 10, 3))).astype(np.complex64)
    src = Buffer(ref, x.size, x.dtype).copy_in(x)
    out = Buffer(ref, 2 * 12 * 3, np.dtype(np.complex64))
    Device.fft(ref, out, src, spec)
    want = np.fft.fft(x.astype(np.complex128), 12, axis=1, norm="ortho")
    np.testing.assert_allclose(out.numpy().reshape(want.shape), want, rtol=1e-6, atol=1e-6)


# Bailey's four-step algorithm (hostfft.four_step): a long complex transform of one row, split
# n = n1 n2, against numpy in float64; lengths a power of two, 3 2^17, 5^8, 3^12 (odd), and ones
# that do not split (a prime, twice a prime: the direct transform)
LONG = [1 << 18, 3 << 17, 5 ** 8, 3 ** 12, 262147, 2 * 262147]


def test_split_length():
    assert hostfft.split_length(1 << 23) == (2048, 32)   # the 16M rfft's packed half: 2048 x 4096
    assert hostfft.split_length(5 ** 8) == (625, 25)
    assert hostfft.split_length(262147) is None and hostfft.split_length(2 * 262147) is None
    for n in (1 << 18, 3 << 17, 3 ** 12, 2 * 3 * 5 * 7 * 11 * 13 * 17 * 4):
        n1, low = hostfft.split_length(n)
        assert n % n1 == 0 and n1 <= n // n1 and n1 % low == 0


@pytest.mark.parametrize("n", LONG, ids=[f"n{n}" for n in LONG])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["c64", "c128"])
@pytest.mark.parametrize("threads", [1, 2])
def test_four_step(rng, monkeypatch, n, dtype, threads):
    """Each norm both ways, two rows, within the accuracy bound of docs/fft.md (2 eps log2(m)
    relative, in the 2-norm); the four steps ran exactly where the length splits."""
    calls = []
    four_step = hostfft.four_step
    monkeypatch.setattr(hostfft, "four_step", lambda *a: (calls.append(a[0].shape), four_step(*a)))
    runner = hostfft.HostFft(threads=threads)
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    x = (rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))).astype(cdt)
    m = n if n & (n - 1) == 0 else 1 << (2 * n - 2).bit_length()
    for inverse, norm in ((False, "backward"), (True, "backward"), (False, "ortho"), (True, "forward")):
        spec = FftSpec(2, 1, n, n, False, False, False, inverse, norm, np.dtype(dtype))
        out = np.full((2, n), np.nan, cdt)
        runner.run(x.reshape(-1), out.reshape(-1), spec)
        want = (np.fft.ifft if inverse else np.fft.fft)(x.astype(np.complex128), axis=1, norm=norm)
        error = np.linalg.norm(out - want, axis=1) / np.linalg.norm(want, axis=1)
        assert np.all(error <= 2 * np.finfo(dtype).eps * np.log2(m)), (error, spec)
    assert len(calls) == (8 if hostfft.split_length(n) else 0)


def test_four_step_scratch_is_reused(rng):
    """The scratch matrix of one call serves the next of the same size (no 64 MiB allocation per
    16M rfft), and results stay right with it."""
    runner = hostfft.HostFft(threads=2)
    n = 1 << 18
    spec = FftSpec(1, 1, n, n, False, False, False, False, "backward", np.dtype(np.float32))
    scratches = []
    for _ in range(2):
        x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        out = np.empty(n, np.complex64)
        runner.run(x, out, spec)
        scratches.append(runner._scratch)
        want = np.fft.fft(x.astype(np.complex128))
        assert np.linalg.norm(out - want) <= 2 * 18 * np.finfo(np.float32).eps * np.linalg.norm(want)
    assert scratches[0] is not None and scratches[1] is scratches[0]
