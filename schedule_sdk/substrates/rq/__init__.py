"""The distributed ``rq`` substrate: its Redis binding (:class:`RQExecutionQueue`, the
:class:`~schedule_sdk.ports.ExecutionQueue` and :class:`~schedule_sdk.ports.DelayIndex` ports;
``handoff``, ``async_handoff``, ``plumbing``) and the loops that drive it through the
``DelayIndex`` port (``pump``, ``consumer``, ``fire``, ``runner``); see
docs/explanation/rq-substrate.md."""

from __future__ import annotations

from schedule_sdk.substrates.rq.queue import RQExecutionQueue

__all__ = ["RQExecutionQueue"]
