"""Fires observed by the database's clock: worker processes started with ``SDK_TEST_OBSERVE=1``
(tests/procs/worker.py) insert each fire into ``observed_fires``, stamped by PostgreSQL's
``clock_timestamp()``: an observer whose clock is not the workers'."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import psycopg

OBSERVED = """
CREATE TABLE IF NOT EXISTS observed_fires (
    job_id text NOT NULL,
    occurrence integer NOT NULL,
    attempt integer NOT NULL,
    worker text NOT NULL,
    host text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""


class Fire(NamedTuple):
    job_id: str
    occurrence: int
    attempt: int
    worker: str
    host: str
    at: datetime


def conninfo(database_url: str) -> str:
    return database_url.replace("+psycopg", "")


def create_observed(database_url: str) -> None:
    with psycopg.connect(conninfo(database_url), autocommit=True) as conn:
        conn.execute(OBSERVED)


def observed(database_url: str) -> list[Fire]:
    """Every observed fire."""
    with psycopg.connect(conninfo(database_url), autocommit=True) as conn:
        query = "SELECT job_id, occurrence, attempt, worker, host, at FROM observed_fires"
        return [Fire(*row) for row in conn.execute(query).fetchall()]


def observed_count(database_url: str) -> int:
    with psycopg.connect(conninfo(database_url), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM observed_fires").fetchone()
    return 0 if row is None else int(row[0])
