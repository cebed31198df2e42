# Shared by start.sh and test.sh: dependencies, infrastructure, build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The Node.js release Herald runs on and is tested with (an LTS line; the container image's base is
# the same release): .node-version.
NODE_VERSION=$(<"$ROOT/.node-version")

ensure_node() {
  # Another release on the machine (Debian 12 ships 20, past its end of life) gets the pinned one
  # beside it: the official binary from the npm registry's node-linux-<arch> package, unpacked
  # under .local and put first on the PATH of everything this script runs (npm included).
  local dir="$ROOT/.local/node-v$NODE_VERSION"
  if [ "$(node --version 2>/dev/null)" != "v$NODE_VERSION" ] && [ ! -x "$dir/bin/node" ]; then
    local arch tmp
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64) arch=arm64 ;;
      *) echo "no Node.js $NODE_VERSION package for $(uname -m); install it and run again" >&2; exit 1 ;;
    esac
    echo "==> Node.js $NODE_VERSION (node-linux-$arch from the npm registry)"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-$arch@$NODE_VERSION" >/dev/null)
    mkdir -p "$dir.tmp"
    tar xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$dir.tmp" --strip-components=1 package/bin/node package/LICENSE
    rm -rf "$tmp"
    mv "$dir.tmp" "$dir"
  fi
  if [ -x "$dir/bin/node" ]; then export PATH="$dir/bin:$PATH"; fi
  echo "==> Node.js $(node --version)"
}

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
