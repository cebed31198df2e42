#!/usr/bin/env bash
# Regenerates the committed code: the TypeScript of every .proto file, the SDKs' API types (JS and
# Python) and the agent tools' fields (TypeScript and Python) from the OpenAPI document the gateway
# builds out of its route schemas (scripts/generate-api-types.ts), and deploy/kafka/topics.txt
# (read by deploy/infra.sh before anything is built) from the bus's topic declarations, and the chart's copy of the k6
# scripts (charts/herald/files/k6, from loadtest/k6) and the chart's README. CI runs this and fails when
# `git diff` shows the committed code has drifted from its sources.
set -euo pipefail
cd "$(dirname "$0")/../proto"
rm -rf src/gen
../node_modules/.bin/buf lint
../node_modules/.bin/buf generate
cd ..
# The gateway serves the OpenAPI document the SDKs' types are generated from, so it is built first.
node_modules/.bin/tsc -b gateway packages/bus
node scripts/generate-api-types.ts
node --input-type=module -e "import { renderTopicsFile } from '@herald/bus'; process.stdout.write(renderTopicsFile());" > deploy/kafka/topics.txt
# The chart's load-test ConfigMap mounts the k6 scripts from charts/herald/files/k6: a copy of
# loadtest/k6 (the scripts and their lib/, without the type-check's own files).
rm -rf charts/herald/files/k6
mkdir -p charts/herald/files/k6/lib
cp loadtest/k6/*.ts charts/herald/files/k6/
find loadtest/k6/lib -maxdepth 1 -name '*.ts' ! -name '*.d.ts' -exec cp {} charts/herald/files/k6/lib/ \;
# The chart's README (chart hubs show it): its table of values comes from values.yaml's comments.
node scripts/chart-readme.mjs
