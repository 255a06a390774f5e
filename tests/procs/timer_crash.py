"""``python -m schedule_sdk.timer`` that exits abruptly (status 137, like SIGKILL) right after its
first DueTimeReached publish was accepted, before the timer is marked Reached.

The crash point is placed from here, by wrapping the JetStream bus's ``publish``: the library
knows nothing of it.
"""

from __future__ import annotations

import logging
import os
import sys

from schedule_sdk.adapters.brokers.nats import JetStreamBus
from schedule_sdk.entrypoints import timer_service

_publish = JetStreamBus.publish


def _publish_then_die(self: JetStreamBus, envelope: object) -> None:
    _publish(self, envelope)  # type: ignore[arg-type]
    logging.getLogger(__name__).error("exiting after publishing %s, before marking it Reached", envelope)
    logging.shutdown()
    os._exit(137)


if __name__ == "__main__":
    JetStreamBus.publish = _publish_then_die  # type: ignore[method-assign]
    sys.exit(timer_service.main())
