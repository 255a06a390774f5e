#!/usr/bin/env bash
# Make sure PostgreSQL (127.0.0.1:5432), PgBouncer in transaction pooling in front of it
# (127.0.0.1:6432), Redis (127.0.0.1:6379) and NATS JetStream (127.0.0.1:4222) accept connections. A service that is down is started; its Debian package is installed first if it
# is missing. Also installs Debian's chromium when missing (the dashboard's browser tests drive it
# with Playwright; no browser is downloaded), Debian's redis-sentinel (failover tests start
# Sentinels of their own; no Sentinel service is started) and Debian's libfaketime (the clock tests
# run worker processes whose clock is shifted with LD_PRELOAD). Idempotent. Prints one line per service (already up / started / FAILED) and exits
# non-zero if any service is unavailable: a missing service fails the run, it is never skipped.
#
# SERVICES_WAIT_SECONDS (default 30) bounds the wait for each service after starting it.
set -euo pipefail

WAIT_SECONDS="${SERVICES_WAIT_SECONDS:-30}"
APT_UPDATED=0
FAILURES=0
PG_INSTALLED_NOW=0
PG_NAME="PostgreSQL 127.0.0.1:5432"
NATS_NAME="NATS 127.0.0.1:4222"
PGBOUNCER_NAME="PgBouncer 127.0.0.1:6432 (transaction pooling)"
# PgBouncer's configuration is this script's own (never Debian's /etc/pgbouncer/pgbouncer.ini).
PGBOUNCER_CONF=/etc/pgbouncer/schedule-sdk-ci.ini
PGBOUNCER_LOG=/var/log/postgresql/pgbouncer-schedule-sdk-ci.log
PGBOUNCER_PID=/var/run/postgresql/pgbouncer-schedule-sdk-ci.pid
DETAIL_LOG="$(mktemp "${TMPDIR:-/tmp}/ensure-services.XXXXXX")"
trap 'rm -f "$DETAIL_LOG"' EXIT
export DEBIAN_FRONTEND=noninteractive

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    else
        sudo -n "$@"
    fi
}

# --- readiness checks (no nc: pg_isready, redis-cli, bash /dev/tcp) ---------------------------

pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432 >/dev/null 2>&1; }

# A query through the pooler reaches PostgreSQL; SHOW POOLS on its admin console is PgBouncer's own.
pgbouncer_ready() {
    psql -h 127.0.0.1 -p 6432 -U postgres -w -X -Atq -d test -c 'SELECT 1' >/dev/null 2>&1 &&
        psql -h 127.0.0.1 -p 6432 -U postgres -w -X -Atq -d pgbouncer -c 'SHOW POOLS' >/dev/null 2>&1
}

redis_ready() { [ "$(timeout 3 redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

# Reads the server's INFO line and closes the connection at once (a lingering client gets PINGed).
nats_info() {
    # shellcheck disable=SC2016 # $line belongs to the inner shell
    timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/4222 && IFS= read -r line <&3 && printf "%s\n" "$line"' \
        2>/dev/null
}
nats_ready() { [[ "$(nats_info)" == INFO* ]]; }

# --- install / start --------------------------------------------------------------------------

apt_install() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        as_root apt-get update -qq
        APT_UPDATED=1
    fi
    as_root apt-get install -y -qq --no-install-recommends "$@"
}

pg_missing() { ! command -v pg_ctlcluster >/dev/null || [ -z "$(ls -A /etc/postgresql 2>/dev/null)" ]; }
redis_missing() { ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; }
pgbouncer_missing() { ! command -v pgbouncer >/dev/null; }
nats_missing() { [ ! -x /usr/sbin/nats-server ]; }

# shellcheck disable=SC2046 # the project's start command, verbatim
pg_start() { as_root pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start; }

# Every database name ("*") goes to the shared PostgreSQL as user postgres (the per-run test
# databases included); clients are not authenticated (auth_type any: loopback only).
pgbouncer_start() {
    as_root mkdir -p /etc/pgbouncer /var/run/postgresql /var/log/postgresql
    as_root tee "$PGBOUNCER_CONF" >/dev/null <<INI
[databases]
* = host=127.0.0.1 port=5432 user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 6432
unix_socket_dir =
auth_type = any
admin_users = postgres
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 20
server_idle_timeout = 10
logfile = $PGBOUNCER_LOG
pidfile = $PGBOUNCER_PID
INI
    as_root chown postgres:postgres /var/run/postgresql /var/log/postgresql
    as_root runuser -u postgres -- pgbouncer -d -q "$PGBOUNCER_CONF"
}

redis_start() {
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

nats_start() {
    as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
        -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}

# A daemon keeps every file it inherits open for its whole life: one started under
# `flock /tmp/cpu.lock …` would hold that lock until it stops. Closes every descriptor above 2 of the
# (sub)shell it runs in.
close_inherited_fds() {
    local fd
    for fd in /proc/"$BASHPID"/fd/*; do
        fd="${fd##*/}"
        if [ "$fd" -gt 2 ]; then
            eval "exec $fd>&-" 2>/dev/null || true
        fi
    done
}

# wait_until CHECK: polls CHECK twice a second for at most WAIT_SECONDS.
wait_until() {
    local deadline=$((SECONDS + WAIT_SECONDS))
    until "$1"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            return 1
        fi
        sleep 0.5
    done
}

# The service's own log, for the last lines of a failed start (start-stop-daemon hides its output).
# shellcheck disable=SC2012 # Debian's fixed log names
pg_log() { ls -t /var/log/postgresql/postgresql-*-main.log 2>/dev/null | head -n 1 || true; }
pgbouncer_log() { echo "$PGBOUNCER_LOG"; }
redis_log() { echo /var/log/redis/ci.log; }
nats_log() { echo /var/log/nats-server.log; }

fail() {
    echo "$1: FAILED - $2"
    if [ -s "$DETAIL_LOG" ]; then
        sed 's/^/    /' "$DETAIL_LOG"
    fi
    FAILURES=$((FAILURES + 1))
}

# ensure NAME KEY PACKAGE: KEY selects the KEY_ready / KEY_missing / KEY_start functions.
ensure() {
    local name="$1" key="$2" package="$3" how="started"
    : >"$DETAIL_LOG"
    if "${key}_ready"; then
        echo "$name: already up"
        return 0
    fi
    if "${key}_missing"; then
        if ! apt_install "$package" >>"$DETAIL_LOG" 2>&1; then
            fail "$name" "Debian package $package is missing and could not be installed"
            return 0
        fi
        how="started (installed $package)"
        if [ "$key" = pg ]; then PG_INSTALLED_NOW=1; fi
    fi
    # judged by readiness below, not by the exit code
    (close_inherited_fds && "${key}_start") >>"$DETAIL_LOG" 2>&1 || true
    if wait_until "${key}_ready"; then
        echo "$name: $how"
    else
        local log
        log="$("${key}_log")"
        if [ -n "$log" ] && [ -r "$log" ]; then
            { echo "last lines of $log:"; tail -n 5 "$log"; } >>"$DETAIL_LOG"
        fi
        fail "$name" "not accepting connections ${WAIT_SECONDS}s after the start command"
    fi
}

# --- PostgreSQL: the tests connect as postgres over TCP, without a password, to database test ----

pg_psql_tcp() { psql -h 127.0.0.1 -p 5432 -U postgres -w -X -Atq "$@"; }
pg_psql_local() { as_root runuser -u postgres -- psql -X -Atq "$@"; }

# A package installed just now has a fresh cluster: give 127.0.0.1 trust auth (as on every project
# machine) and reload. Never touches the configuration of a cluster this script did not install.
pg_trust_loopback() {
    local hba
    hba="$(pg_psql_local -c 'SHOW hba_file')"
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    pg_psql_local -c 'SELECT pg_reload_conf()' >/dev/null
    sleep 1
}

pg_ensure_test_database() {
    if ! pg_psql_tcp -d postgres -c 'SELECT 1' >/dev/null 2>&1; then
        if [ "$PG_INSTALLED_NOW" -eq 1 ]; then
            pg_trust_loopback >>"$DETAIL_LOG" 2>&1 || true
        fi
        if ! pg_psql_tcp -d postgres -c 'SELECT 1' >/dev/null 2>>"$DETAIL_LOG"; then
            fail "$PG_NAME" "user postgres cannot log in over 127.0.0.1 without a password (trust auth needed)"
            return 0
        fi
    fi
    if [ "$(pg_psql_tcp -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'test'")" != "1" ]; then
        if pg_psql_tcp -d postgres -c 'CREATE DATABASE test' >>"$DETAIL_LOG" 2>&1; then
            echo "$PG_NAME: created database test"
        else
            fail "$PG_NAME" "database test is missing and could not be created"
        fi
    fi
}

# --- Chromium for the dashboard's browser tests (Playwright drives Debian's build; no download) ---

CHROMIUM_NAME="Chromium (browser tests)"

chromium_ensure() {
    : >"$DETAIL_LOG"
    if command -v chromium >/dev/null; then
        echo "$CHROMIUM_NAME: already installed"
    elif apt_install chromium >>"$DETAIL_LOG" 2>&1 && command -v chromium >/dev/null; then
        echo "$CHROMIUM_NAME: installed chromium"
    else
        fail "$CHROMIUM_NAME" "Debian package chromium is missing and could not be installed"
    fi
}

FAKETIME_NAME="libfaketime (clock tests)"
faketime_present() { compgen -G "/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null; }

faketime_ensure() {
    : >"$DETAIL_LOG"
    if faketime_present; then
        echo "$FAKETIME_NAME: already installed"
    elif apt_install libfaketime >>"$DETAIL_LOG" 2>&1 && faketime_present; then
        echo "$FAKETIME_NAME: installed libfaketime"
    else
        fail "$FAKETIME_NAME" "Debian package libfaketime is missing and could not be installed"
    fi
}

# --- Redis Sentinel: failover tests start their own primary, replica and Sentinels (no service) ---

SENTINEL_NAME="Redis Sentinel (failover tests)"

sentinel_ensure() {
    : >"$DETAIL_LOG"
    if command -v redis-sentinel >/dev/null; then
        echo "$SENTINEL_NAME: already installed"
    elif apt_install redis-sentinel >>"$DETAIL_LOG" 2>&1 && command -v redis-sentinel >/dev/null; then
        echo "$SENTINEL_NAME: installed redis-sentinel"
    else
        fail "$SENTINEL_NAME" "Debian package redis-sentinel is missing and could not be installed"
    fi
}

main() {
    chromium_ensure
    faketime_ensure
    ensure "$PG_NAME" pg postgresql
    if pg_ready; then
        : >"$DETAIL_LOG"
        pg_ensure_test_database
    fi
    if pg_ready; then # PgBouncer fronts PostgreSQL: without it, it could not pass its readiness check
        ensure "$PGBOUNCER_NAME" pgbouncer pgbouncer
    else
        fail "$PGBOUNCER_NAME" "not started: PostgreSQL is down"
    fi
    ensure "Redis 127.0.0.1:6379" redis redis-server
    sentinel_ensure
    ensure "$NATS_NAME" nats nats-server
    if nats_ready && [[ "$(nats_info)" != *'"jetstream":true'* ]]; then
        fail "$NATS_NAME" "the server runs without JetStream (start it with -js)"
    fi
    if [ "$FAILURES" -gt 0 ]; then
        echo "ensure-services: $FAILURES problem(s); see the FAILED line(s) above" >&2
        exit 1
    fi
}

# Sourcing the file (for a test of one function) defines the functions without running main.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
