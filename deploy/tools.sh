#!/usr/bin/env bash
# The tools the tests need, built or fetched into .local (git-ignored), nothing outside it:
#   helm, kubeconform   `go install` from the Go module proxy into .local/bin
#   mailpit             the same way: the SMTP server (with an HTTP API) of the mail tests (deploy/lib/mailpit.sh)
#   Kubernetes schemas  the JSON schemas inside the kubernetes-validate wheel (PyPI), for kubeconform
#   promtool, prometheus  Prometheus's rule tester and server, from Debian's prometheus package (apt-get download,
#                       unpacked: nothing installed, no service), for the chart's alert rule tests and the
#                       dashboard preview (npm run dashboard:preview)
#   CRD schemas         PodMonitor and PrometheusRule, from the Prometheus Operator's CRDs in its Go
#                       module (the Go module proxy), for kubeconform (deploy/lib/crd-schemas.mjs)
#   schemathesis        the OpenAPI fuzzer (PyPI), in a venv at .local/venv, for the gateway's schemathesis test
#   chromium, firefox   Debian's chromium and firefox-esr (apt), for the browser SDK's real-browser tests
#   agent frameworks    LangGraph, the OpenAI Agents SDK, CrewAI (PyPI), a venv each at .local/venv-agents/<name>,
#                       for sdks/agents-python's tests (its scripts/ensure-venv.sh; pins in its requirements/)
# Idempotent: what is already there at its pinned version is skipped. Prints what it does.
#
#   deploy/tools.sh          ensure everything
#   deploy/tools.sh env      print export lines: eval "$(deploy/tools.sh env)"
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

LOG_TAG=tools
# shellcheck source=lib/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/common.sh"
# shellcheck source=lib/go.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/go.sh"
# shellcheck source=lib/mailpit.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/mailpit.sh"

HELM_MODULE=helm.sh/helm/v3/cmd/helm@v3.22.0
KUBECONFORM_MODULE=github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0
KUBERNETES_VALIDATE=kubernetes-validate==1.37.0
SCHEMATHESIS=schemathesis==4.32.5
PROMETHEUS_OPERATOR_MODULE=github.com/prometheus-operator/prometheus-operator@v0.87.1
CRD_SCHEMA_DIR="$LOCAL_DIR/crd-schemas"
# Debian's package, whatever release the mirror has (Debian 12: 2.42; a pinned one would vanish
# with its next security update): `go install` of promtool builds all of Prometheus (every service
# discovery's SDK), which did not finish in 25 minutes on a 2-core machine.
PROMETHEUS_DEB=prometheus

SCHEMA_ROOT="$LOCAL_DIR/kubernetes-schemas"
SCHEMA_GLOB="$SCHEMA_ROOT/v*-local-strict"
schema_dir() {
  local dirs
  # shellcheck disable=SC2086 # the glob must expand
  dirs=$(ls -d $SCHEMA_GLOB 2>/dev/null | sort -V | tail -n1)
  echo "$dirs"
}

ensure_schemas() {
  local stamp="$SCHEMA_ROOT/.version"
  if [[ -f $stamp && $(cat "$stamp") == "$KUBERNETES_VALIDATE" && -n $(schema_dir) ]]; then
    log "Kubernetes schemas: $KUBERNETES_VALIDATE already unpacked"
    return 0
  fi
  command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
  log "Kubernetes schemas: pip download $KUBERNETES_VALIDATE"
  rm -rf "$SCHEMA_ROOT"
  mkdir -p "$SCHEMA_ROOT/wheel"
  python3 -m pip download --quiet --no-deps --only-binary=:all: "$KUBERNETES_VALIDATE" -d "$SCHEMA_ROOT/wheel" ||
    die "pip download $KUBERNETES_VALIDATE failed"
  # The wheel holds kubernetes_validate/kubernetes-json-schema/v<release>-local[-strict]/: one
  # <kind>-<group>-<version>.json per object (strict: no unknown fields) referring to a shared
  # _definitions.json by the URL "/api/_definitions.json", resolved against an https $id. Without
  # a network kubeconform cannot follow that, so the newest release's strict folder is unpacked
  # with the $ids dropped and the references made relative to the folder.
  python3 - "$SCHEMA_ROOT"/wheel/*.whl "$SCHEMA_ROOT" <<'PY' || die "could not unpack the schemas"
import json, pathlib, re, sys, zipfile
wheel, root = zipfile.ZipFile(sys.argv[1]), pathlib.Path(sys.argv[2])
pattern = re.compile(r"kubernetes_validate/kubernetes-json-schema/v(\d+)\.(\d+)\.(\d+)-local-strict/([^/]+\.json)$")
found = [(tuple(map(int, m.groups()[:3])), m[4], name) for name in wheel.namelist() if (m := pattern.match(name))]
newest = max(release for release, _, _ in found)
folder = root / ("v%d.%d.%d-local-strict" % newest)
folder.mkdir(parents=True)
for release, file, name in found:
    if release != newest:
        continue
    schema = json.loads(wheel.read(name))
    schema.pop("$id", None)
    text = json.dumps(schema).replace('"/api/_definitions.json#', '"_definitions.json#')
    (folder / file).write_text(text)
print(f"[tools] unpacked {folder.name}: {sum(1 for r, _, _ in found if r == newest)} schemas", file=sys.stderr)
PY
  [[ -n $(schema_dir) ]] || die "no schema folder matching $SCHEMA_GLOB in the wheel"
  echo "$KUBERNETES_VALIDATE" >"$stamp"
}

# The chart's PodMonitor and PrometheusRule are validated against the CRDs the operator ships
# (example/prometheus-operator-crd in its module), turned into kubeconform's strict JSON schemas.
ensure_crd_schemas() {
  local stamp="$CRD_SCHEMA_DIR/.version" dir
  if [[ -f $stamp && $(cat "$stamp") == "$PROMETHEUS_OPERATOR_MODULE" ]]; then
    log "CRD schemas: $PROMETHEUS_OPERATOR_MODULE already converted"
    return 0
  fi
  ensure_go
  log "CRD schemas: go mod download $PROMETHEUS_OPERATOR_MODULE"
  dir=$(go_env "$GO" mod download -json "$PROMETHEUS_OPERATOR_MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $dir ]] || die "could not download $PROMETHEUS_OPERATOR_MODULE"
  rm -rf "$CRD_SCHEMA_DIR"
  node "$REPO_ROOT/deploy/lib/crd-schemas.mjs" "$dir/example/prometheus-operator-crd" "$CRD_SCHEMA_DIR" \
    monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_prometheusrules.yaml || die "could not convert the CRDs"
  echo "$PROMETHEUS_OPERATOR_MODULE" >"$stamp"
}

ensure_promtool() {
  local stamp="$BIN_DIR/.promtool.version" work
  if [[ -x $BIN_DIR/promtool && -x $BIN_DIR/prometheus && -f $stamp ]]; then
    log "promtool, prometheus: $(cat "$stamp") already unpacked"
    return 0
  fi
  log "promtool, prometheus: apt-get download $PROMETHEUS_DEB"
  work=$(mktemp -d)
  # Downloaded into a folder the _apt user can write, or apt warns and falls back to root.
  chmod 777 "$work"
  (cd "$work" && apt-get download -q "$PROMETHEUS_DEB" >/dev/null 2>&1) ||
    { apt-get update -q >/dev/null && (cd "$work" && apt-get download -q "$PROMETHEUS_DEB" >/dev/null); } ||
    die "apt-get download $PROMETHEUS_DEB failed"
  dpkg-deb -x "$work"/prometheus_*.deb "$work/unpacked" || die "could not unpack $PROMETHEUS_DEB"
  mkdir -p "$BIN_DIR"
  install -m 755 "$work/unpacked/usr/bin/promtool" "$BIN_DIR/promtool"
  install -m 755 "$work/unpacked/usr/bin/prometheus" "$BIN_DIR/prometheus"
  dpkg-deb -f "$work"/prometheus_*.deb Version >"$stamp"
  rm -rf "$work"
}

# A venv of its own keeps schemathesis and its dependencies away from the machine's Python.
ensure_schemathesis() {
  local venv="$LOCAL_DIR/venv" stamp="$LOCAL_DIR/venv/.schemathesis.version"
  if [[ -x $venv/bin/schemathesis && -f $stamp && $(cat "$stamp") == "$SCHEMATHESIS" ]]; then
    log "schemathesis: $SCHEMATHESIS already installed"
    return 0
  fi
  python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null || ensure_packages python3-venv
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv" || die "python3 -m venv $venv failed"
  log "schemathesis: pip install $SCHEMATHESIS into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$SCHEMATHESIS" || die "pip install $SCHEMATHESIS failed"
  echo "$SCHEMATHESIS" >"$stamp"
}

# The browser SDK's tests drive Debian's browsers (playwright-core with an explicit
# executablePath: nothing is downloaded from a browser vendor).
ensure_browsers() {
  ensure_packages chromium firefox-esr
  log "browsers: $(command -v chromium) and $(command -v firefox-esr)"
}

# Made here rather than inside the test, so a test's time limit never covers the installs.
ensure_agent_venvs() {
  local framework
  python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null || ensure_packages python3-venv
  for framework in langgraph openai_agents crewai; do
    bash "$REPO_ROOT/sdks/agents-python/scripts/ensure-venv.sh" "$framework" >/dev/null || die "the $framework venv could not be made"
  done
  log "agent frameworks: venvs ready in $LOCAL_DIR/venv-agents"
}

cmd_env() {
  local dir
  dir=$(schema_dir)
  cat <<EOF
export HERALD_TOOLS_BIN=$BIN_DIR
export KUBERNETES_SCHEMA_DIR=$dir
export CRD_SCHEMA_DIR=$CRD_SCHEMA_DIR
export HERALD_CHROMIUM=$(command -v chromium || true)
export HERALD_FIREFOX=$(command -v firefox-esr || true)
EOF
}

case "${1:-up}" in
  up)
    go_tool helm "$HELM_MODULE"
    go_tool kubeconform "$KUBECONFORM_MODULE"
    mailpit_build
    ensure_schemas
    ensure_crd_schemas
    ensure_promtool
    ensure_schemathesis
    ensure_browsers
    ensure_agent_venvs
    log "ready: $BIN_DIR/helm, $BIN_DIR/kubeconform, $BIN_DIR/promtool, $BIN_DIR/prometheus, $BIN_DIR/mailpit, schemas in $(schema_dir) and $CRD_SCHEMA_DIR, $LOCAL_DIR/venv/bin/schemathesis"
    ;;
  env) cmd_env ;;
  *) die "usage: deploy/tools.sh [up|env]" ;;
esac
