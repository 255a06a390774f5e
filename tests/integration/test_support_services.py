"""The per-run isolation helpers of ``tests/support/services.py``, on the real services.

A service that is down makes these tests fail (``RuntimeError``), never skip.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Iterator

import nats
import psycopg
import pytest
import redis
import sqlalchemy as sa
from nats.js.errors import NotFoundError

from tests.support import services


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _databases() -> set[str]:
    with psycopg.connect(services.PG_ADMIN_URL) as conn:
        return {name for (name,) in conn.execute("SELECT datname FROM pg_database").fetchall()}


def _rows(url: str) -> list[int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.scalars(sa.text("SELECT id FROM jobs ORDER BY id")))
    finally:
        engine.dispose()


@pytest.fixture
def locks() -> Iterator[redis.Redis]:
    client = redis.Redis(host=services.REDIS_HOST, port=services.REDIS_PORT, db=0, decode_responses=True)
    yield client
    client.close()


def test_run_id_is_short_and_unique_per_process() -> None:
    assert re.fullmatch(r"\d+_[0-9a-f]{6}", services.RUN_ID)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.nats
def test_require_passes_when_the_services_are_up() -> None:
    checks = (services.require_postgres, services.require_redis, services.require_nats)
    assert [check() for check in checks] == [None, None, None]  # each raises when its service is down


def test_require_raises_when_a_service_is_down() -> None:
    port = _closed_port()
    expected = f"is not reachable on 127.0.0.1:{port} — run scripts/ensure-services.sh"
    with pytest.raises(RuntimeError, match=f"^PostgreSQL {expected}"):
        services.require_postgres(f"postgresql://postgres@127.0.0.1:{port}/test")
    with pytest.raises(RuntimeError, match=f"^Redis {expected}"):
        services.require_redis(port=port)
    with pytest.raises(RuntimeError, match=f"^NATS {expected}"):
        services.require_nats(port=port)
    with pytest.raises(RuntimeError, match=rf"^PgBouncer \(transaction pooling\) {expected}"):
        services.require_pgbouncer(port=port)


@pytest.mark.postgres
def test_pgbouncer_pools_transactions_in_front_of_the_test_server() -> None:
    assert services.require_pgbouncer() is None  # raises when down or not in transaction pooling
    with services.PostgresDatabases() as dbs:
        url = services.through_pgbouncer(dbs.create("pgbouncer")).replace("+psycopg", "")
        assert ":6432/" in url
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:  # any test database
            assert conn.execute("SELECT current_database()").fetchone() == (url.rsplit("/", 1)[1],)
    with pytest.raises(ValueError, match="is not a database of the test server"):
        services.through_pgbouncer("postgresql://postgres@127.0.0.1:6543/x")


@pytest.mark.postgres
def test_postgres_create_connect_and_drop_even_with_open_connections() -> None:
    with services.PostgresDatabases() as dbs:
        url = dbs.create("Smoke test")
        name = url.rsplit("/", 1)[1]
        assert url == f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        assert re.fullmatch(rf"sdk_{services.RUN_STARTED}_{services.RUN_ID}_\d+_smoke_test", name)
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            assert conn.scalar(sa.text("SELECT current_database()")) == name
            conn.execute(sa.text("CREATE TABLE jobs (id int)"))
        assert isinstance(engine.pool, sa.QueuePool)
        assert engine.pool.checkedout() == 0
        held = engine.connect()  # drop_all must terminate it rather than fail
        assert name in _databases()
        dbs.drop_all()
        assert name not in _databases()
        held.invalidate()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_databases_are_copies_of_the_template() -> None:
    def setup(url: str) -> None:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE jobs (id int)"))
            conn.execute(sa.text("INSERT INTO jobs VALUES (1)"))
        engine.dispose()

    with services.PostgresDatabases() as dbs:
        template_url = dbs.create_template(setup)
        first, second = dbs.create("first"), dbs.create("second")
        engine = sa.create_engine(first)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO jobs VALUES (2)"))
        engine.dispose()
        assert _rows(first) == [1, 2]
        assert _rows(second) == [1]
        with pytest.raises(sa.exc.OperationalError, match="not currently accepting connections"):
            _rows(template_url)
        names = {url.rsplit("/", 1)[1] for url in (template_url, first, second)}
    assert not names & _databases()


@pytest.mark.postgres
def test_a_given_back_database_is_emptied_renamed_and_leased_again_or_dropped_if_its_schema_changed() -> None:
    def setup(url: str) -> None:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE jobs (id serial PRIMARY KEY, v int)"))
            conn.execute(sa.text("CREATE TABLE seed (v int)"))
            conn.execute(sa.text("INSERT INTO seed VALUES (7)"))
        engine.dispose()

    def ours() -> set[str]:  # this process's (other test processes lease and give back meanwhile)
        prefix = f"sdk_{services.RUN_STARTED}_{services.RUN_ID}_"
        return {name for name in _databases() if name.startswith(prefix)}

    before_the_test = ours()
    with services.PostgresDatabases() as dbs:
        dbs.create_template(setup)
        first = dbs.lease("first")
        engine = sa.create_engine(first)
        held = engine.connect()  # still open when the database is given back: ended
        held.execute(sa.text("INSERT INTO jobs (v) VALUES (1), (2)"))
        held.execute(sa.text("DELETE FROM seed"))
        held.commit()
        dbs.give_back(first)
        again = dbs.lease("again")
        assert again != first and first.rsplit("/", 1)[1] not in _databases()  # renamed
        with pytest.raises(sa.exc.OperationalError):
            held.execute(sa.text("SELECT 1"))
        held.invalidate()
        engine.dispose()
        engine = sa.create_engine(again)
        with engine.begin() as conn:
            assert conn.scalar(sa.text("SELECT count(*) FROM jobs")) == 0
            assert conn.scalars(sa.text("SELECT v FROM seed")).all() == [7]  # the template's rows
            assert conn.scalar(sa.text("INSERT INTO jobs (v) VALUES (3) RETURNING id")) == 1  # restarted
            conn.execute(sa.text("CREATE INDEX jobs_v ON jobs (v)"))  # the schema changes
        engine.dispose()
        leased = ours()
        dbs.give_back(again)
        assert ours() == leased - {again.rsplit("/", 1)[1]}  # dropped, not pooled
        third = dbs.lease("third")
        assert _rows(third) == []
    assert ours() <= before_the_test


@pytest.mark.postgres
def test_template_setup_that_leaves_a_connection_open_is_an_error() -> None:
    engines: list[sa.Engine] = []

    def leaky_setup(url: str) -> None:
        engines.append(sa.create_engine(url))
        with engines[0].connect() as conn:
            conn.execute(sa.text("SELECT 1"))  # back in the pool, still open: no dispose()

    with services.PostgresDatabases() as dbs:
        dbs.template_release_timeout = 0.3
        with pytest.raises(RuntimeError, match="1 connection.* still open .* dispose the engine"):
            dbs.create_template(leaky_setup)
        engines[0].dispose()


@pytest.mark.postgres
def test_cleanup_stale_drops_only_old_databases() -> None:
    old = f"sdk_{int(time.time()) - 7 * 3600}_{services.RUN_ID}_stale"
    with services.PostgresDatabases() as dbs:
        fresh = dbs.create("fresh").rsplit("/", 1)[1]
        with psycopg.connect(services.PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(old)))
        dropped = dbs.cleanup_stale(max_age_hours=6)
        assert old in dropped
        assert fresh not in dropped
        assert old not in _databases()
        assert fresh in _databases()


@pytest.mark.redis
def test_redis_dbs_are_exclusive_and_release_frees_the_lock(locks: redis.Redis) -> None:
    first, second = services.RedisDbs(), services.RedisDbs()
    try:
        first_url, second_url = first.allocate(), second.allocate()
        assert first.db is not None and second.db is not None
        assert first.db != second.db
        assert first_url != second_url
        assert first_url == f"redis://127.0.0.1:6379/{first.db}"
        assert first.allocate() == first_url  # idempotent
        key = f"{services.REDIS_LOCK_PREFIX}{first.db}"
        assert locks.get(key) == services.RUN_ID
        assert 0 < locks.ttl(key) <= 3600
        first.release()
        assert locks.get(key) is None
        assert first.db is None
    finally:
        first.close()
        second.close()


@pytest.mark.redis
def test_release_leaves_a_lock_that_another_run_took_over(locks: redis.Redis) -> None:
    dbs = services.RedisDbs()
    try:
        dbs.allocate()
        key = f"{services.REDIS_LOCK_PREFIX}{dbs.db}"
        locks.set(key, "someone-else", ex=60)  # our lock expired and another run claimed the db
        dbs.release()
        assert locks.get(key) == "someone-else"
        locks.delete(key)
    finally:
        dbs.close()


@pytest.mark.redis
def test_redis_flush_empties_only_that_db() -> None:
    first, second = services.RedisDbs(), services.RedisDbs()
    try:
        clients = [redis.Redis.from_url(first.allocate()), redis.Redis.from_url(second.allocate())]
        for client in clients:
            client.set("k", "v")
        services.RedisDbs.flush(first.url)
        assert clients[0].get("k") is None
        assert clients[1].get("k") == b"v"
        for client in clients:
            client.close()
        with pytest.raises(ValueError, match="db 0 holds the locks"):
            services.RedisDbs.flush("redis://127.0.0.1:6379/0")
    finally:
        first.close()
        second.close()


def test_nats_prefixes_are_valid_names() -> None:
    prefix = services.nats_stream_prefix()
    assert services.is_valid_stream_name(prefix)
    assert services.is_valid_stream_name(f"{prefix}_JOBS")
    assert prefix.startswith("T")
    assert services.nats_subject_prefix() == prefix.lower()
    assert "." not in services.nats_subject_prefix()
    with pytest.raises(ValueError, match="empty prefix"):
        services.delete_nats_streams("")


async def _add_stream_and_publish(name: str, subject: str) -> None:
    nc = await nats.connect(services.NATS_URL, allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name=name, subjects=[f"{subject}.>"])
        ack = await js.publish(f"{subject}.fired", b"{}")
        assert ack.stream == name
    finally:
        await nc.close()


async def _stream_exists(name: str) -> bool:
    nc = await nats.connect(services.NATS_URL, allow_reconnect=False)
    try:
        await nc.jsm().stream_info(name)
        return True
    except NotFoundError:
        return False
    finally:
        await nc.close()


@pytest.mark.nats
def test_nats_streams_with_the_run_prefix_are_created_and_deleted() -> None:
    services.require_nats()
    # A prefix of its own under the run's: deleting the run's whole prefix here would take
    # the streams of the timer tests running beside this one in the same run.
    prefix = f"{services.nats_stream_prefix()}_SMOKE"
    name = f"{prefix}_1"
    asyncio.run(_add_stream_and_publish(name, f"{services.nats_subject_prefix()}.smoke"))
    assert asyncio.run(_stream_exists(name))
    assert services.delete_nats_streams(prefix) == [name]
    assert not asyncio.run(_stream_exists(name))
