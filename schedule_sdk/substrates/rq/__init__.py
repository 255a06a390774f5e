"""The distributed ``rq`` substrate's Redis binding: the delay index and release path
(:class:`RQExecutionQueue`). The loops that drive it (the due-time pump, the consumer thread, the
fire runtimes) are in :mod:`schedule_sdk.runtimes.rq`; see docs/explanation/rq-substrate.md."""

from __future__ import annotations

from schedule_sdk.substrates.rq.queue import RQExecutionQueue

__all__ = ["RQExecutionQueue"]
