"""ug-vulkan: a Vulkan compute backend for ug (SPIR-V emitted directly from the loop IR)."""

__version__ = "0.1.0"
