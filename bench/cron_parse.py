"""Cron parsing time against the expression's length (linear, and capped at MAX_CRON_LENGTH).

    python bench/cron_parse.py [--uncapped]

Parses ``",".join(["0-59/1"] * n) + " * * * *"`` for growing ``n`` with ``timing.parse_cron``
(the cache bypassed) and prints the time per parse and per KiB. ``--uncapped`` calls the parser
below the length cap, to show how the time grows past it.
"""

from __future__ import annotations

import sys
import time

from schedule_sdk.domain import timing
from schedule_sdk.domain.errors import InvalidCron


def expression(items: int) -> str:
    return ",".join(["0-59/1"] * items) + " * * * *"


def parse_seconds(text: str, uncapped: bool) -> float:
    parse = timing._parse_cron_text.__wrapped__ if uncapped else timing.parse_cron  # type: ignore[attr-defined]
    start = time.perf_counter()
    try:
        parse(text)
    except InvalidCron:
        pass
    return time.perf_counter() - start


def main() -> None:
    uncapped = "--uncapped" in sys.argv
    print(f"{'items':>7} {'KiB':>8} {'seconds':>10} {'ms/KiB':>8}")
    for items in (100, 1_000, 5_000, 20_000, 100_000):
        text = expression(items)
        seconds = min(parse_seconds(text, uncapped) for _ in range(3))
        kib = len(text) / 1024
        print(f"{items:>7} {kib:>8.1f} {seconds:>10.4f} {seconds * 1000 / kib:>8.3f}")


if __name__ == "__main__":
    main()
