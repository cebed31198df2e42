# shellcheck shell=bash
# Mailpit: a real SMTP server with an HTTP API for reading what it received, the mail server of
# local runs and tests (production brings its own SMTP: SMTP_URL). Built from the Go module proxy
# into .local/bin (deploy/lib/go.sh), run in the background, loopback only, mail kept in
# .local/mailpit. Needs deploy/lib/common.sh and deploy/lib/go.sh sourced first.

MAILPIT_MODULE=github.com/axllent/mailpit@v1.33.1
HERALD_SMTP_PORT=${HERALD_SMTP_PORT:-11025}
HERALD_MAILPIT_HTTP_PORT=${HERALD_MAILPIT_HTTP_PORT:-18025}
MAILPIT_DIR="$LOCAL_DIR/mailpit"
MAILPIT_PID="$MAILPIT_DIR/mailpit.pid"
MAILPIT_LOG="$MAILPIT_DIR/mailpit.log"

mailpit_build() { go_tool mailpit "$MAILPIT_MODULE"; }

mailpit_pid() { live_pid "$MAILPIT_PID" mailpit; }
mailpit_ready() { port_open "$HERALD_SMTP_PORT" && port_open "$HERALD_MAILPIT_HTTP_PORT"; }

mailpit_up() {
  mailpit_build
  mkdir -p "$MAILPIT_DIR"
  if mailpit_pid >/dev/null; then
    log "mailpit: already running"
  else
    require_port_free mailpit-smtp "$HERALD_SMTP_PORT"
    require_port_free mailpit-http "$HERALD_MAILPIT_HTTP_PORT"
    log "mailpit: starting"
    # setsid + 9>&-: detached from this shell, and not holding infra.sh's lock fd.
    setsid "$BIN_DIR/mailpit" --smtp "$BIND_ADDR:$HERALD_SMTP_PORT" --listen "$BIND_ADDR:$HERALD_MAILPIT_HTTP_PORT" \
      --database "$MAILPIT_DIR/mailpit.db" --smtp-auth-accept-any --smtp-auth-allow-insecure --disable-version-check \
      </dev/null >>"$MAILPIT_LOG" 2>&1 9>&- &
    echo $! >"$MAILPIT_PID"
  fi
  wait_for 15 mailpit "$MAILPIT_LOG" mailpit_ready
}

mailpit_stop() {
  local pid
  if ! pid=$(mailpit_pid); then
    log "mailpit: not running"
    return 0
  fi
  log "mailpit: stopping"
  stop_pid mailpit "$pid" mailpit 15
}

mailpit_status_line() {
  local pid
  if pid=$(mailpit_pid); then
    printf '%-9s running  smtp %s:%s, http %s:%s  (pid %s)\n' mailpit "$BIND_ADDR" "$HERALD_SMTP_PORT" "$BIND_ADDR" "$HERALD_MAILPIT_HTTP_PORT" "$pid"
  else
    printf '%-9s stopped  smtp %s:%s, http %s:%s\n' mailpit "$BIND_ADDR" "$HERALD_SMTP_PORT" "$BIND_ADDR" "$HERALD_MAILPIT_HTTP_PORT"
    return 1
  fi
}
