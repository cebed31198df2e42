#!/usr/bin/env bash
# Regenerates the TypeScript for every .proto file. The output is committed; CI runs this and
# fails when `git diff` shows the committed code has drifted from the .proto files.
set -euo pipefail
cd "$(dirname "$0")/../proto"
rm -rf src/gen
../node_modules/.bin/buf lint
../node_modules/.bin/buf generate
