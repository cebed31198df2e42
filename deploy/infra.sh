#!/usr/bin/env bash
# Local infrastructure for Herald: PostgreSQL, Redis, Kafka (KRaft) and Mailpit (SMTP), no Docker,
# no systemd. All state lives in <repo>/.local (git-ignored). Ports: HERALD_PG_PORT,
# HERALD_REDIS_PORT, HERALD_KAFKA_PORT, HERALD_KAFKA_CONTROLLER_PORT, HERALD_SMTP_PORT,
# HERALD_MAILPIT_HTTP_PORT (defaults 15432, 16379, 19092, 19093, 11025, 18025).
#
#   deploy/infra.sh up       install what is missing, start everything, create DBs and topics
#   deploy/infra.sh status   one line per component; exit 0 only if all are running
#   deploy/infra.sh stop     stop everything (data kept)
#   deploy/infra.sh env      print export lines:  eval "$(deploy/infra.sh env)"
#   deploy/infra.sh reset    stop and delete .local (clean slate)
#   deploy/infra.sh stop|start|restart <postgres|redis|kafka|mailpit>
#                            one component only (a failover drill, or a test of riding it out)
#   deploy/infra.sh crash <postgres|redis|kafka>
#                            SIGKILL the running server and its children (no clean shutdown; the
#                            next start recovers: PostgreSQL from its WAL, Kafka its logs; Redis,
#                            which saves nothing here, starts empty); prints the pid killed, fails
#                            when none runs
#   deploy/infra.sh pid <postgres|redis|kafka|mailpit>
#                            print the running server's pid; fails when none runs (a drill
#                            compares it before and after a fault, to prove the fault bit)
#
# Change ports only while everything is stopped (the running servers keep their old ports).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
# shellcheck source=lib/common.sh
source "$LIB_DIR/common.sh"
# shellcheck source=lib/postgres.sh
source "$LIB_DIR/postgres.sh"
# shellcheck source=lib/redis.sh
source "$LIB_DIR/redis.sh"
# shellcheck source=lib/kafka.sh
source "$LIB_DIR/kafka.sh"
# shellcheck source=lib/go.sh
source "$LIB_DIR/go.sh"
# shellcheck source=lib/mailpit.sh
source "$LIB_DIR/mailpit.sh"

cmd_env() {
  # The pinned Node.js that scripts/lib.sh unpacked, where the machine's own is another release.
  local node_bin
  node_bin="$LOCAL_DIR/node-v$(<"$REPO_ROOT/.node-version")/bin"
  [[ -x $node_bin/node ]] && echo "export PATH=$node_bin:\$PATH"
  cat <<EOF
export DATABASE_URL=postgres://herald:herald@$BIND_ADDR:$HERALD_PG_PORT/herald
export TEST_DATABASE_URL=postgres://herald:herald@$BIND_ADDR:$HERALD_PG_PORT/herald_test
export REDIS_URL=redis://$BIND_ADDR:$HERALD_REDIS_PORT
export KAFKA_BROKERS=$BIND_ADDR:$HERALD_KAFKA_PORT
export SMTP_URL=smtp://$BIND_ADDR:$HERALD_SMTP_PORT
export MAILPIT_URL=http://$BIND_ADDR:$HERALD_MAILPIT_HTTP_PORT
EOF
}

cmd_status() {
  local rc=0
  pg_status_line || rc=1
  redis_status_line || rc=1
  kafka_status_line || rc=1
  mailpit_status_line || rc=1
  return "$rc"
}

# Installing packages and switching to the postgres user need root.
require_root() { ((EUID == 0)) || die "deploy/infra.sh $1 must run as root"; }

cmd_up() {
  local started=$SECONDS
  require_root up
  ensure_packages postgresql redis-server openjdk-17-jre-headless maven
  take_lock
  kafka_fetch_libs
  kafka_config
  kafka_format
  # Kafka boots slowest: launch it first and set up PostgreSQL and Redis meanwhile.
  kafka_start
  pg_up
  redis_up
  # Built here too (skipped when present), so `up` works before deploy/tools.sh ever ran.
  mailpit_up
  kafka_wait
  kafka_topics
  log "all up in $((SECONDS - started))s"
  cmd_status
  echo "Use in a shell:  eval \"\$(deploy/infra.sh env)\""
}

cmd_stop() {
  require_root stop
  take_lock
  mailpit_stop
  kafka_stop
  redis_stop
  pg_stop
}

cmd_reset() {
  cmd_stop
  log "deleting $LOCAL_DIR"
  rm -rf "$LOCAL_DIR"
  # The socket dir sits outside .local only for very deep checkouts.
  [[ $PG_SOCK_DIR == "$LOCAL_DIR"/* ]] || rm -rf "$PG_SOCK_DIR"
}

# One component, already installed and set up by `up`: stop, start or restart it. A restart is
# what a managed service does on failover or a minor upgrade (PostgreSQL: a fast shutdown that
# terminates every session), so Herald's processes must ride through it.
cmd_component() {
  local action=$1 component=$2
  require_root "$action $component"
  take_lock
  case "$component:$action" in
    postgres:stop) pg_stop ;;
    postgres:start) pg_start && wait_for 30 postgres "$PG_LOG" pg_ready ;;
    postgres:restart) pg_stop && pg_start && wait_for 30 postgres "$PG_LOG" pg_ready ;;
    redis:stop) redis_stop ;;
    redis:start) redis_up ;;
    redis:restart) redis_stop && redis_up ;;
    kafka:stop) kafka_stop ;;
    kafka:start) kafka_start && kafka_wait ;;
    kafka:restart) kafka_stop && kafka_start && kafka_wait ;;
    postgres:crash) crash_running postgres pg_pid ;;
    redis:crash) crash_running redis redis_pid ;;
    kafka:crash) crash_running kafka kafka_pid ;;
    mailpit:stop) mailpit_stop ;;
    mailpit:start) mailpit_up ;;
    mailpit:restart) mailpit_stop && mailpit_up ;;
    *) die "unknown component '$component' (postgres, redis, kafka or mailpit)" ;;
  esac
}

cmd_pid() {
  case "$1" in
    postgres) pg_pid ;;
    redis) redis_pid ;;
    kafka) kafka_pid ;;
    mailpit) mailpit_pid ;;
    *) die "unknown component '$1' (postgres, redis, kafka or mailpit)" ;;
  esac || die "$1: not running"
}

# crash_running <name> <pid function>: a crash of nothing is an error, so a drill whose
# fault found no server fails instead of passing as a no-op.
crash_running() {
  local pid
  pid=$("$2") || die "$1: not running, nothing to crash"
  crash_pid "$1" "$pid"
}

case "${1:-}" in
  up) cmd_up ;;
  status) cmd_status ;;
  stop) if [[ -n ${2:-} ]]; then cmd_component stop "$2"; else cmd_stop; fi ;;
  start) cmd_component start "${2:-}" ;;
  restart) cmd_component restart "${2:-}" ;;
  crash) cmd_component crash "${2:-}" ;;
  pid) cmd_pid "${2:-}" ;;
  env) cmd_env ;;
  reset) cmd_reset ;;
  *)
    sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
