import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import kernel_recorder  # noqa: E402

# before any test module imports ug_core.lower.lower (see kernel_recorder's docstring)
kernel_recorder.install()
