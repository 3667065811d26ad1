"""How many cores the cpu device may use: its threads are one per usable core."""

from __future__ import annotations

import math
import os


def usable_cores() -> int:
    """The cores this process may run on: its CPU set (a container's, not the host's count),
    and no more than a container's CPU quota (a quota of 2 CPUs on a 64-core host would
    otherwise get 64 threads, 63 of them spinning for work, see pool.SpinPool)."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        cores = max(1, os.cpu_count() or 1)
    quota = cpu_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def cpu_quota(root: str = "/sys/fs/cgroup") -> float | None:
    """The cgroup's CPU quota in cores (v2 `cpu.max`, else v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`); None when there is none or it cannot be read."""
    try:
        with open(os.path.join(root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            quota_us = int(f.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            period_us = int(f.read())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None
