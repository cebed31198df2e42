#!/usr/bin/env bash
# mypy for type-checking herald_sdk, in the repository's tool venv (.local/venv, git-ignored;
# deploy/tools.sh puts schemathesis there too). Idempotent: skipped when the pinned version is in.
# Prints the venv's python on stdout.
set -euo pipefail

MYPY=mypy==1.20.2
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
VENV="$REPO_ROOT/.local/venv"
STAMP="$VENV/.mypy.version"

if [[ ! -x $VENV/bin/mypy || ! -f $STAMP || $(cat "$STAMP") != "$MYPY" ]]; then
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV" >&2
  echo "[mypy] pip install $MYPY into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$MYPY" >&2
  echo "$MYPY" >"$STAMP"
fi
echo "$VENV/bin/python"
