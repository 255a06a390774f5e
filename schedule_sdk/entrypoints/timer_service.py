"""The ``timer-service`` process (the timer's single deployment, docs/explanation/timer.md):
command intake and firing in one process. Run it with ``schedule-sdk timer`` or
``python -m schedule_sdk.timer``.

Settings come from the ``TIMER_*`` environment variables (see
:class:`~schedule_sdk.bootstrap.timer_settings.TimerSettings`); the options below override them. SIGTERM or
SIGINT stops it cleanly: intake stops, in-flight fires finish, exit status 0.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
from typing import TYPE_CHECKING

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.text import masked_url
from schedule_sdk.entrypoints.stopping import StopSignals

if TYPE_CHECKING:
    from schedule_sdk.bootstrap.timer import Timer
    from schedule_sdk.bootstrap.timer_settings import TimerSettings
    from schedule_sdk.ports import Metrics

logger = logging.getLogger(__name__)


#: What ``--help`` says: plain text (the module docstring is reStructuredText for the API docs).
DESCRIPTION = (
    "Run the timer service: ScheduleTimer commands in, DueTimeReached out, intake and firing in "
    "one process. Settings come from the TIMER_* environment variables; the options below "
    "override them. SIGTERM or SIGINT stops it cleanly (exit status 0)."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="schedule-sdk timer", description=DESCRIPTION)
    parser.add_argument("--db-path", help="SQLite file or SQLAlchemy URL (TIMER_DB_PATH)")
    parser.add_argument("--broker-url", help="nats://host:port, or 'inprocess' (TIMER_BROKER_URL)")
    parser.add_argument(
        "--database-pooler",
        choices=("none", "transaction"),
        help="'transaction' behind a transaction pooler such as PgBouncer (TIMER_DATABASE_POOLER)",
    )
    parser.add_argument(
        "--database-listen-url",
        help="a direct PostgreSQL URL for LISTEN wake-ups behind the pooler (TIMER_DATABASE_LISTEN_URL)",
    )
    parser.add_argument(
        "--metrics-port", type=int, help="serve Prometheus /metrics here (TIMER_METRICS_PORT)"
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("TIMER_LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR (TIMER_LOG_LEVEL; default INFO)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Imported once the options are read: ``--help`` loads neither the store nor the container.
    from schedule_sdk.bootstrap.timer import Timer
    from schedule_sdk.bootstrap.timer_settings import TimerSettings

    # One set-up for both ways in: ``schedule-sdk timer`` has configured logging already (its
    # handler, its --log-format), where basicConfig alone would keep its WARNING level.
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(args.log_level.upper())
    try:
        settings = TimerSettings.load(
            {
                "db_path": args.db_path,
                "broker_url": args.broker_url,
                "database_pooler": args.database_pooler,
                "database_listen_url": args.database_listen_url,
                "metrics_port": args.metrics_port,
            }
        )
        timer = Timer(settings, metrics=_metrics(settings))
    except ScheduleError as error:
        logger.error("cannot start the timer service: %s", error)
        return 2
    with StopSignals() as stop:
        return _serve(timer, settings, stop)


def _serve(timer: Timer, settings: TimerSettings, stop: StopSignals) -> int:
    """Run ``timer`` until ``stop``; 1 when it cannot start."""
    try:
        timer.start()
    except ScheduleError as error:
        logger.error("cannot start the timer service: %s", error)
        timer.close()
        return 1
    # Everything loaded so far lives as long as the process: keep it out of the collector's
    # full passes, whose pauses over SQLAlchemy's object graph showed in the tail of fire lateness.
    gc.freeze()
    try:
        logger.info("timer service ready (db %s)", masked_url(settings.database_url))
        stop.wait()
        logger.info("stopping the timer service")
    finally:
        timer.close()
    return 0


def _metrics(settings: TimerSettings) -> Metrics:
    from schedule_sdk.adapters.metrics import InMemoryMetrics, PrometheusMetrics

    if not settings.metrics_port:
        return InMemoryMetrics()
    metrics = PrometheusMetrics()
    metrics.serve(settings.metrics_port)
    return metrics
