"""How precisely a worker knows the store's clock, and what a measurement costs.

    python bench/clock_offset.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [-n 500]

Builds the container's ``StoreTime`` on the PostgreSQL store and measures its offset from the
database's clock ``-n`` times, as a worker's heartbeat does (one ``SELECT clock_timestamp()``
between two reads of the local clock). Prints the median and p99 of the offset, of its error bound
(half the round trip: how much later than due a claim may be) and of the time one measurement
takes. Run it under ``LD_PRELOAD=.../libfaketimeMT.so.1 FAKETIME=+2s FAKETIME_DONT_FAKE_MONOTONIC=1``
to see a shifted clock's offset measured (about -2 s).
"""

from __future__ import annotations

import argparse
import statistics
import time

from _stats import percentile

from schedule_sdk import ScheduleContainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("-n", type=int, default=500)
    args = parser.parse_args()
    container = ScheduleContainer()
    container.config.from_dict({"database_url": args.url})
    store_time = container.store_time()
    store_time.measure()  # a warm pool, as in a running worker
    offsets, errors, costs = [], [], []
    for _ in range(args.n):
        start = time.perf_counter()
        reading = store_time.measure()
        costs.append(time.perf_counter() - start)
        offsets.append(reading.offset)
        errors.append(reading.error)
    container.shutdown_resources()
    print(f"{args.n} measurements against {args.url.split('@')[-1]}")
    print(f"{'':>12} {'median':>12} {'p99':>12}")
    for name, values in (("offset ms", offsets), ("error ms", errors), ("cost ms", costs)):
        ms = [v * 1000 for v in values]
        print(f"{name:>12} {statistics.median(ms):>12.4f} {percentile(ms, 99):>12.4f}")


if __name__ == "__main__":
    main()
