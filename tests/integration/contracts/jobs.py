"""Rows for the store tests: the shipped helpers of the contract suites."""

from __future__ import annotations

from schedule_sdk.testing.contracts.rows import NOW, at, ids, insert, job

__all__ = ["NOW", "at", "ids", "insert", "job"]
