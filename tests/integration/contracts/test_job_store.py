"""The JobStore contract (schedule_sdk/testing/contracts/job_store.py) on every store of the SDK."""

from __future__ import annotations

from schedule_sdk.testing.contracts.concurrency import ConcurrencyContract
from schedule_sdk.testing.contracts.job_store import (
    JobStoreContract,
    JobStoreRetentionContract,
    WorkerRegistryContract,
)

from .backends import OnEveryStore


class TestJobStore(OnEveryStore, JobStoreContract):
    pass


class TestJobStoreRetention(OnEveryStore, JobStoreRetentionContract):
    pass


class TestWorkerRegistry(OnEveryStore, WorkerRegistryContract):
    pass


class TestJobStoreConcurrency(OnEveryStore, ConcurrencyContract):
    pass
