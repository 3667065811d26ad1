#!/usr/bin/env bash
# The test command (README "Run the tests"; .ci/run calls this).
# Installs ug-core with its test extras plus every backend plugin under plugins/, then runs, in one
# pytest process: the device conformance kit (ug_core/testing, installed with ug-core) on every
# usable device, the repository's own tests (tests/: what needs no device) and each plugin's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# ug-vulkan: lavapipe (Vulkan on the CPU) and spirv-tools; skipped when installed, apt-get update only if needed
vk_pkgs=(mesa-vulkan-drivers libvulkan1 spirv-tools)
if ! dpkg -s "${vk_pkgs[@]}" >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get install -y -qq "${vk_pkgs[@]}" || { apt-get update -qq && apt-get install -y -qq "${vk_pkgs[@]}"; }; } >/dev/null \
        || { echo "error: could not install ${vk_pkgs[*]} (needed to test the vulkan device)" >&2; exit 1; }
fi
python -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".[test,typecheck]"
for plugin in plugins/*/; do
    if [ -f "$plugin/pyproject.toml" ]; then
        python -m pip install -q --disable-pip-version-check --root-user-action=ignore -e "$plugin"
    fi
done
paths=(tests)
for d in plugins/*/tests; do [ -d "$d" ] && paths+=("$d"); done
# vulkan runs on lavapipe here; spirv-val checks every SPIR-V module the suite makes it emit
if [ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json MESA_SHADER_CACHE_DISABLE=true UG_VULKAN_VALIDATE=1
fi
ug devices
python -m mypy ug_core   # the core is typed (pyproject.toml [tool.mypy])
# the kit runs once per usable device (the `device` fixture; --ug-device NAME picks devices), then
# tests/ and each plugin's own tests (--pyargs: ug_core.testing is a package, the rest are paths)
python -m pytest -q --pyargs ug_core.testing "${paths[@]}" "$@"
# tier 0 (ug_core.tiers: on host memory a new kernel first runs as the numpy evaluation of its IR, on the
# device's own buffers, while it compiles): the kit above ran compiled (--ug-tier 1, its default); these
# modules (elementwise, reductions, scans, views, gathers and scatters, dtypes, in-place writes, matmul
# epilogues, schedules) run again on cpu with every kernel on tier 0, which compiles nothing (~1 min)
python -m pytest -q --ug-device cpu --ug-tier 0 --pyargs \
    ug_core.testing.test_ops ug_core.testing.test_reduce ug_core.testing.test_scan ug_core.testing.test_argreduce \
    ug_core.testing.test_views ug_core.testing.test_view_semantics ug_core.testing.test_gather ug_core.testing.test_scatter \
    ug_core.testing.test_dtypes ug_core.testing.test_small_ints ug_core.testing.test_int_ops ug_core.testing.test_complex \
    ug_core.testing.test_assign_semantics ug_core.testing.test_overlapping_writes ug_core.testing.test_matmul \
    ug_core.testing.test_schedule ug_core.testing.test_schedule_cache ug_core.testing.test_numerics
# the README's install as a new user runs it: the wheelhouse of every package, then in a fresh venv
# `pip install --find-links WHEELHOUSE "ug-core[llvm,vulkan]==VERSION"` beside higher-versioned decoys
# of our names; every ug-* must come from the wheelhouse, compute on cpu and show in `ug devices` (~30 s)
python scripts/check_install.py
# tinygrad's own op tests (0.12.0's test_ops.py, forward and backward, downloaded from PyPI once) through
# a name translation onto ug (docs/tinygrad-ops.md): the floor is today's count, so a regression fails
python scripts/tinygrad_ops.py --device cpu --min-passed 372 | tail -n 8
# the Array API standard's conformance suite on the ref device, with few examples (its expected
# failures, each with its reason, are in tests/array_api_xfails.txt); skipped when the suite is not
# beside the repository (CI, which has it in ../shared, fails instead)
if [ -d ../shared/array-api-tests ] || [ -n "${AAT_SUITE:-}" ]; then
    UG_DEVICE=ref AAT_EXAMPLES=${AAT_EXAMPLES:-3} bash scripts/array_api_tests.sh
elif [ "${CI:-}" = true ]; then
    echo "error: ../shared/array-api-tests not found (set AAT_SUITE to the suite's folder)" >&2; exit 1
else
    echo "array-api-tests: ../shared/array-api-tests not found (set AAT_SUITE): conformance run skipped"
fi
