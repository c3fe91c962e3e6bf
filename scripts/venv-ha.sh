#!/usr/bin/env bash
# Home Assistant core in its own virtualenv (.venv-ha), from Tests/helpers/requirements-ha.txt
# (PyPI only): the MQTT discovery test starts a real Home Assistant against a real broker.
# Re-created when the requirements change. Prints the venv's hass.
set -euo pipefail
cd "$(dirname "$0")/.."
# Its constraints (Home Assistant's own pins) keep pip from backtracking through sdists.
req=Tests/helpers/requirements-ha.txt
constraints=Tests/helpers/constraints-ha.txt
stamp=.venv-ha/.requirements
if [ ! -x .venv-ha/bin/hass ] || ! cat "$req" "$constraints" | cmp -s - "$stamp" 2>/dev/null; then
  rm -rf .venv-ha
  python3 -m venv .venv-ha
  .venv-ha/bin/pip install --quiet --disable-pip-version-check --prefer-binary -r "$req" >&2
  cat "$req" "$constraints" > "$stamp"
fi
echo "$PWD/.venv-ha/bin/hass"
