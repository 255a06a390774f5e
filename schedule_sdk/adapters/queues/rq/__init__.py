"""The distributed ``rq`` substrate: Redis holds timing (an exact delay index and a due-time pump
owned by the SDK), RQ executes fires (an in-process worker thread, ``schedule-sdk worker``
processes, or stock ``rq worker --serializer rq.serializers.JSONSerializer`` processes). SQL stays
the source of truth. See docs/explanation/rq-substrate.md."""

from __future__ import annotations

from .pump import DuePump
from .queue import RQExecutionQueue
from .runner import RQRunner

__all__ = ["DuePump", "RQExecutionQueue", "RQRunner"]
