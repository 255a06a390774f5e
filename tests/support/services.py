"""Per-run isolation on the real PostgreSQL, Redis and NATS JetStream services.

Plain helpers, no pytest fixtures: ``tests/conftest.py`` wraps them. Each pytest process gets its own
``RUN_ID`` and, from it, its own Postgres databases, Redis db number and NATS stream names, so runs on
one machine cannot interfere. A service that is down raises ``RuntimeError``; tests never skip for it
(a missing service fails loudly). ``scripts/ensure-services.sh`` starts the services.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
import psycopg
import redis
from psycopg import sql
from redis.backoff import NoBackoff
from redis.retry import Retry

PG_HOST, PG_PORT = "127.0.0.1", 5432
#: PgBouncer in transaction pooling in front of that server (any database name).
PGBOUNCER_PORT = 6432
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
NATS_HOST, NATS_PORT = "127.0.0.1", 4222
PG_ADMIN_URL = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test"
NATS_URL = f"nats://{NATS_HOST}:{NATS_PORT}"
CONNECT_TIMEOUT = 3.0

#: Unique id of this pytest process, e.g. ``"4711_a1b2c3"``.
RUN_ID = f"{os.getpid()}_{secrets.token_hex(3)}"
#: How long a session's teardown waits for its databases to be dropped (seconds; its last test's
#: time limit is 30 s).
DROP_ALL_SECONDS = 15.0
#: Unix time this process started; Postgres database names carry it so stale ones can be found.
RUN_STARTED = int(time.time())
_TEMPLATES = itertools.count(1)
#: Numbers the databases of every PostgresDatabases of this process (names never repeat).
_NAMES = itertools.count(1)

_PG_NAME = re.compile(r"^sdk_(\d{10})_")
_STREAM_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_TEST_STREAM = re.compile(r"^T\d+_[0-9A-F]{6}")


#: What housekeeping left undone in this process (a database not dropped in time, ...): reported in
#: the run's summary by tests/conftest.py, never as the error of the test whose teardown it was.
HOUSEKEEPING: list[str] = []


def housekeeping(message: str) -> None:
    """Note ``message`` for the summary at the end of the run."""
    HOUSEKEEPING.append(message)


def end_leftover_children() -> None:
    """Kill the child processes this process still has (a test that left a worker running), each
    noted for the summary: the run ends with none of its own processes left behind."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" ", 1)
            ppid = int(rest.rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == me:
            housekeeping(f"a test left process {pid} running ({command.strip()[:120]}): killed")
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


def _unreachable(what: str, host: str, port: int) -> str:
    return f"{what} is not reachable on {host}:{port} — run scripts/ensure-services.sh"


# --- availability checks: raise, never skip ------------------------------------------------------


def require_postgres(url: str = PG_ADMIN_URL) -> None:
    """Raise ``RuntimeError`` unless ``SELECT 1`` works on ``url``."""
    try:
        with psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT)) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        parts = urlsplit(url)
        host, port = parts.hostname or PG_HOST, parts.port or PG_PORT
        raise RuntimeError(f"{_unreachable('PostgreSQL', host, port)} ({exc})") from exc


def require_pgbouncer(port: int = PGBOUNCER_PORT) -> None:
    """Raise ``RuntimeError`` unless PgBouncer answers on ``port`` in transaction pooling mode and
    reaches PostgreSQL (``SHOW CONFIG`` on its admin console, ``SELECT 1`` through it)."""
    name = "PgBouncer (transaction pooling)"
    try:
        with psycopg.connect(
            f"postgresql://postgres@{PG_HOST}:{port}/pgbouncer",
            connect_timeout=int(CONNECT_TIMEOUT),
            autocommit=True,
            prepare_threshold=None,
        ) as admin:
            mode = {key: value for key, value, *_ in admin.execute("SHOW CONFIG").fetchall()}.get("pool_mode")
        with psycopg.connect(
            f"postgresql://postgres@{PG_HOST}:{port}/test",
            connect_timeout=int(CONNECT_TIMEOUT),
            prepare_threshold=None,
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise RuntimeError(f"{_unreachable(name, PG_HOST, port)} ({exc})") from exc
    if mode != "transaction":
        raise RuntimeError(f"{name} on {PG_HOST}:{port} runs with pool_mode={mode}, not transaction")


def through_pgbouncer(url: str) -> str:
    """The same database as the direct ``url``, through PgBouncer."""
    parts = urlsplit(url)
    if parts.port != PG_PORT:
        raise ValueError(f"{url} is not a database of the test server on port {PG_PORT}")
    return parts._replace(netloc=parts.netloc.replace(f":{PG_PORT}", f":{PGBOUNCER_PORT}")).geturl()


def require_redis(host: str = REDIS_HOST, port: int = REDIS_PORT) -> None:
    """Raise ``RuntimeError`` unless Redis answers ``PING``."""
    client = redis.Redis(
        host=host,
        port=port,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=CONNECT_TIMEOUT,
        retry=Retry(NoBackoff(), 0),  # answer at once; redis-py retries with backoff by default
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        raise RuntimeError(f"{_unreachable('Redis', host, port)} ({exc})") from exc
    finally:
        client.close()


def nats_server_info(host: str = NATS_HOST, port: int = NATS_PORT) -> dict[str, Any]:
    """Return the JSON of the ``INFO`` line that a NATS server sends first on a new connection."""
    with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT) as sock, sock.makefile("rb") as f:
        line = f.readline(64 * 1024)
    if not line.startswith(b"INFO "):
        raise OSError(f"expected a NATS INFO line, got {line[:80]!r}")
    info: dict[str, Any] = json.loads(line[5:])
    return info


def require_nats(host: str = NATS_HOST, port: int = NATS_PORT) -> None:
    """Raise ``RuntimeError`` unless a NATS server with JetStream enabled listens on ``host:port``."""
    try:
        info = nats_server_info(host, port)
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{_unreachable('NATS', host, port)} ({exc})") from exc
    if info.get("jetstream") is not True:
        raise RuntimeError(f"NATS on {host}:{port} runs without JetStream — start it with -js")


# --- PostgreSQL: one database per test, optionally copied from a template --------------------------


def postgres_url(database: str) -> str:
    """SQLAlchemy URL of ``database`` on the test server."""
    return f"postgresql+psycopg://postgres@{PG_HOST}:{PG_PORT}/{database}"


class _Dirty(Exception):
    """A given-back database whose schema is not the template's any more: it is dropped."""


def _conninfo(database: str) -> str:
    """A libpq URL of ``database`` whose statements give up after 10 s (the pool's own sessions)."""
    return f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{database}?options=-c%20statement_timeout%3D10000"


#: The schemas a test may have made or changed.
_SCHEMAS = (
    r"SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'"
)
#: The tables of the public schema.
_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"

#: One digest of everything in a database that a test could change and a truncate would not put
#: back: schemas, relations, columns and their defaults, indexes, constraints, triggers, functions,
#: types, views, rules, extensions, the database's own settings and prepared transactions.
_FINGERPRINT = r"""
SELECT md5(coalesce(string_agg(item, E'\n' ORDER BY item), '')) FROM (
  SELECT 'schema ' || nspname FROM pg_namespace
   WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
  UNION ALL
  SELECT 'rel ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || c.relpersistence::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'
  UNION ALL
  SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = 'public'
  UNION ALL
  SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(oid) || ' ' || tgenabled::text FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'
  UNION ALL
  SELECT 'type ' || t.typname || ' ' || t.typtype::text
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public'
  UNION ALL
  SELECT 'view ' || viewname || ' ' || md5(definition) FROM pg_views WHERE schemaname = 'public'
  UNION ALL
  SELECT 'rule ' || tablename || ' ' || rulename FROM pg_rules WHERE schemaname = 'public'
  UNION ALL
  SELECT 'extension ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL
  SELECT 'setting ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
   WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL
  SELECT 'prepared ' || gid FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT 'publication ' || pubname FROM pg_publication
) AS items(item)
"""


def _fingerprint(conn: psycopg.Connection[Any]) -> str:
    """The digest of ``_FINGERPRINT`` and of the seed tables' rows (the migrations' version)."""
    row = conn.execute(_FINGERPRINT).fetchone()
    digest = str(row[0]) if row else ""
    version = conn.execute("SELECT to_regclass('public.schedule_sdk_alembic_version')").fetchone()
    if version and version[0] is not None:
        rows = conn.execute("SELECT * FROM schedule_sdk_alembic_version ORDER BY 1").fetchall()
        digest += repr(rows)
    return digest


class PostgresDatabases:
    """Creates databases named ``sdk_<unixtime>_<RUN_ID>_<n>`` and drops them again.

    ``create_template(setup)`` builds one template (schema, seed rows) per run; later ``create()``
    calls copy it with ``CREATE DATABASE … TEMPLATE``, which is much faster than running migrations.
    """

    #: How long ``create_template`` waits for the setup callback's connections to close.
    template_release_timeout = 5.0

    def __init__(self, admin_url: str = PG_ADMIN_URL) -> None:
        self._admin_url = admin_url
        self._conn: psycopg.Connection[Any] | None = None
        self._created: list[str] = []
        self._template: str | None = None
        self._template_fingerprint = ""
        #: The template's rows, by table (the migrations' version row): put back after a truncate.
        self._seeds: dict[str, list[tuple[Any, ...]]] = {}
        #: Given-back databases, emptied, waiting for the next :meth:`lease`.
        self._pool: list[str] = []

    @property
    def prefix(self) -> str:
        return f"sdk_{RUN_STARTED}_{RUN_ID}"

    def _admin(self) -> psycopg.Connection[Any]:
        """The admin connection, re-opened if the server was restarted since it was last used."""
        if self._conn is not None and not self._conn.closed:
            try:
                self._conn.execute("SELECT 1")
            except psycopg.OperationalError:
                self._conn.close()
        if self._conn is None or self._conn.closed:
            require_postgres(self._admin_url)
            self._conn = psycopg.connect(self._admin_url, autocommit=True)
        return self._conn

    def _new_name(self, name_hint: str) -> str:
        hint = re.sub(r"[^a-z0-9]+", "_", name_hint.lower()).strip("_")
        name = f"{self.prefix}_{next(_NAMES)}"
        return f"{name}_{hint}"[:63].rstrip("_") if hint else name

    def lease(self, name_hint: str = "") -> str:
        """A database with exactly the template's schema and no rows but its seed rows (without a
        template: an empty database), under a name no earlier test used; return its URL.
        :meth:`give_back` returns it to the pool.

        A database comes from the pool of given-back ones when there is one, else it is copied
        from the template (:meth:`create`). Either way it is renamed for this lease, so a process
        left behind by an earlier test cannot reach it through its old URL.
        """
        if not self._pool:
            url = self.create(name_hint)
            if self._template is None and not self._template_fingerprint:  # empty databases
                with psycopg.connect(_conninfo(urlsplit(url).path.lstrip("/")), autocommit=True) as conn:
                    self._template_fingerprint = _fingerprint(conn)
            return url
        pooled = self._pool.pop()
        name = self._new_name(name_hint)
        try:
            self._rename(pooled, name)
        except psycopg.Error:  # e.g. an autovacuum that would not let go: a copy instead
            self._drop_or_leave(pooled)
            return self.create(name_hint)
        self._created.append(name)
        return postgres_url(name)

    def give_back(self, url: str) -> None:
        """End a :meth:`lease`: close every connection to the database, then empty it for the next
        lease if its schema is still the template's (all tables truncated, sequences restarted,
        the seed rows as the template has them), or drop it if the test changed the schema."""
        name = urlsplit(url).path.lstrip("/")
        if name not in self._created:
            raise ValueError(f"{name!r} was not created by this PostgresDatabases")
        self._created.remove(name)
        pooled = f"{self.prefix}_pool_{next(_NAMES)}"
        try:
            self._rename(name, pooled)  # from here on, nothing reaches it by the test's URL
            self._empty(pooled)
        except (psycopg.Error, _Dirty):
            self._drop_or_leave(pooled if self._exists(pooled) else name)
            return
        self._pool.append(pooled)

    def _rename(self, old: str, new: str, attempts: int = 5) -> None:
        """``ALTER DATABASE old RENAME TO new``, ending the sessions on it first (a session that
        connects in between makes the rename fail: ended again, at most ``attempts`` times)."""
        stmt = sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(new))
        for attempt in range(attempts):
            self._terminate(old)
            try:
                self._admin().execute(stmt)
                return
            except psycopg.errors.ObjectInUse:
                if attempt == attempts - 1:
                    raise

    def _terminate(self, name: str) -> None:
        self._admin().execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )

    def _exists(self, name: str) -> bool:
        row = self._admin().execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        return row is not None

    def _empty(self, name: str) -> None:
        """Empty ``name`` for its next lease: a copy of the template has every table truncated and
        the template's seed rows put back; an empty database loses every schema a test made.

        :raises _Dirty: its schema (or its seed rows) is not the template's any more.
        """
        with psycopg.connect(_conninfo(name), autocommit=True) as conn:
            if self._template is None:  # empty databases: whatever the test made goes
                schemas = conn.execute(_SCHEMAS).fetchall()
                with conn.transaction():
                    for (schema,) in schemas:
                        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
                    conn.execute("CREATE SCHEMA public")
            if _fingerprint(conn) != self._template_fingerprint:
                raise _Dirty(name)
            if self._template is None:
                return
            tables = [row[0] for row in conn.execute(_TABLES).fetchall()]
            if tables:
                names = sql.SQL(", ").join(sql.Identifier("public", t) for t in tables)
                with conn.transaction():
                    conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(names))
                    for table, rows in self._seeds.items():
                        for row in rows:
                            marks = sql.SQL(", ").join(sql.Placeholder() * len(row))
                            insert = sql.SQL("INSERT INTO {} VALUES ({})").format(
                                sql.Identifier("public", table), marks
                            )
                            conn.execute(insert, row)

    def create(self, name_hint: str = "") -> str:
        """Create an empty database (a copy of the template, if one was made); return its URL."""
        name = self._new_name(name_hint)
        stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if self._template is not None:
            stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(self._template)
            )
        try:
            self._admin().execute(stmt)
        except psycopg.errors.ObjectInUse as exc:
            raise RuntimeError(f"template {self._template} has open connections: {exc}") from exc
        self._created.append(name)
        return postgres_url(name)

    def create_template(self, setup: Callable[[str], None]) -> str:
        """Build the template once: ``setup(url)`` fills it and must dispose its engine. Returns its URL.

        Afterwards nobody can connect to the template (``ALLOW_CONNECTIONS false``), so every copy
        starts from exactly what ``setup`` left.
        """
        if self._template is not None:
            raise RuntimeError(f"template {self._template} already exists for this run")
        name = f"{self.prefix}_{next(_TEMPLATES)}_tpl"  # several objects in one run: distinct names
        self._admin().execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._template = name
        setup(postgres_url(name))
        self._wait_until_unused(name)
        with psycopg.connect(_conninfo(name), autocommit=True) as conn:
            self._template_fingerprint = _fingerprint(conn)
            for (table,) in conn.execute(_TABLES).fetchall():
                select = sql.SQL("SELECT * FROM {}").format(sql.Identifier("public", table))
                if rows := conn.execute(select).fetchall():
                    self._seeds[table] = rows
        self._wait_until_unused(name)
        self._admin().execute(
            sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(sql.Identifier(name))
        )
        return postgres_url(name)

    def _wait_until_unused(self, name: str) -> None:
        deadline = time.monotonic() + self.template_release_timeout
        while (count := self._backends(name)) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{count} connection(s) to template {name} still open after setup: "
                    "dispose the engine in the setup callback"
                )
            time.sleep(0.05)

    def _backends(self, name: str) -> int:
        row = (
            self._admin()
            .execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,))
            .fetchone()
        )
        return int(row[0]) if row else 0

    def _drop(self, name: str) -> None:
        conn = self._admin()
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def drop(self, url: str) -> None:
        """Drop one database this object created, given its URL (for a per-test teardown)."""
        name = urlsplit(url).path.lstrip("/")
        if name not in self._created:
            raise ValueError(f"{name!r} was not created by this PostgresDatabases")
        self._drop_or_leave(name)
        self._created.remove(name)

    #: How long a ``DROP DATABASE`` may take (seconds): a hang guard, within a test's own time
    #: limit. Each waits for the checkpoint under way and then forces its own; in a busy suite one
    #: checkpoint has spent 57 s syncing the files of the databases created since the last (25,529
    #: of them), so a drop can wait for nearly two. With the pool, drops are rare.
    drop_timeout = 120.0

    def _drop_or_leave(self, name: str) -> None:
        """Drop ``name``, or leave it with a warning when the drop does not finish within
        ``drop_timeout``: the next run's :meth:`cleanup_stale` drops it. A drop has waited more
        than 30 s with nothing in the server's log (at the end of CI runs, and in a test's
        teardown while other test processes were busy): housekeeping, not what a test tests."""
        conn = self._admin()
        try:
            conn.execute(f"SET statement_timeout = {int(self.drop_timeout * 1000)}")
            self._drop(name)
            conn.execute("RESET statement_timeout")
        except psycopg.Error as error:  # cancelled, or the connection left busy: a fresh one next
            conn.close()
            housekeeping(f"dropping {name} failed ({error}): left for cleanup_stale")

    def drop_all(self) -> None:
        """Drop every database this object created, the pooled ones and the template included
        (each as :meth:`_drop_or_leave` does)."""
        for name in reversed(self._created + self._pool):
            self._drop_or_leave(name)
        self._created.clear()
        self._pool.clear()
        if self._template is not None:
            self._drop_or_leave(self._template)
            self._template = None

    def drop_all_within(self, seconds: float) -> None:
        """:meth:`drop_all` and :meth:`close` on a thread of its own, waited for ``seconds`` at
        most (a session's teardown runs inside its last test's time limit): what it has not
        dropped by then is left for :meth:`cleanup_stale`, with a warning. A drop at the end of a
        busy run has taken longer than its own bound (the test timed out in ``DROP DATABASE``)."""

        def drop_and_close() -> None:
            self.drop_all()
            self.close()

        worker = threading.Thread(target=drop_and_close, name="drop-all", daemon=True)
        worker.start()
        worker.join(seconds)
        if worker.is_alive():  # its connection is still in use: it goes with the process
            housekeeping(f"dropping this run's databases took over {seconds} s: left for cleanup_stale")

    def cleanup_stale(self, max_age_hours: float = 6) -> list[str]:
        """Drop ``sdk_<unixtime>_…`` databases older than ``max_age_hours`` (left by crashed runs)."""
        cutoff = time.time() - max_age_hours * 3600
        rows = self._admin().execute("SELECT datname FROM pg_database").fetchall()
        stale = [
            name for (name,) in rows if (m := _PG_NAME.match(name)) is not None and int(m.group(1)) < cutoff
        ]
        for name in stale:
            self._drop(name)
        return stale

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> PostgresDatabases:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.drop_all()
        finally:
            self.close()


# --- Redis: one db number per run -------------------------------------------------------------------

REDIS_LOCK_PREFIX = "schedule_sdk:test-lock:"
REDIS_TEST_DBS = range(1, 16)  # db 0 holds the locks
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class RedisDbs:
    """Claims one Redis db (1–15) for this run with ``SET schedule_sdk:test-lock:<db> RUN_ID NX EX``.

    The lock lives in db 0 and expires after ``lock_seconds`` (so a crashed run frees its db);
    ``refresh()`` extends it.
    """

    def __init__(self, host: str = REDIS_HOST, port: int = REDIS_PORT, lock_seconds: int = 3600) -> None:
        self._host, self._port, self._lock_seconds = host, port, lock_seconds
        self._locks = redis.Redis(
            host=host, port=port, db=0, socket_connect_timeout=CONNECT_TIMEOUT, decode_responses=True
        )
        self.db: int | None = None

    @property
    def url(self) -> str:
        if self.db is None:
            raise RuntimeError("no Redis db allocated yet: call allocate()")
        return f"redis://{self._host}:{self._port}/{self.db}"

    def allocate(self) -> str:
        """Claim a free db, empty it, and return its URL (the same one on later calls)."""
        if self.db is not None:
            return self.url
        require_redis(self._host, self._port)
        for db in REDIS_TEST_DBS:
            if self._locks.set(f"{REDIS_LOCK_PREFIX}{db}", RUN_ID, nx=True, ex=self._lock_seconds):
                self.db = db
                self.flush(self.url)  # a crashed run may have left keys behind
                return self.url
        raise RuntimeError(
            f"all Redis dbs {REDIS_TEST_DBS.start}-{REDIS_TEST_DBS.stop - 1} are claimed by other test runs "
            f"(keys {REDIS_LOCK_PREFIX}* in db 0)"
        )

    @staticmethod
    def flush(url: str) -> None:
        """``FLUSHDB`` the db that ``url`` names (never ``FLUSHALL``: other runs use other dbs)."""
        db = int(urlsplit(url).path.lstrip("/") or 0)
        if db not in REDIS_TEST_DBS:
            raise ValueError(f"refusing to flush {url}: test runs use dbs 1-15 (db 0 holds the locks)")
        client = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT)
        try:
            client.flushdb()
        finally:
            client.close()

    def refresh(self) -> None:
        """Extend this run's lock by ``lock_seconds`` (for runs longer than that)."""
        if self.db is not None:
            self._locks.expire(f"{REDIS_LOCK_PREFIX}{self.db}", self._lock_seconds)

    def release(self) -> None:
        """Delete the lock if it is still ours; the db is then free for other runs."""
        if self.db is not None:
            self._locks.eval(_RELEASE, 1, f"{REDIS_LOCK_PREFIX}{self.db}", RUN_ID)
            self.db = None

    def close(self) -> None:
        self.release()
        self._locks.close()


# --- Redis queues: a name of its own per test ------------------------------------------------------

_QUEUES = itertools.count(1)


def queue_name(prefix: str) -> str:
    """An rq queue name of this run's own and no other test's, e.g. ``"rqt_4711_a1b2c3_7"``: the
    run's Redis db is flushed before each test, but a process an earlier test left behind (or one
    still stopping) would otherwise consume this test's queue and drop the entries its own
    database does not know."""
    return f"{prefix}_{RUN_ID}_{next(_QUEUES)}"


# --- NATS JetStream: stream names carry the run id -------------------------------------------------


def nats_stream_prefix() -> str:
    """Prefix for this run's JetStream stream names, e.g. ``"T4711_A1B2C3"``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"T{RUN_ID.upper()}")


def nats_subject_prefix() -> str:
    """Prefix for this run's subjects (one token, no dots), e.g. ``"t4711_a1b2c3"``."""
    return nats_stream_prefix().lower()


def is_valid_stream_name(name: str) -> bool:
    return bool(_STREAM_NAME.match(name))


async def _delete_streams(url: str, wanted: Callable[[str, datetime | None], bool]) -> list[str]:
    nc = await nats.connect(url, connect_timeout=int(CONNECT_TIMEOUT), allow_reconnect=False)
    try:
        jsm = nc.jsm()
        names: list[str] = []
        offset = 0
        while page := await jsm.streams_info(offset):  # pages of up to 256 streams
            offset += len(page)
            names += [i.config.name for i in page if i.config.name and wanted(i.config.name, i.created)]
        for name in names:
            await jsm.delete_stream(name)
        return names
    finally:
        await nc.close()


def delete_nats_streams(prefix: str, url: str = NATS_URL) -> list[str]:
    """Delete the JetStream streams whose names start with ``prefix``; return their names."""
    if not prefix:
        raise ValueError("an empty prefix would delete every stream on the server")
    return asyncio.run(_delete_streams(url, lambda name, _created: name.startswith(prefix)))


def cleanup_stale_nats_streams(max_age_hours: float = 6, url: str = NATS_URL) -> list[str]:
    """Delete test streams (``T<pid>_<HEX>…``) created more than ``max_age_hours`` ago by crashed runs."""
    cutoff = datetime.now(UTC) - timedelta(hours=max_age_hours)

    def stale(name: str, created: datetime | None) -> bool:
        return bool(_TEST_STREAM.match(name)) and created is not None and created < cutoff

    return asyncio.run(_delete_streams(url, stale))
