#!/usr/bin/env bash
# `npm start`: installs what is missing, starts the local infrastructure, builds, and runs every
# service plus the gateway on http://localhost:8080 until Ctrl-C.
source "$(dirname "$0")/lib.sh"
ensure_node
ensure_node_modules
ensure_infrastructure
build
exec node scripts/supervise.mjs
