"""Concurrency keys: which due jobs may start, given how many of each key run (one home of the rule).

A job with a :class:`~schedule_sdk.domain.jobs.ConcurrencyLimit` starts only while fewer than
its own ``limit`` fires of its key run. Among the due jobs of one key, taken in due order, the
job in place ``p`` (1-based) may start when ``running + p <= limit``: every earlier job of the
key counts as started, whether it was or not, so a claim never exceeds any job's limit whatever
limits the jobs of one key name (it may start fewer than it could when they disagree). The SQL
store's claims compute the same rule in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from schedule_sdk.domain.jobs import ScheduledJob


def admitted(due: Iterable[ScheduledJob], running: Mapping[str, int]) -> list[ScheduledJob]:
    """Those of ``due`` (pending jobs in due order) that may start, in the same order, given the
    ``running`` fires per key (a key not in it has none): every job without a key, and each keyed
    one whose place among the due jobs of its key, added to the key's running fires, is at most
    its limit."""
    places: dict[str, int] = {}
    chosen: list[ScheduledJob] = []
    for job in due:
        limit = job.concurrency
        if limit is None:
            chosen.append(job)
            continue
        place = places[limit.key] = places.get(limit.key, 0) + 1
        if running.get(limit.key, 0) + place <= limit.limit:
            chosen.append(job)
    return chosen


def running_per_key(jobs: Iterable[ScheduledJob]) -> dict[str, int]:
    """How many of ``jobs`` (active rows) run with each key."""
    running: dict[str, int] = {}
    for job in jobs:
        if job.concurrency is not None:
            running[job.concurrency.key] = running.get(job.concurrency.key, 0) + 1
    return running
