"""Topics: the name a job's events are published under (``schedule.<topic>.arrived``).

Its own module because jobs, declared schedules, events and the time-limit defaults all check
topics, and the time limits are checked by jobs in turn.
"""

from __future__ import annotations

import re

from schedule_sdk.domain.errors import InvalidTopic
from schedule_sdk.domain.text import shown

_TOPIC = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")
MAX_TOPIC_LENGTH = 200


def validate_topic(topic: object) -> str:
    """Return ``topic`` if it is safe to embed in ``schedule.<topic>.arrived``."""
    if not isinstance(topic, str) or len(topic) > MAX_TOPIC_LENGTH or not _TOPIC.fullmatch(topic):
        raise InvalidTopic(f"invalid topic {shown(topic)}: {InvalidTopic.__doc__}")
    return topic
