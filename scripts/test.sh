#!/usr/bin/env bash
# `npm test`: the full suite against real PostgreSQL, Redis and Kafka, from a fresh machine.
source "$(dirname "$0")/lib.sh"
ensure_node
ensure_node_modules
ensure_infrastructure
ensure_tools
build
generated=(proto/src/gen sdks/sdk/src/api.gen.ts sdks/sdk-python/src/herald_sdk/_generated.py sdks/agents/src/fields.gen.ts sdks/agents-python/src/herald_agents/_generated.py deploy/kafka/topics.txt charts/herald/files/k6 charts/herald/README.md)
if [ "${CI:-}" = "true" ] && [ -n "$(git status --porcelain -- "${generated[@]}")" ]; then
  echo "Generated code differs from its sources (.proto files, the gateway's route schemas (the SDKs' types, the agent tools' fields), the bus's topics, loadtest/k6); run 'npm run generate' and commit." >&2
  git status --porcelain -- "${generated[@]}" >&2
  exit 1
fi
# Services of different versions talk during a rolling deploy: the .proto files must stay
# wire-compatible with main's (on main itself this compares main with itself).
if git rev-parse -q --verify refs/heads/main >/dev/null; then
  (cd proto && ../node_modules/.bin/buf breaking --against '../.git#branch=main,subdir=proto')
fi
export DATABASE_URL="$TEST_DATABASE_URL"
# Test files run in parallel; each works in its own workspace (tenant) or schema. Disruptive ones
# (*.disruptive.test.js: they stop and start the shared PostgreSQL, Redis and Kafka) run after
# them, one at a time, with nothing else running.
mapfile -t files < <(find proto packages sdks tools services console gateway charts loadtest -path '*/node_modules' -prune -o -path '*/dist/test/*' -name '*.test.js' ! -name '*.disruptive.test.js' -print | sort)
mapfile -t disruptive < <(find proto packages sdks tools services console gateway charts loadtest -path '*/node_modules' -prune -o -path '*/dist/test/*' -name '*.disruptive.test.js' -print | sort)
echo "==> ${#files[@]} test files, then ${#disruptive[@]} disruptive"
# A hung test fails by name after TEST_TIMEOUT_MS instead of holding up the whole run.
node --test --test-concurrency="${TEST_CONCURRENCY:-4}" --test-timeout="${TEST_TIMEOUT_MS:-420000}" --test-reporter=spec "$@" "${files[@]}"
if ((${#disruptive[@]} > 0)); then
  echo "==> disruptive tests, alone"
  # --test-force-exit: a Kafka client that lived through a broker restart may keep a socket open
  # after its disconnect; the file must still end once its tests have.
  node --test --test-concurrency=1 --test-force-exit --test-timeout="${TEST_TIMEOUT_MS:-600000}" --test-reporter=spec "$@" "${disruptive[@]}"
  # Leave the servers up for whatever runs next, whatever the tests did to them.
  bash deploy/infra.sh up >/dev/null
fi
