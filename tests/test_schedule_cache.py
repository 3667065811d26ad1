"""Realizing a graph shaped like one realized before reuses its compiled steps: a device
registered again under its name runs the kept graphs (the kit's ug_core/testing/test_schedule_cache.py
checks the reuse on each device)."""

import numpy as np

import ug_core as ug
from ug_core.testing.data import rand


def test_a_device_registered_again_runs_the_kept_graphs(compile_cache):
    from ug_core.ref import RefDevice

    ran_on = []

    class Recording(RefDevice):
        def run(self, program, buffers):
            ran_on.append(self)
            super().run(program, buffers)

    spec = ug.DeviceSpec(name="again", factory=Recording, plugin="test", version="1")
    ug.registry.register(spec)
    try:
        a = rand(4)
        np.testing.assert_allclose((ug.tensor(a, device="again") + 1).numpy(), a + 1)
        first = ug.registry.get("again")
        ug.registry.register(spec)  # the name now means a new device object
        np.testing.assert_allclose((ug.tensor(a, device="again") + 1).numpy(), a + 1)
        assert ran_on[-1] is ug.registry.get("again") and ran_on[-1] is not first
    finally:
        ug.registry.unregister_device("again")
