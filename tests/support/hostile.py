"""Hypothesis strategies of hostile input: text with NULs, lone surrogates and oversized runs,
datetimes at the edges of the calendar in extreme offsets, payloads nested and odd, cron strings
long and malformed, timer command bodies. Shared by the property suite (tests/integration/hostile)
and its longer run (scripts/hostile_properties.py).

The budget: ``SCHEDULE_HOSTILE_EXAMPLES`` examples per property (default 25, derandomized: the
same examples each CI run); ``SCHEDULE_HOSTILE_SEED=random`` draws new ones each run.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("SCHEDULE_HOSTILE_EXAMPLES", "25"))
RANDOM = os.environ.get("SCHEDULE_HOSTILE_SEED") == "random"

#: One budget for every property: bounded in CI, no per-example deadline (databases vary), no
#: example database written into the work tree; function-scoped fixtures (a backend) are shared
#: by the examples of one test on purpose: each example checks what it wrote itself.
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not RANDOM,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

#: The budget of a property whose examples each wait on a broker round trip: a fifth as many.
HOSTILE_FEW = settings(HOSTILE, max_examples=max(3, EXAMPLES // 5))

#: Pieces of text that broke, or could break, a store, a driver, a template or a query.
FRAGMENTS = [
    "\x00",
    "\ud800",
    "\udfff",
    "\ud83d",  # the first half of an emoji's surrogate pair, alone
    "\u202e",
    "\ufeff",
    "%00",
    "\\u0000",
    "'; DROP TABLE schedule_jobs; --",
    "<script>alert(1)</script>",
    "{{ 7*7 }}",
    "../..",
    "\r\n",
    "\x1b[31m",  # an ANSI escape
    "\x85",  # a C1 control (NEL)
    "\u2028",
    "é",
    "😀",
    " ",
    "_",
    ".",
    "a",
]

text_piece = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8))
#: Text of every kind: empty, hostile pieces joined, and runs at and past the size limits.
hostile_text = st.one_of(
    st.lists(text_piece, max_size=6).map("".join),
    st.sampled_from([0, 199, 200, 201, 255, 256, 1025, 70_000]).map(lambda n: "a" * n),
)
maybe_text = st.one_of(st.none(), hostile_text)
topics = st.one_of(st.sampled_from(["ok.topic", "timer.due", "a" * 200, "a" * 201]), hostile_text)
zones = st.one_of(
    st.sampled_from(["UTC", "Asia/Tokyo", "Pacific/Kiritimati", "Etc/GMT+12", "America/New_York"]),
    hostile_text,
)

_OFFSETS = [timezone(timedelta(hours=h)) for h in (-12, -5, 0, 9, 14)] + [
    ZoneInfo("Asia/Tokyo"),
    ZoneInfo("Pacific/Kiritimati"),
    UTC,
]
_EDGES = [
    datetime(1, 1, 1),
    datetime(1969, 12, 31, 23, 59),
    datetime(1970, 1, 1),
    datetime(9999, 12, 30, 23),
    datetime(9999, 12, 31),
    datetime(9999, 12, 31, 23, 59, 59, 999_999),
]
#: Aware datetimes at the calendar's edges in extreme offsets, any aware datetime, and naive ones.
datetimes = st.one_of(
    st.builds(lambda edge, tz: edge.replace(tzinfo=tz), st.sampled_from(_EDGES), st.sampled_from(_OFFSETS)),
    st.datetimes(timezones=st.sampled_from(_OFFSETS)),
    st.datetimes(),
    st.just(datetime.now(UTC) + timedelta(days=1)),
)


def nested(depth: int) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    for _ in range(depth - 1):
        payload = {"a": payload}
    return payload


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # nan and inf included
    hostile_text,
)
payloads = st.one_of(
    st.none(),
    st.dictionaries(
        hostile_text, st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3)), max_size=4
    ),
    st.sampled_from([31, 32, 33, 1000, 10_000]).map(nested),
    st.just({"big": "x" * 70_000}),
    st.just({"set": {1, 2}}),
    st.just(["not", "a", "mapping"]),
    st.just({"n": 10**5000}),
)
crons = st.one_of(
    st.sampled_from(["*/5 * * * *", "0 9 * * mon-fri", "@daily", "0 0 29 2 */7", "0 0 31 2 *"]),
    st.integers(1, 50_000).map(lambda n: ",".join(["0-59/1"] * n) + " * * * *"),
    st.sampled_from(["1" * 5000 + " * * * *", "0001 * * * *", "*/0 * * * *", "22-2 * * * *"]),
    hostile_text,
    st.lists(text_piece, min_size=5, max_size=5).map(" ".join),
)
intervals = st.one_of(
    st.integers(),
    st.sampled_from([0, 1, 3653 * 86_400_000, 3653 * 86_400_000 + 1, True]),
    st.floats(),
)
ids = st.one_of(hostile_text, st.just("01a21365-b3cc-745d-b970-f58d99f1847d"))
#: List cursors: hostile text, and the encoding a real cursor has of any 36 characters (a NUL run,
#: control characters) or of a real job id.
cursors = st.one_of(
    st.none(),
    hostile_text,
    st.one_of(st.text(min_size=36, max_size=36), st.just("\x00" * 36), ids).map(
        lambda text: base64.urlsafe_b64encode(text.encode(errors="surrogatepass")).decode().rstrip("=")
    ),
)


def _instant_text(dt: datetime) -> str:
    return dt.isoformat()


#: ScheduleTimer command bodies: bytes of every kind (valid structure with hostile fields, not
#: JSON, deep, huge, not an object).
timer_bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "tenantId": st.one_of(hostile_text, st.integers(), st.none()),
            "serviceCallId": st.one_of(hostile_text, st.just("sc")),
            "dueAt": st.one_of(
                st.builds(_instant_text, datetimes),
                st.sampled_from(["9999-12-31T23:59:59.999999+00:00", "0001-01-01T00:00:00+14:00", "soon"]),
                hostile_text,
            ),
        },
        optional={"correlationId": maybe_text},
    ).map(lambda body: json.dumps(body).encode()),  # lone surrogates and NULs travel as escapes
    st.binary(max_size=200),
    st.sampled_from([100, 10_000, 100_000]).map(lambda n: b"[" * n + b"]" * n),
    st.just(b'"just a string"'),
    st.just(b"{" + b'"k":' * 5 + b"}"),
)
