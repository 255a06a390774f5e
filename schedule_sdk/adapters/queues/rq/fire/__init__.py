"""The RQ job function's former import path, kept so that RQ entries enqueued under this name
(``schedule_sdk.adapters.queues.rq.fire.fire``) still run after an upgrade."""

from __future__ import annotations

from .....entrypoints.rq_job import fire

__all__ = ["fire"]
