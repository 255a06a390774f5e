"""The contract suite of every port, for adapter authors (they need pytest, nothing else).

Each module holds plain test classes: subclass one in your test module (under a name starting with
``Test``), implement its ``open_*`` hook, and pytest runs the whole suite against your adapter.

- :mod:`.job_store`: ``JobStoreContract``, and the suites of the store's capabilities (each in a
  module of its own, all importable from :mod:`.job_store`): ``WorkerRegistryContract``
  (:mod:`.worker_registry`), ``FireHistoryContract`` (:mod:`.fire_history`),
  ``JobStoreRetentionContract`` (:mod:`.retention`); :mod:`.store` holds their shared base,
  ``StoreContract``
- :mod:`.joined`: ``JoinedTransactionContract`` (the ``JoinableStore`` capability)
- :mod:`.execution_queue`: ``ExecutionQueueContract``
- :mod:`.delay_index`: ``DelayIndexContract`` (a substrate that releases due entries itself)
- :mod:`.event_publisher`: ``EventPublisherContract``
- :mod:`.timer_store`: ``TimerStoreContract``
- :mod:`.declared_rows`: ``DeclaredRowsContract`` (where the schedules declared in code are kept)
- :mod:`.brokers`: ``MessageBusContract``, ``CommandSourceContract``

docs/howto/custom-adapter.md shows one in use.
"""

from __future__ import annotations
