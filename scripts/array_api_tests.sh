#!/usr/bin/env bash
# Runs the Array API standard's conformance suite (data-apis/array-api-tests, spec 2024.12, kept in
# ../shared/array-api-tests beside the repository) on ug's namespace: `Tensor.__array_namespace__()`
# of a tensor on $UG_DEVICE (default ref), with $AAT_EXAMPLES hypothesis examples per test (default 3)
# and a fixed seed. Tests listed in tests/array_api_xfails.txt (each with its reason) are expected to
# fail; any other failure fails the run. Extra arguments go to pytest (e.g. -k test_floor).
#
# The suite is run from a temporary copy with one upstream bug fixed: its dtype_helpers.py takes
# max() over the library's complex dtypes at import, which crashes for a library without complex
# dtypes before any test runs (harmless for ug, which has complex64 and complex128: every dtype runs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suite=${AAT_SUITE:-$root/../shared/array-api-tests}
if [ ! -d "$suite/array_api_tests" ]; then
    echo "array-api-tests: suite not found at $suite" >&2
    exit 1
fi
python -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$suite/requirements.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$suite"/. "$work"
python - "$work/array_api_tests/dtype_helpers.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
crash = "for dt in complex_dtypes], key=lambda x: x[1]\n)[0]"
if crash in text:  # (a suite with the bug fixed upstream is run as it is)
    open(path, "w").write(text.replace(crash, "for dt in complex_dtypes], key=lambda x: x[1], default=(None, 0)\n)[0]"))
PY
# a failing test's example is not shrunk (the verdict is the same; shrinking the expected failures took
# most of the run's time)
cat >> "$work/conftest.py" <<'PY'


_suite_configure = pytest_configure


def pytest_configure(config):
    _suite_configure(config)
    from hypothesis import Phase, settings
    settings.register_profile("ug-no-shrink", settings(settings.default, phases=[Phase.explicit, Phase.reuse, Phase.generate]))
    settings.load_profile("ug-no-shrink")
PY
cd "$work"
UG_DEVICE=${UG_DEVICE:-ref} ARRAY_API_TESTS_VERSION=2024.12 \
ARRAY_API_TESTS_MODULE="exec('import numpy as _np, ug_core as _ug; xp = _ug.tensor(_np.zeros(1, _np.float32)).__array_namespace__()')" \
    python -m pytest -q --rootdir="$work" -p no:cacheprovider -p no:randomly --max-examples "${AAT_EXAMPLES:-3}" --disable-deadline \
    --hypothesis-seed=0 --xfails-file "$root/tests/array_api_xfails.txt" "$@" array_api_tests
