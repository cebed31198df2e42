#!/usr/bin/env bash
# The venv one adapter's tests run in: .local/venv-agents/<framework> (git-ignored), made from
# PyPI with every version pinned (requirements/<framework>.txt, which includes mypy). A venv per
# framework: their dependencies clash (crewai needs openai 2, openai-agents openai 3), and none of
# them may disturb .local/venv (schemathesis, the SDK's mypy). Idempotent: skipped while the
# venv's stamp matches the requirements file. Prints the venv's python on stdout.
#
#   scripts/ensure-venv.sh langgraph|openai_agents|crewai
set -euo pipefail

FRAMEWORK=${1:?usage: ensure-venv.sh langgraph|openai_agents|crewai}
PACKAGE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$PACKAGE/../.." && pwd)
REQUIREMENTS="$PACKAGE/requirements/$FRAMEWORK.txt"
VENV="$REPO_ROOT/.local/venv-agents/$FRAMEWORK"
STAMP="$VENV/.requirements.sha256"

[[ -f $REQUIREMENTS ]] || { echo "[agents] no $REQUIREMENTS" >&2; exit 2; }
wanted=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [[ ! -x $VENV/bin/python || ! -f $STAMP || $(cat "$STAMP") != "$wanted" ]]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  echo "[agents] pip install -r requirements/$FRAMEWORK.txt into $VENV" >&2
  started=$SECONDS
  # --no-deps: the file pins the whole tree, so nothing is resolved or fetched beyond it.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$REQUIREMENTS" >&2
  "$VENV/bin/python" -m pip check >&2
  echo "[agents] $FRAMEWORK venv ready in $((SECONDS - started)) s" >&2
  echo "$wanted" >"$STAMP"
fi
echo "$VENV/bin/python"
