"""Memory-type choice (a pure function, no GPU)."""
from ug_vulkan.memory import (DEVICE_LOCAL, HOST_CACHED, HOST_COHERENT, HOST_VISIBLE, TYPE_CPU, TYPE_DISCRETE,
                              TYPE_INTEGRATED, choose_memory)

ALL = 0xFFFFFFFF


def test_lavapipe_uses_its_single_unified_type_mapped():
    plan = choose_memory([DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT | HOST_CACHED], ALL, TYPE_CPU)
    assert plan.device_type == 0 and plan.mapped and plan.staging_type is None


def test_discrete_gpu_uses_device_local_plus_cached_staging():
    types = [DEVICE_LOCAL, HOST_VISIBLE | HOST_COHERENT, HOST_VISIBLE | HOST_COHERENT | HOST_CACHED,
             DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT]  # the last one is the small BAR window
    plan = choose_memory(types, ALL, TYPE_DISCRETE)
    assert (plan.device_type, plan.mapped, plan.staging_type) == (0, False, 2)


def test_integrated_gpu_maps_unified_memory():
    types = [DEVICE_LOCAL, DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT]
    plan = choose_memory(types, ALL, TYPE_INTEGRATED)
    assert (plan.device_type, plan.mapped) == (1, True)


def test_memory_type_bits_are_respected():
    types = [DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT, HOST_VISIBLE | HOST_COHERENT]
    plan = choose_memory(types, 0b10, TYPE_INTEGRATED)
    assert (plan.device_type, plan.mapped) == (1, True)


def test_host_only_memory_is_used_directly():
    plan = choose_memory([HOST_VISIBLE | HOST_COHERENT], ALL, TYPE_DISCRETE)
    assert plan.mapped and plan.device_type == 0

