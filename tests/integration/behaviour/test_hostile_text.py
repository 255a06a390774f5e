"""Hostile text through the public API on every store: ids and metadata with control characters
are refused with a typed error and nothing is written; a huge bad value is quoted as a short,
clearly cut prefix; a row that holds control characters from before the rule reads back as it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from schedule_sdk import JobMetadata, OneShotSpec
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.errors import InvalidMetadata, InvalidSpread, InvalidTimezone, InvalidTopic

pytestmark = pytest.mark.usefixtures("service_kind")

CONTROLS = ["\x1b[31mred\x1b[0m", "root\r\nFAKE LOG LINE", "a\x85b", "a\u2028b"]
FIELDS = ["owner_id", "tenant_id", "correlation_id", "client_request_id"]


def spec(**changes: object) -> OneShotSpec:
    values: dict[str, object] = {
        "topic": "tests.hostile",
        "run_at": datetime.now(UTC) + timedelta(hours=1),
        "timezone": "UTC",
    }
    values.update(changes)
    return OneShotSpec(**values)  # type: ignore[arg-type]


def rows(harness) -> int:
    with harness.container.engine().connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(schedule_jobs)).scalar_one())


@pytest.mark.parametrize("field", FIELDS)
def test_metadata_with_control_characters_is_refused_typed_and_nothing_is_written(backend, field):
    h = backend.harness()
    for value in CONTROLS:
        with pytest.raises(InvalidMetadata) as refused:
            h.service.schedule_at(spec(metadata=JobMetadata(**{field: value})))
        assert refused.value.http_status == 422 and "control character" in refused.value.message
        with pytest.raises(InvalidMetadata):  # nor can a filter ask for such text
            h.service.list(tenant_id=value)
    with pytest.raises(InvalidSpread):
        h.service.schedule_at(spec(spread=timedelta(minutes=1), spread_key="k\x1b[2J"))
    assert rows(h) == 0
    h.service.schedule_at(spec(metadata=JobMetadata(**{field: "Zoë <ops@example.com> 😀"})))
    assert rows(h) == 1


def test_a_huge_topic_or_time_zone_is_quoted_as_a_short_cut_prefix(backend):
    h = backend.harness()
    huge = "x" * (1 << 20)
    for change, error in (({"topic": huge}, InvalidTopic), ({"timezone": huge}, InvalidTimezone)):
        with pytest.raises(error) as refused:
            h.service.schedule_at(spec(**change))
        message = refused.value.message
        assert len(message) < 600 and "more characters)" in message  # was the whole 1 MiB
    assert rows(h) == 0


def test_a_row_with_control_characters_from_before_the_rule_reads_back_as_it_is(backend):
    h = backend.harness()
    job = h.service.schedule_at(spec(metadata=JobMetadata(owner_id="plain", tenant_id="t")))
    with h.container.engine().begin() as conn:  # as an older release stored it
        conn.execute(schedule_jobs.update().values(owner_id="\x1b[31mold\r\n"))
    read = h.service.get_by_id(job.id)
    assert read is not None and read.metadata.owner_id == "\x1b[31mold\r\n"
    assert [j.id for j in h.service.list(tenant_id="t").items] == [job.id]
