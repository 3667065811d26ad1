"""ug-cuda: the `cuda` device for ug (NVRTC + the CUDA driver API through cuda-bindings).

    import ug_cuda
    image = ug_cuda.compile_only(kernel, arch="sm_90")   # no driver / GPU needed
    ug.tensor(x, device="cuda")                           # needs a GPU

See README.md.
"""

from .compiler import Config, compile_only, render_kernel
from .render import render

__version__ = "0.1.0"

__all__ = ["Config", "compile_only", "render", "render_kernel", "__version__"]


def __getattr__(name):  # the runtime and interop load the driver bindings only when asked for
    if name == "CudaDevice":
        from .device import CudaDevice
        return CudaDevice
    if name in ("to_cuda_array", "from_cuda_array", "from_dlpack", "CudaArray"):
        from . import interop
        return getattr(interop, name)
    raise AttributeError(name)
