"""The fire history contract (schedule_sdk/testing/contracts/job_store.py: FireHistoryContract)
on every store of the SDK."""

from __future__ import annotations

from schedule_sdk.testing.contracts.job_store import FireHistoryContract

from .backends import OnEveryStore


class TestFireHistory(OnEveryStore, FireHistoryContract):
    pass
