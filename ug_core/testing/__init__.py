"""ug's device conformance kit: the core's device tests, runnable against any installed device.

    python -m pytest --pyargs ug_core.testing --ug-device NAME     # NAME repeatable, or a,b
    python -m pytest --pyargs ug_core.testing                       # every usable device

Every test here runs something on the device under test (the `device` fixture) and compares it
with numpy: each op and dtype, views, reductions, matmul, in-place writes, ug.jit, the numerics
and ulp limits, random graphs (hypothesis), and kernels built directly in kernel IR that the
device compiles and runs itself (`lowering_cases`). `fixtures` holds the fixtures (`device`,
`rng`, `close`, `require_dtype`, `compile_cache`), `plugin` the ``--ug-device`` option (a pytest11
entry point), `data` the random data helpers draw from the test's `rng`, and `oracles` the numpy
definitions of the composed ops (softmax, gelu, ...).
CONTRIBUTING.md ("Run the conformance kit on your device") says what the tests expect.
"""
