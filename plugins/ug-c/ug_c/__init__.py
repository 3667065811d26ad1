"""ug-c: the `c` device, built on ug_core.kit (see plugin.py and device.py)."""

__version__ = "0.1.0"
