"""The ports: what the core needs from the outside world, each with its contract, by family.

- :mod:`~schedule_sdk.ports.clock`: where time comes from;
- :mod:`~schedule_sdk.ports.store`: the job store, its transactions and occurrences;
- :mod:`~schedule_sdk.ports.capabilities`: what a store may add (listed in :data:`CAPABILITIES`);
- :mod:`~schedule_sdk.ports.queue`: the execution queue and the delay index;
- :mod:`~schedule_sdk.ports.fire`: listeners, publishing, the runner and dispatcher;
- :mod:`~schedule_sdk.ports.observe`: metrics and tracing;
- :mod:`~schedule_sdk.ports.timer`: the Timer's store and bus.

Every name is importable from here. The suites of :mod:`schedule_sdk.testing.contracts` check
these contracts against every adapter (and against yours). All times are aware UTC datetimes.
All methods are thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schedule_sdk.domain.moved import moved
from schedule_sdk.ports.capabilities import (
    CAPABILITIES,
    DeclaredRows,
    DueScan,
    FireHistory,
    JoinableStore,
    OperatorReads,
    Retention,
    WorkerInfo,
    WorkerRegistry,
    provided,
    require,
)
from schedule_sdk.ports.clock import ClaimClock, Clock
from schedule_sdk.ports.fire import Dispatcher, EventPublisher, FirePath, FireResult, Listeners, Runner
from schedule_sdk.ports.observe import FireSpan, Metrics, Tracing
from schedule_sdk.ports.queue import (
    CommitSignal,
    DelayIndex,
    ExecutionQueue,
    HealNote,
    ReleasedBatch,
    WakeUps,
)
from schedule_sdk.ports.store import (
    DueClaim,
    Guard,
    JobStore,
    JobTransaction,
    JoinedTransaction,
    KeyLoad,
    Occurrence,
    OccurrenceRef,
    OpenOccurrence,
    TopicBacklog,
    key_of,
)
from schedule_sdk.ports.timer import CommandSink, CommandSource, MessageBus, TimerStore

__all__ = [
    "CAPABILITIES",
    "ClaimClock",
    "Clock",
    "CommandSink",
    "CommandSource",
    "CommitSignal",
    "DeclaredRows",
    "DelayIndex",
    "DueScan",
    "Dispatcher",
    "DueClaim",
    "EventPublisher",
    "ExecutionQueue",
    "FireHistory",
    "FirePath",
    "FireResult",
    "FireSpan",
    "HealNote",
    "Guard",
    "JobStore",
    "JobTransaction",
    "JoinableStore",
    "JoinedTransaction",
    "KeyLoad",
    "Listeners",
    "MessageBus",
    "Metrics",
    "Occurrence",
    "OccurrenceRef",
    "OpenOccurrence",
    "OperatorReads",
    "ReleasedBatch",
    "Retention",
    "Runner",
    "TimerStore",
    "TopicBacklog",
    "Tracing",
    "WakeUps",
    "WorkerInfo",
    "WorkerRegistry",
    "key_of",
    "provided",
    "require",
]

if not TYPE_CHECKING:  # a type checker should flag a name the ports do not have
    #: Deprecated here: the claim timing helpers moved to :mod:`schedule_sdk.core.claim_timing`.
    __getattr__ = moved(
        __name__,
        "schedule_sdk.core.claim_timing",
        names=frozenset({"CLAIM_AHEAD", "claim_horizon", "claim_lead", "claim_time"}),
    )
