"""Records every kernel the core suite compiles, so that ug-cuda can compile-check them without a GPU.

Installed by this directory's conftest.py when pytest starts, before any test module is
imported, so when the core suite runs in the same pytest process (`scripts/test.sh` runs
`pytest --pyargs ug_core.testing tests plugins/*/tests`) every kernel it schedules passes through here:

* `CompileCache.get(device, kernel)`: each scheduled kernel (whatever the device);
* `ug_core.lower.lower(kernel, opts)` with a gpu target: the exact GPU programs the lowering
  tests build (odd workgroup sizes, grid spills), rendered as they are.

Also usable as a pytest plugin in a subprocess (`-p kernel_recorder`, with
UG_CUDA_RECORD_OUT=path): the records are pickled to that path when the session ends.
"""
from __future__ import annotations

import os
import pickle

import ug_core.lower as _lower_mod
from ug_core import runtime as _runtime

KERNELS: dict[str, object] = {}          # kernel.key() -> Kernel
GPU_LOWERINGS: dict[tuple, tuple] = {}   # (kernel.key(), opts) -> (Kernel, LowerOptions)
_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    original_get = _runtime.CompileCache.get
    original_lower = _lower_mod.lower

    def get(self, device, kernel):
        try:
            KERNELS.setdefault(kernel.key(), kernel)
        except Exception:
            pass
        return original_get(self, device, kernel)

    def lower(kernel, opts=_lower_mod.LowerOptions()):
        program = original_lower(kernel, opts)  # record only what lowers fine
        if getattr(opts, "target", None) == "gpu":
            try:
                GPU_LOWERINGS.setdefault((kernel.key(), opts), (kernel, opts))
            except Exception:
                pass
        return program

    _runtime.CompileCache.get = get
    _lower_mod.lower = lower


def _pickled(records) -> list[bytes]:
    """Each record pickled on its own, leaving out those too deep to pickle (the deep-graph
    tests' kernels: their expressions nest past the recursion limit)."""
    out = []
    for record in records:
        try:
            out.append(pickle.dumps(record))
        except RecursionError:
            pass
    return out


def dump(path: str) -> None:
    """(kernels, gpu lowerings) to `path`: two lists of pickled records (see load)."""
    with open(path, "wb") as f:
        pickle.dump((_pickled(KERNELS.values()), _pickled(GPU_LOWERINGS.values())), f)


def load(path: str) -> None:
    """Add the records `dump` wrote to `path` to this process's."""
    with open(path, "rb") as f:
        kernels, lowerings = pickle.load(f)
    for k in map(pickle.loads, kernels):
        KERNELS.setdefault(k.key(), k)
    for k, opts in map(pickle.loads, lowerings):
        GPU_LOWERINGS.setdefault((k.key(), opts), (k, opts))


# --- as a pytest plugin (-p kernel_recorder) ---------------------------------------------------

def pytest_configure(config):
    install()


def pytest_unconfigure(config):
    out = os.environ.get("UG_CUDA_RECORD_OUT")
    if out:
        dump(out)
