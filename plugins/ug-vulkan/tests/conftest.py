"""Fixtures for the ug-vulkan tests.

`vulkan_device` is a VulkanDevice that runs spirv-val on every module it compiles (when
spirv-val is installed); tests that need a working Vulkan driver skip without one. To
exercise the fallbacks on a full-featured device, `make_device(disable={...})` registers a
second device that pretends to lack some features.
"""
from __future__ import annotations

import itertools
import os

import pytest

import ug_core as ug
from ug_core.plugins import registry

os.environ.setdefault("VK_ICD_FILENAMES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
os.environ.setdefault("MESA_SHADER_CACHE_DISABLE", "true")

_counter = itertools.count()


def _vulkan_or_skip(**kwargs):
    try:
        from ug_vulkan.device import VulkanDevice
        return VulkanDevice(validate=True, **kwargs)
    except Exception as e:  # no loader / no driver here
        pytest.skip(f"no usable Vulkan device: {e}")


@pytest.fixture(scope="session")
def make_device():
    """make_device(disable=set()) -> device name of a fresh, registered VulkanDevice."""
    made = []

    def make(disable=frozenset()):
        dev = _vulkan_or_skip(disable=set(disable))
        name = f"vulkan-test{next(_counter)}"

        class Plugin:
            @ug.hookimpl
            def ug_register_devices(self, register):
                register(ug.DeviceSpec(name=name, factory=lambda: dev, plugin="ug-vulkan-tests", priority=10**6))

        registry.register_plugin(Plugin(), name=name)
        made.append(name)
        registry.get(name)
        return name

    yield make
    for name in made:
        try:
            registry.get(name).synchronize()
            registry.unregister_device(name)
        except Exception:
            pass


@pytest.fixture(scope="session")
def vk_name(make_device):
    return make_device()


@pytest.fixture(scope="session")
def vk_dev(vk_name):
    return registry.get(vk_name)
