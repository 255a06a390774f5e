"""The Celery app of bench/celery_peer.py's worker process (``celery -A celery_app worker``).

Configured from the environment: ``CELERY_PEER_BROKER`` (a Redis URL), ``CELERY_PEER_EVENTS``
(the file each task appends ``index due started pid`` to, epoch seconds, one ``write`` per task,
O_APPEND)
and ``CELERY_PEER_READY`` (a file created when the worker is ready to consume).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_ready

#: Longer than any ETA of the run: a task whose ETA lies beyond the visibility timeout is
#: redelivered by the Redis transport while the first worker still holds it (a double start).
VISIBILITY_TIMEOUT = 3600

app = Celery("celery_peer", broker=os.environ.get("CELERY_PEER_BROKER", "redis://127.0.0.1:6379/1"))
app.conf.update(
    broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT},
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    enable_utc=True,
)

_events = os.environ.get("CELERY_PEER_EVENTS")
_fd = os.open(_events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if _events else -1


@app.task(name="celery_peer.fire")
def fire(index: int, due: float) -> None:
    """Record when this task started against its ETA (``due``, epoch seconds)."""
    started = time.time()
    os.write(_fd, f"{index} {due} {started} {os.getpid()}\n".encode())


@worker_ready.connect
def _ready(**_: Any) -> None:
    ready = os.environ.get("CELERY_PEER_READY")
    if ready:
        Path(ready).touch()
