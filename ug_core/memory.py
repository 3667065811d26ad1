"""ug.memory_stats: what the devices' buffers hold, so that a program can see its memory use.

Every Buffer counts itself in its device's `device.MemoryCounter` when it is allocated and
takes itself off when it is freed (by reference counting: ug keeps no reference cycles, so a
buffer goes as soon as the last tensor or node holding it does, even with `gc.disable()`).
"""

from __future__ import annotations

import os

from typing import Any

from .device import Buffer, Device, memory_counter
from .plugins import registry


def memory_stats(device: str | None = None) -> dict[str, int] | dict[str, dict[str, int]]:
    """Memory use of one device (by name), or of every device created so far (device=None,
    a dict by device name; a device is created on its first use). Per device:

    - live_bytes: bytes (size * itemsize) of the buffers alive now
    - peak_bytes: the most live_bytes has been since the last `reset_peak_memory_stats`
      (checked at every buffer allocation and at every call of this function, see
      device.MemoryCounter)
    - allocations: buffers allocated, ever
    - live_buffers: buffers alive now
    - pool_bytes: bytes the device keeps in its buffer pool for reuse, in use by no buffer
      (`Device.pool_bytes`; 0 for a device without a pool)
    """
    if device is None:
        return {name: _stats(dev) for name, dev in list(registry.devices.items())}
    if not isinstance(device, str):
        raise TypeError(f"device must be a device name like 'cpu', got {device!r}")
    return _stats(registry.get(device))


def reset_peak_memory_stats(device: str | None = None) -> None:
    """Start `peak_bytes` again from the bytes live now, on one device or (None) on every
    device created so far."""
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a device name like 'cpu', got {device!r}")
    devices = list(registry.devices.values()) if device is None else [registry.get(device)]
    for dev in devices:
        memory_counter(dev).reset_peak()


def _stats(device: Device) -> dict[str, int]:
    stats = memory_counter(device).stats()
    pool_bytes = getattr(device, "pool_bytes", None)
    stats["pool_bytes"] = int(pool_bytes()) if pool_bytes is not None else 0
    return stats


def available_host_bytes() -> int | None:
    """The host memory available now (Linux's MemAvailable, else the physical memory), or None
    where the system does not say: the bound for an allocation whose size depends on values
    (bincount's length), checked before allocating it."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def read_item(buffer: Buffer) -> Any:
    """The first element of `buffer` as a Python scalar (Tensor.item, float(), bool(): a small
    realize's result). On a device whose memory is the host's it is read through
    `host_view` after the device's queued work is done (what copy_out does before its copy),
    without the fresh array and the copy of `Buffer.numpy` (about half the read's cost);
    elsewhere through `Buffer.numpy`."""
    device = buffer.device
    dtype = buffer.dtype
    device.synchronize()
    view = device.host_view(buffer.handle, dtype.itemsize)
    if view is None:
        return buffer.numpy()[0].item()
    return view.view(dtype)[0].item()
