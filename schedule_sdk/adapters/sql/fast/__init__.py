"""The SQL job store's hot-path driver code: driver-level code that bypasses SQLAlchemy for speed.

The claims (:mod:`.pg_claims` on PostgreSQL, :mod:`.sqlite_claims` on SQLite), the bulk inserts of
job rows and fire entries (:mod:`.bulk`) and the writes of every fire's outcome, history entry and
lease renewal (:mod:`.writes`) run as fixed SQL text on the driver's connection, skipping the Core's
per-execution work on the path every fire takes. Each path is tested equal to the plain SQLAlchemy
Core statement it replaces (``tests/integration/test_fast_paths.py``): the same rows returned, the
same rows left, on SQLite and on PostgreSQL. The readable store is the rest of :mod:`..sql`.
"""
