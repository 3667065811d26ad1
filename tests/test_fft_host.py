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
