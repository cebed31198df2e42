# Shared by start.sh and test.sh: dependencies, infrastructure, build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ensure_node_modules() {
  # Reinstall only when the lock file changed since the last install.
  local stamp=node_modules/.herald-lock-hash
  local want
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # `npm install`, not `npm ci`: the registry mirror here lacks other platforms' optional
    # binaries (e.g. buf for macOS), which `npm ci` insists on finding in the lock file.
    echo "==> npm install"
    npm install --no-audit --no-fund
    echo "$want" > "$stamp"
  fi
}

ensure_infrastructure() {
  echo "==> local infrastructure (PostgreSQL, Redis, Kafka)"
  bash deploy/infra.sh up
  eval "$(bash deploy/infra.sh env)"
}

ensure_tools() {
  # The test tools deploy/tools.sh lists (helm, kubeconform, …); built once into .local.
  echo "==> test tools (deploy/tools.sh)"
  bash deploy/tools.sh
}

build() {
  echo "==> build"
  npm run build --silent
}
