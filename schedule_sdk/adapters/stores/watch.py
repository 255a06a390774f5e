"""Wake-ups from other processes: PostgreSQL ``LISTEN``, SQLite ``PRAGMA data_version``.

Both run one daemon thread and are best effort: on errors they back off and retry, and the
poller's bounded safety-net interval covers anything they miss.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.engine import URL

from schedule_sdk.domain.backoff import Reconnect

logger = logging.getLogger(__name__)

OnChange = Callable[[datetime | None], None]


def listen_postgres(url: URL, channel: str, on_change: OnChange) -> Callable[[], None]:
    """LISTEN on ``channel``; each notification's payload is the new job's due time (ISO 8601)."""
    import psycopg

    stop = threading.Event()
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)

    def run() -> None:
        backoff = Reconnect()
        while not stop.is_set():
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f'LISTEN "{channel}"')
                    backoff.reset()
                    on_change(None)  # anything sent while we were away
                    while not stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            on_change(_parse(note.payload))
            except psycopg.Error as error:
                delay = backoff.next()
                logger.warning("LISTEN %s failed (%s); retrying in %.2fs", channel, error, delay)
                stop.wait(delay)

    return _start(run, stop, "schedule-sdk-pg-listen")


def poll_sqlite_data_version(url: URL, on_change: OnChange, interval: float = 0.05) -> Callable[[], None]:
    """Watch SQLite's ``data_version``, which changes whenever another connection commits."""
    stop = threading.Event()
    path = url.database or ""

    def run() -> None:
        last = None
        conn = None
        while not stop.wait(interval):
            try:
                if conn is None:
                    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                version = conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error:
                conn = None
                continue
            if last is not None and version != last:
                on_change(None)
            last = version
        if conn is not None:
            conn.close()

    return _start(run, stop, "schedule-sdk-sqlite-watch")


def _parse(payload: str) -> datetime | None:
    try:
        return datetime.fromisoformat(payload)
    except ValueError:
        return None


def _start(run: Callable[[], None], stop: threading.Event, name: str) -> Callable[[], None]:
    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()

    def cancel() -> None:
        stop.set()
        thread.join(timeout=2)

    return cancel
