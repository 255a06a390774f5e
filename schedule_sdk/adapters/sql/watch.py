"""Wake-ups from other processes: PostgreSQL ``LISTEN``, SQLite ``PRAGMA data_version``.

Both run one daemon thread and are best effort: on errors they back off and retry, and the
poller's bounded safety-net interval covers anything they miss.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import select
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from schedule_sdk.domain.backoff import Reconnect, retrying
from schedule_sdk.domain.errors import ListenNotDelivered

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

OnChange = Callable[[datetime | None], None]

#: How long :func:`check_listen` waits for its notification (a direct connection delivers it in
#: about a millisecond).
LISTEN_CHECK_SECONDS = 5.0


def check_listen(url: URL, timeout: float = LISTEN_CHECK_SECONDS) -> None:
    """Check that ``LISTEN`` works on ``url``: one connection listens on a channel of its own,
    another sends it a notification, which must arrive within ``timeout`` seconds. Behind a
    transaction pooler (PgBouncer with ``pool_mode=transaction``) the listening server session
    is handed back to the pool as soon as ``LISTEN`` commits, so the notification never reaches
    the client. A database that cannot be reached is not judged here (the watcher retries).

    :raises ListenNotDelivered: the notification did not arrive.
    """
    import psycopg

    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    channel = f"schedule_sdk_listen_check_{secrets.token_hex(6)}"
    try:
        # A server that does not answer is not waited for longer than the check itself.
        wait = max(1, round(timeout))
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None, connect_timeout=wait) as listener:
            listener.execute(f'LISTEN "{channel}"')
            sender = psycopg.connect(dsn, autocommit=True, prepare_threshold=None, connect_timeout=wait)
            with sender:
                sender.execute("SELECT pg_notify(%s, 'check')", (channel,))
            delivered = any(True for _ in listener.notifies(timeout=timeout, stop_after=1))
    except psycopg.Error as error:
        logger.warning("could not check LISTEN on %s: %s", url.render_as_string(hide_password=True), error)
        return
    if not delivered:
        raise ListenNotDelivered(
            f"a notification sent to {url.render_as_string(hide_password=True)} was not delivered "
            f"within {timeout:g}s: LISTEN goes through a transaction pooler (such as PgBouncer with "
            "pool_mode=transaction). Set database_pooler=transaction (SCHEDULE_DATABASE_POOLER; the "
            "timer's TIMER_DATABASE_POOLER) and database_listen_url (SCHEDULE_DATABASE_LISTEN_URL; "
            "TIMER_DATABASE_LISTEN_URL) to a direct connection to PostgreSQL, or leave "
            "database_listen_url unset to wake up by polling"
        )


#: Seconds the LISTEN thread sleeps at most without a notification (or its stop) waking it.
LISTEN_BACKSTOP = 30.0

#: The payload of the notification sent when a concurrency slot frees (migration 0023).
SLOT_PAYLOAD = "slot"


def listen_postgres(
    url: URL, channel: str, on_change: OnChange, on_slot: Callable[[], None] | None = None
) -> Callable[[], None]:
    """LISTEN on ``channel``; a notification's payload is a job's due time (ISO 8601), or
    :data:`SLOT_PAYLOAD` for a freed slot (``on_slot``, else ``on_change(None)``)."""
    import psycopg

    stop = threading.Event()
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    # The thread sleeps in select() on the connection's socket and on this pipe, which the
    # cancel writes to: it wakes for a notification or to stop, not on a timer (psycopg's own
    # wait looks every tenth of a second).
    wake_read, wake_write = os.pipe()

    backoff = Reconnect()

    def relay(conn: psycopg.Connection[Any]) -> None:
        """Hand on the notifications already received (timeout 0: it waits for none)."""
        for note in conn.notifies(timeout=0):
            if note.payload == SLOT_PAYLOAD and on_slot is not None:
                on_slot()
            else:
                on_change(_parse(note.payload))

    def listen() -> float:
        """Connect and LISTEN; relay the notifications until stop."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'LISTEN "{channel}"')
            backoff.reset()  # connected: a later drop retries after the first delay again
            on_change(None)  # anything sent while we were away
            while not stop.is_set():
                relay(conn)  # first those that came with LISTEN's answer
                ready, _, _ = select.select([conn.fileno(), wake_read], [], [], LISTEN_BACKSTOP)
                if wake_read in ready:
                    break
        return 0.0

    def run() -> None:
        retrying(
            listen,
            stop=stop,
            backoff=backoff,
            errors=(psycopg.Error, OSError),
            what=f"LISTEN {channel}",
            logger=logger,
        )

    thread = threading.Thread(target=run, name="schedule-sdk-pg-listen", daemon=True)
    thread.start()

    def cancel_listen() -> None:
        if stop.is_set():  # cancelled before: its descriptors may be closed (and their numbers reused)
            return
        stop.set()
        with contextlib.suppress(OSError):
            os.write(wake_write, b"\0")
        thread.join(timeout=2)
        if not thread.is_alive():  # else it may still select on them (a connect that hangs)
            for fd in (wake_read, wake_write):
                with contextlib.suppress(OSError):
                    os.close(fd)

    return cancel_listen


def poll_sqlite_data_version(
    url: URL, on_change: OnChange, interval: float = 0.05, others: Callable[[], int | None] | None = None
) -> Callable[[], None]:
    """Watch SQLite's ``data_version``, which changes whenever another connection commits.

    ``others``: ``data_version`` as this process's writer connection reads it (None when it cannot
    say): a change the watcher sees that this one does not is that writer's own commit, which
    wakes nobody (this process's writes wake its poller directly).

    The thread reads ``data_version`` only when the database file or its ``-wal`` log changed (a
    commit writes to one of them). On Linux it sleeps until the kernel reports a write to either
    (``inotify``), and looks at most every ``interval`` seconds while writes go on; a ``stat`` of
    both files every second backs it up. Elsewhere, or where ``inotify`` cannot be had, it looks
    every ``interval`` seconds: a ``stat``, and the query only when the files changed or their
    last change is too recent for their timestamps to tell a later write apart (:func:`_settled`).
    """
    stop = threading.Event()
    path = url.database or ""
    files_of = os.path.realpath(path) if path else path  # SQLite keeps the log beside the target
    writes = _Writes.open(files_of) if files_of else None
    wait = stop.wait if writes is None else writes.wait

    def run() -> None:
        last = None
        seen: tuple[int, ...] | None = None
        settled = False  # the last version read covers every write the files do not show
        last_other: int | None = None
        conn = None
        try:
            while not wait(interval):
                now = time.time_ns()  # before the stat: a write after it is stamped later than this
                files = _files(files_of)
                written = writes is not None and writes.written  # a write the files may not show
                if files == seen and settled and not written:
                    continue
                try:
                    if conn is None:
                        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                except sqlite3.Error:
                    conn = None
                    seen = None
                    continue
                seen, settled = files, _settled(files, now)
                if last is not None and version != last:
                    other = others() if others is not None else None
                    if other is None or other != last_other:
                        on_change(None)
                    last_other = other
                last = version
        finally:
            if conn is not None:
                conn.close()

    cancel = _start(run, stop, "schedule-sdk-sqlite-watch")
    if writes is None:
        return cancel

    def cancel_writes() -> None:
        stop.set()
        writes.wake()
        cancel()
        writes.close()

    return cancel_writes


class _Writes:
    """Linux ``inotify`` on a database's folder, for writes to the database or its ``-wal`` log."""

    #: IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
    MASK = 0x2 | 0x8 | 0x80 | 0x100 | 0x200
    #: Seconds it sleeps at most: then the files are looked at anyway.
    BACKSTOP = 1.0

    def __init__(self, fd: int, names: set[bytes]) -> None:
        self._fd = fd
        self._names = names
        self._stop_read, self._stop_write = os.pipe()
        self._fds: tuple[int, ...] = (fd, self._stop_read, self._stop_write)
        self._stopped = False
        self._last = 0.0  # monotonic: the last time wait returned
        #: Whether the last wait returned for a write (else at the back-stop).
        self.written = False

    @classmethod
    def open(cls, path: str) -> _Writes | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return None
            folder, name = os.path.split(path)
            if libc.inotify_add_watch(fd, os.fsencode(folder or "."), cls.MASK) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):  # no inotify here: the thread polls
            return None
        base = os.fsencode(name)
        return cls(fd, {base, base + b"-wal", base + b"-journal"})

    def wait(self, interval: float) -> bool:
        """Return once the files were written to (False), at least ``interval`` seconds after the
        last return, or at the back-stop; True once :meth:`wake` stopped it."""
        left = self._last + interval - time.monotonic()
        if left > 0 and self._sleep(left):
            return True
        deadline = time.monotonic() + self.BACKSTOP
        self.written = False
        while not self.written and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._fd, self._stop_read], [], [], left)
            if self._stopped or self._stop_read in ready:
                return True
            self.written = bool(ready) and self._written()
        self._last = time.monotonic()
        return self._stopped

    def _sleep(self, seconds: float) -> bool:
        ready, _, _ = select.select([self._stop_read], [], [], seconds)
        return bool(ready) or self._stopped

    def _written(self) -> bool:
        """Read the queued events; whether one is about the database's files."""
        found = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return found
            offset = 0
            while offset + 16 <= len(data):
                size = int.from_bytes(data[offset + 12 : offset + 16], sys.byteorder)
                name = data[offset + 16 : offset + 16 + size].rstrip(b"\0")
                found = found or name in self._names or not name
                offset += 16 + size

    def wake(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._stop_write, b"\0")

    def close(self) -> None:
        """Close the descriptors (after the thread ended: :meth:`wake` first)."""
        fds, self._fds = self._fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _files(path: str) -> tuple[int, ...]:
    """The database file's and its ``-wal`` log's inode, size and modification time (ns); zeros
    for a file that is not there."""
    found: list[int] = []
    for name in (path, path + "-wal"):
        try:
            st = os.stat(name)
        except OSError:
            found += (0, 0, 0)
        else:
            found += (st.st_ino, st.st_size, st.st_mtime_ns)
    return tuple(found)


#: How far apart two writes to a file must be for their modification times to differ, at most (the
#: kernel stamps files by a clock that ticks every few milliseconds; a file system that keeps whole
#: seconds only is recognised by its stamps).
STAMP_TICK_NS = 50_000_000


def _settled(files: tuple[int, ...], now: int) -> bool:
    """Whether any write after ``now`` (ns) will change what :func:`_files` read: the files' last
    modification is older than a tick of their timestamps (a write in the same tick that kept a
    file's size, as after the log's restart from its start, would read the same)."""
    stamps = [files[i] for i in (2, 5) if files[i]]
    whole = all(stamp % 1_000_000_000 == 0 for stamp in stamps)
    tick = 2_000_000_000 if whole else STAMP_TICK_NS
    return all(now - stamp > tick for stamp in stamps)


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
