"""ug-vulkan: a Vulkan compute backend for ug (SPIR-V emitted directly from the loop IR)."""
