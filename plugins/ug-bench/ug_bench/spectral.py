"""`ug bench`'s complex and FFT rows (F1...): ug (under ug.jit) against numpy, torch eager,
torch.compile and JAX (jax.jit), each computing the same transform of the same arrays (tinygrad,
which has neither complex numbers nor an FFT, is listed as skipped). The
check compares each result with numpy's in complex128/float64 (max error relative to the
result's largest magnitude); the table gives the median time per call.

The rows run through the training rows' runner (ug_bench.training.run_training), which builds a
step per framework, checks it once and times them round-robin.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import ug_core as ug

from .peers import PeerLacks
from .training import Step, Training

IMAGE = 4096
KERNEL = 31


def _fast_length(n: int) -> int:
    """The least 2,3,5-smooth length >= n: what scipy.fft.next_fast_len gives a real
    transform, and the length a user pads an FFT convolution to (every peer gets the same)."""
    while True:
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


# --- the arrays -----------------------------------------------------------------------------------


def _signal(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal(16 * 2**20 // scale).astype(np.float32)}


def _complex(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _batch(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    return {"z": _complex(rng, max(8, 4096 // scale), 4096)}


def _image(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    n = max(64, IMAGE // scale)
    return {"image": rng.standard_normal((n, n)).astype(np.float32),
            "kernel": rng.standard_normal((KERNEL, KERNEL)).astype(np.float32)}


def _elementwise(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    n = 16 * 2**20 // scale
    return {"z": _complex(rng, n), "w": _complex(rng, n),
            "phi": rng.uniform(-np.pi, np.pi, n).astype(np.float32)}


# --- the computations, with numpy's names (ug's, torch's and jax's namespaces follow them) ----------


def _rfft(fft: Any, a: dict[str, Any]) -> Any:
    return fft.rfft(a["x"])


def _batch_fft(fft: Any, a: dict[str, Any]) -> Any:
    return fft.fft(a["z"], axis=-1)


def _fft_convolve(fft: Any, a: dict[str, Any], axes_name: str = "axes") -> Any:
    """The linear convolution of image and kernel, cropped to the image ('same'), by products of
    real transforms padded to a fast length."""
    image, kernel = a["image"], a["kernel"]
    n = image.shape[0]
    s = (_fast_length(n + KERNEL - 1),) * 2
    axes = {axes_name: (0, 1)}
    spectrum = fft.rfftn(image, s=s, **axes) * fft.rfftn(kernel, s=s, **axes)
    full = fft.irfftn(spectrum, s=s, **axes)
    h = KERNEL // 2
    return full[h:h + n, h:h + n]


def _mix(xp: Any, a: dict[str, Any]) -> Any:
    return a["z"] * xp.conj(a["w"]) + xp.exp(1j * a["phi"])


# --- each framework's step --------------------------------------------------------------------------

Compute = Callable[[Any, dict[str, Any]], Any]   # (namespace, arrays) -> result


def _namespaces(kind: str) -> Compute:
    return {"rfft": lambda ns, a: _rfft(ns.fft, a), "batch": lambda ns, a: _batch_fft(ns.fft, a),
            "convolve": lambda ns, a: _fft_convolve(ns.fft, a), "mix": lambda ns, a: _mix(ns, a)}[kind]


def _numpy_step(kind: str) -> Callable[[dict[str, np.ndarray], str], Step]:
    compute = _namespaces(kind)

    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        return lambda: compute(np, arrays)
    return build


def _torch_step(kind: str, compiled: bool) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        import torch

        def compute(a: dict[str, Any]) -> Any:
            if kind == "rfft":
                return torch.fft.rfft(a["x"])
            if kind == "batch":
                return torch.fft.fft(a["z"], dim=-1)
            if kind == "convolve":
                return _fft_convolve(torch.fft, a, axes_name="dim")
            return a["z"] * torch.conj(a["w"]) + torch.exp(1j * a["phi"])
        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
        if compiled:
            torch._dynamo.reset()
            compute = torch.compile(compute)
        return lambda: compute(tensors)
    return build


def _jax_step(kind: str) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        import jax
        import jax.numpy as jnp
        compute = _namespaces(kind)
        fn = jax.jit(lambda a: compute(jnp, a))
        values = {k: jnp.asarray(v) for k, v in arrays.items()}
        return lambda: fn(values).block_until_ready()
    return build


def _ug_step(kind: str) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        compute = _namespaces(kind)
        tensors = {k: ug.tensor(v, device=device) for k, v in arrays.items()}
        fn = ug.jit(lambda a: compute(ug, a))
        dev = ug.registry.get(device)

        def run() -> Any:
            out = fn(tensors)
            dev.synchronize()
            return out
        return run
    return build


def _tinygrad_step(arrays: dict[str, np.ndarray], device: str) -> Step:
    raise PeerLacks("tinygrad has no complex dtype and no FFT")


def _frameworks(kind: str) -> dict[str, Callable[[dict[str, np.ndarray], str], Step]]:
    return {"numpy": _numpy_step(kind), "torch": _torch_step(kind, False), "torch.compile": _torch_step(kind, True),
            "jax": _jax_step(kind), "tinygrad": _tinygrad_step, "ug": _ug_step(kind)}


def _reference(kind: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    compute = _namespaces(kind)

    def reference(arrays: dict[str, np.ndarray]) -> np.ndarray:
        wide = {k: v.astype(np.complex128 if v.dtype.kind == "c" else np.float64) for k, v in arrays.items()}
        return np.asarray(compute(np, wide))
    return reference


SPECTRAL = [
    Training("F1", "rfft of 16M float32", _signal, _frameworks("rfft"), rtol=1e-5, reference=_reference("rfft")),
    Training("F2", "4096 fft's of 4096 complex64", _batch, _frameworks("batch"), rtol=1e-5,
             reference=_reference("batch")),
    Training("F3", f"FFT conv {IMAGE}^2 * {KERNEL}x{KERNEL}, same", _image, _frameworks("convolve"), rtol=1e-5,
             reference=_reference("convolve")),
    Training("F4", "z*conj(w)+exp(1j*phi), 16M", _elementwise, _frameworks("mix"), rtol=1e-6,
             reference=_reference("mix")),
]
