"""Elementwise ops, creation functions, tensor properties and conversions: the checks that run
nothing on a device (the kit's ug_core/testing/test_ops.py runs the ops on each device)."""
import numpy as np

import ug_core as ug

DEVICE = "ref"


def test_default_device_is_preferred():
    devs = ug.devices()
    assert isinstance(devs, list) and len(devs) >= 1
    assert all(isinstance(d, str) for d in devs)
    assert ug.tensor(np.zeros(2, np.float32)).device == devs[0]
    assert ug.zeros((2,)).device == devs[0]


def test_creation_devices():
    for t in (ug.zeros((2,), device=DEVICE), ug.ones((2,), device=DEVICE),
              ug.full((2,), 1.0, np.float32, device=DEVICE), ug.arange(3, np.int32, device=DEVICE)):
        assert t.device == DEVICE
