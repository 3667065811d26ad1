#!/usr/bin/env bash
# The test command (README "Run the tests"; .ci/run calls this).
# Installs ug-core with its test extras plus every backend plugin under plugins/, then runs
# the core suite (on every usable device) and each plugin's own tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -e ".[test]"
for plugin in plugins/*/; do
    if [ -f "$plugin/pyproject.toml" ]; then
        python -m pip install -q --disable-pip-version-check -e "$plugin"
    fi
done
ug devices
paths=(tests)
for d in plugins/*/tests; do [ -d "$d" ] && paths+=("$d"); done
python -m pytest -q "${paths[@]}" "$@"
