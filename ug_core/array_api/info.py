"""The Array API standard's inspection API: `__array_namespace_info__` and the namespace itself.

ug's namespace is the `ug_core` module (as numpy 2's is `numpy`): `Tensor.__array_namespace__`
returns it after checking the requested version."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..plugins import registry
from .data_types import isdtype

API_VERSION = "2024.12"
SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def namespace(api_version: str | None = None) -> Any:
    """The ug_core module, if it can speak `api_version` (None: the newest, 2024.12)."""
    if api_version is not None and api_version not in SUPPORTED_VERSIONS:
        raise ValueError(f"unsupported Array API version {api_version!r}; ug supports "
                         f"{', '.join(SUPPORTED_VERSIONS)} (and None for {API_VERSION})")
    return sys.modules["ug_core"]


# the Array API kinds, and the standard dtypes ug supports (float16 is ug's own: not standard)
STANDARD_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float32", "float64", "complex64", "complex128")


def _device(device: str | None) -> str:
    name = registry.preferred() if device is None else device
    if name is None:
        raise RuntimeError("no usable ug device (not even 'ref'); run `ug devices` to see why")
    if not isinstance(name, str):
        raise TypeError(f"device must be a device name like 'cpu' or 'ref', got {device!r}")
    registry.get(name)  # ValueError naming the available devices
    return name


def _device_dtypes(device: str | None) -> dict[str, np.dtype]:
    supported = registry.get(_device(device)).dtypes
    return {n: np.dtype(n) for n in STANDARD_NAMES if np.dtype(n) in supported}


class Info:
    """What `ug_core.__array_namespace_info__()` returns (the standard's inspection object)."""

    __module__ = "ug_core"

    def capabilities(self) -> dict[str, Any]:
        """Boolean-mask indexing and data-dependent shapes (nonzero, unique_*, repeat with a
        tensor of counts) work: what the shape depends on is realized and read on the host (a
        sync; inside ug.jit a TracerValueError says why). No limit on the number of dimensions."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

    def default_device(self) -> str:
        return _device(None)

    def devices(self) -> list[str]:
        return list(registry.usable())

    def default_dtypes(self, *, device: str | None = None) -> dict[str, np.dtype | None]:
        """ug's defaults: Python floats become float32, complex numbers complex64 and ints int64
        (int32 where a device has no int64)."""
        have = _device_dtypes(device)
        integral = have.get("int64", have.get("int32"))
        return {"real floating": have.get("float32", have.get("float64")),
                "complex floating": have.get("complex64", have.get("complex128")),
                "integral": integral, "indexing": integral}

    def dtypes(self, *, device: str | None = None, kind: str | tuple[str, ...] | None = None) -> dict[str, np.dtype]:
        """The standard dtypes the device supports, those of `kind` (as `isdtype` reads it)."""
        have = _device_dtypes(device)
        if kind is None:
            return have
        return {n: d for n, d in have.items() if isdtype(d, kind)}


def __array_namespace_info__() -> Info:
    return Info()


__all__ = ["API_VERSION", "Info", "__array_namespace_info__", "namespace"]
