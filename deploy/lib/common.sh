# shellcheck shell=bash
# Shared settings and helpers for deploy/infra.sh (sourced, not run directly).

DEPLOY_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$DEPLOY_DIR/.." && pwd)
# Everything the infra writes (data, logs, pids, Kafka jars) lives here; git-ignored.
LOCAL_DIR="$REPO_ROOT/.local"

# Non-standard ports so we never clash with system services on the default ones.
HERALD_PG_PORT=${HERALD_PG_PORT:-15432}
HERALD_REDIS_PORT=${HERALD_REDIS_PORT:-16379}
HERALD_KAFKA_PORT=${HERALD_KAFKA_PORT:-19092}
HERALD_KAFKA_CONTROLLER_PORT=${HERALD_KAFKA_CONTROLLER_PORT:-19093}
BIND_ADDR=127.0.0.1

# LOG_TAG names the script that logs (deploy/tools.sh sets `tools`).
log() { printf '[%s] %s\n' "${LOG_TAG:-infra}" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${LOG_TAG:-infra}" "$*" >&2; exit 1; }

# Show the end of a log file (after a failure), so the cause is visible at once.
show_log_tail() {
  [[ -s $1 ]] || return 0
  printf '[%s] --- last lines of %s ---\n' "${LOG_TAG:-infra}" "$1" >&2
  tail -n 20 "$1" >&2
}

# True if something accepts TCP connections on 127.0.0.1:<port> (bash built-in, no extra tools).
port_open() { (exec 3<>"/dev/tcp/$BIND_ADDR/$1") 2>/dev/null; }

# True if <pid> is alive and its command line contains <pattern>. Zombies have an empty
# cmdline, so they count as dead (PID 1 of a container may be slow to reap them).
pid_matches() {
  { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF -- "$2"
}

# Print the pid stored in <pidfile> if that process is alive and its command line
# contains <pattern>; guards against stale pid files whose pid was reused.
live_pid() {
  local pidfile=$1 pattern=$2 pid
  [[ -r $pidfile ]] || return 1
  read -r pid <"$pidfile" || return 1
  [[ $pid =~ ^[0-9]+$ ]] && pid_matches "$pid" "$pattern" || return 1
  echo "$pid"
}

# wait_for <seconds> <what> <logfile> <command...>: poll until the command succeeds.
wait_for() {
  local secs=$1 what=$2 logfile=$3
  shift 3
  local deadline=$((SECONDS + secs))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      show_log_tail "$logfile"
      die "$what not ready after ${secs}s; see $logfile"
    fi
    sleep 0.5
  done
}

# stop_pid <name> <pid> <pattern> <seconds>: SIGTERM (clean shutdown), SIGKILL after the timeout.
stop_pid() {
  local name=$1 pid=$2 pattern=$3 secs=$4 deadline
  kill -TERM "$pid" 2>/dev/null || return 0
  deadline=$((SECONDS + secs))
  while pid_matches "$pid" "$pattern"; do
    if ((SECONDS >= deadline)); then
      log "$name did not stop within ${secs}s; killing pid $pid"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.3
  done
}

# crash_pid <name> <pid>: SIGKILL the process and every process below it at once, as
# the kernel's OOM killer or a lost node does; no shutdown code runs. Prints the pid it killed.
crash_pid() {
  local name=$1 pid=$2 tree=() deadline
  # Frozen first, so it forks nothing between the listing of its children and the kill: a
  # PostgreSQL backend forked in that gap would outlive it, keep the shared memory and refuse the
  # next start ("pre-existing shared memory block is still in use").
  kill -STOP "$pid" 2>/dev/null || die "$name: pid $pid is gone, nothing to crash"
  deadline=$((SECONDS + 10))
  until [[ $(proc_state "$pid") == [TtZ] || ! -d /proc/$pid ]]; do
    ((SECONDS < deadline)) || die "$name: pid $pid did not stop within 10 s of SIGSTOP"
    sleep 0.05
  done
  mapfile -t tree < <(descendants "$pid")
  kill -KILL "$pid" "${tree[@]}" 2>/dev/null || true
  deadline=$((SECONDS + 60))
  while any_alive "$pid" "${tree[@]}"; do
    ((SECONDS < deadline)) || die "$name: pid $pid or a child still alive 60 s after SIGKILL"
    sleep 0.1
  done
  # Dead, but a zombie until the machine's init reaps it; PostgreSQL's next start would take the
  # unreaped postmaster for a running one. Waited for a while; pg_start copes with one left over.
  deadline=$((SECONDS + 10))
  while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.1; done
  log "$name: crashed (SIGKILL to pid $pid and ${#tree[@]} child process(es))"
  echo "$pid"
}

# The one-letter state of a process (R, S, D, T, Z, …), empty when it is gone.
proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) } # the command name, in parentheses, may hold spaces
  echo "${stat%% *}"
}

# Every process below <pid>, depth first.
descendants() {
  local child
  for child in $(cat "/proc/$1/task/"*/children 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}

# Alive until it has exited with all its threads (a JVM's last thread still holds its ports when
# the main one is already a zombie). A zombie holds nothing; when it is reaped is the init's affair.
any_alive() {
  local pid threads
  for pid in "$@"; do
    [[ -d /proc/$pid ]] || continue
    threads=(/proc/"$pid"/task/*)
    [[ $(proc_state "$pid") == Z && ${#threads[@]} -le 1 ]] || return 0
  done
  return 1
}

# Refuse to start when another process already holds one of our ports.
require_port_free() {
  local name=$1 port=$2
  if port_open "$port"; then
    die "$name: port $port is already in use by another process (not ours); stop it or set the matching HERALD_*_PORT"
  fi
}

# Install the Debian packages that are missing; apt-get update only when something is.
ensure_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  ((EUID == 0)) || die "need root to install: ${missing[*]}"
  mkdir -p "$LOCAL_DIR"
  local apt_log="$LOCAL_DIR/apt.log"
  log "installing ${missing[*]} (apt, log: $apt_log)"
  # Lock timeout: another apt run (e.g. a colleague's) may hold the dpkg lock for a while.
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
  if ! { DEBIAN_FRONTEND=noninteractive "${apt[@]}" update &&
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1; then
    show_log_tail "$apt_log"
    die "apt-get failed; see $apt_log"
  fi
}

# Serialize infra.sh runs (two shells running `up` at once would race on the same data).
take_lock() {
  mkdir -p "$LOCAL_DIR"
  exec 9>"$LOCAL_DIR/.infra.lock"
  flock -w 300 9 || die "another deploy/infra.sh is still running (lock $LOCAL_DIR/.infra.lock)"
}
