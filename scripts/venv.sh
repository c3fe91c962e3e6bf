#!/usr/bin/env bash
# The Python test helpers' virtualenv (.venv), from Tests/helpers/requirements.txt (PyPI only).
# Re-created when the requirements change. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
req=Tests/helpers/requirements.txt
stamp=.venv/.requirements
if [ ! -x .venv/bin/python ] || ! cmp -s "$req" "$stamp" 2>/dev/null; then
  rm -rf .venv
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r "$req" >&2
  cp "$req" "$stamp"
fi
echo "$PWD/.venv/bin/python"
