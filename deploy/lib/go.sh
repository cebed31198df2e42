# shellcheck shell=bash
# Go tools built from the Go module proxy into .local/bin (sourced by deploy/tools.sh and, for
# Mailpit, deploy/infra.sh): `go_tool <name> <module@version>`, skipped when that version is there.

BIN_DIR="$LOCAL_DIR/bin"
GO_DIR="$LOCAL_DIR/go"
# helm v3.22 needs this Go; an older `go` is complemented from the module proxy (golang.org/toolchain).
GO_MIN=1.26.0

GO=go

go_env() {
  env GOPATH="$GO_DIR" GOCACHE="$GO_DIR/cache" GOBIN="$BIN_DIR" CGO_ENABLED=0 \
    GOFLAGS="${GOFLAGS:-} -modcacherw" GOTOOLCHAIN=local "$@"
}

# A Go at least GO_MIN: the machine's, else Debian's golang-go (bookworm ships 1.19), plus when
# that is older the toolchain module that `go` itself would switch to, from the module proxy.
ensure_go() {
  command -v go >/dev/null || ensure_packages golang-go
  local have
  have=$(go env GOVERSION)
  have=${have#go}
  if [[ $(printf '%s\n%s\n' "$GO_MIN" "$have" | sort -V | head -n1) == "$GO_MIN" ]]; then
    return 0
  fi
  local toolchain dir
  toolchain="golang.org/toolchain@v0.0.1-go$GO_MIN.$(go env GOOS)-$(go env GOARCH)"
  log "go $have is older than $GO_MIN; fetching $toolchain"
  dir=$(go_env go mod download -json "$toolchain" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $dir ]] || die "could not download $toolchain"
  # The module cache drops execute bits; `go` restores them the same way when it switches.
  chmod -R a+x "$dir/bin" "$dir/pkg/tool"
  GO="$dir/bin/go"
}

# go_tool <name> <module@version>: build it unless the stamp says this version is already there.
go_tool() {
  local name=$1 module=$2 stamp="$BIN_DIR/.$1.version"
  if [[ -x $BIN_DIR/$name && -f $stamp && $(cat "$stamp") == "$module" ]]; then
    log "$name: $module already built"
    return 0
  fi
  ensure_go
  log "$name: go install $module (a few minutes the first time)"
  mkdir -p "$BIN_DIR"
  go_env "$GO" install "$module" || die "go install $module failed"
  echo "$module" >"$stamp"
}
