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

from schedule_sdk.domain.backoff import Reconnect, retrying

logger = logging.getLogger(__name__)

OnChange = Callable[[datetime | None], None]


def listen_postgres(url: URL, channel: str, on_change: OnChange) -> Callable[[], None]:
    """LISTEN on ``channel``; each notification's payload is the new job's due time (ISO 8601)."""
    import psycopg

    stop = threading.Event()
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)

    backoff = Reconnect()

    def listen() -> float:
        """Connect and LISTEN; relay the notifications until stop."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'LISTEN "{channel}"')
            backoff.reset()  # connected: a later drop retries after the first delay again
            on_change(None)  # anything sent while we were away
            while not stop.is_set():
                for note in conn.notifies(timeout=0.5):
                    on_change(_parse(note.payload))
        return 0.0

    def run() -> None:
        retrying(
            listen,
            stop=stop,
            backoff=backoff,
            errors=(psycopg.Error,),
            what=f"LISTEN {channel}",
            logger=logger,
        )

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
