"""Memory-type choice (a pure function: testable without a GPU)."""

from __future__ import annotations

from dataclasses import dataclass

# VkMemoryPropertyFlagBits
DEVICE_LOCAL = 0x1
HOST_VISIBLE = 0x2
HOST_COHERENT = 0x4
HOST_CACHED = 0x8

# VkPhysicalDeviceType
TYPE_OTHER, TYPE_INTEGRATED, TYPE_DISCRETE, TYPE_VIRTUAL, TYPE_CPU = range(5)


@dataclass(frozen=True)
class MemoryPlan:
    """Where device buffers live and how the host reaches them."""

    device_type: int        # memory type index for buffers kernels use
    mapped: bool            # True: the host maps device buffers directly (no staging)
    staging_type: int | None  # memory type index for the staging buffer (None when mapped)


def _first(types: list[int], type_bits: int, want: int, avoid: int = 0) -> int | None:
    for i, flags in enumerate(types):
        if type_bits & (1 << i) and flags & want == want and not flags & avoid:
            return i
    return None


def choose_memory(types: list[int], type_bits: int, device_type: int) -> MemoryPlan:
    """Pick memory types from the device's list of property flags.

    * Unified memory (integrated GPUs, CPU implementations like lavapipe): a type that is
      device-local, host-visible and coherent is used directly, mapped once.
    * Only host-visible coherent memory (some virtual / CPU devices): used directly.
    * Discrete GPUs: device-local memory (not host-visible if there is such a type, so the
      small BAR window is left alone), reached through a host-visible coherent staging buffer
      (cached preferred, for readback).
    """
    direct = DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT
    host = HOST_VISIBLE | HOST_COHERENT
    if device_type != TYPE_DISCRETE:
        i = _first(types, type_bits, direct)
        if i is not None:
            return MemoryPlan(i, True, None)
    local = _first(types, type_bits, DEVICE_LOCAL, avoid=HOST_VISIBLE)
    if local is None:
        local = _first(types, type_bits, DEVICE_LOCAL)
    if local is not None:
        staging = _first(types, type_bits, host | HOST_CACHED)
        if staging is None:
            staging = _first(types, type_bits, host)
        if staging is not None:
            if staging == local:
                return MemoryPlan(local, True, None)
            return MemoryPlan(local, False, staging)
    i = _first(types, type_bits, host)
    if i is not None:
        return MemoryPlan(i, True, None)
    raise RuntimeError(f"no usable Vulkan memory type among {[hex(t) for t in types]} (bits {type_bits:#x})")

