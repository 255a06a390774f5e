"""Generated hostile query strings and paths on the dashboard's read-only pages, on SQLite and
PostgreSQL: every answer is a page (200) or a refusal (400, 404), never a 500, and reading
writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.integration.dashboard.conftest import Site, open_site
from tests.support import hostile


def encoded(text: str) -> str:
    """``text`` percent-encoded byte by byte (a lone surrogate as the bytes it would be)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


#: Text short enough for a URL (httpx refuses a component over 64 KiB before sending it).
short_text = hostile.hostile_text.filter(lambda text: len(text) < 4000)
query_value = st.one_of(
    short_text,
    st.sampled_from(
        [
            "9999-12-31T23:59:59-05:00",
            "0001-01-01T00:00:00+14:00",
            "2030-01-01T00:00:00Z",
            "pending",
            "Scheduled",
            "Reached",
            "-1",
            "1e308",
        ]
    ),
)
KEYS = ["topic", "owner_id", "tenant_id", "status", "cursor", "tenant", "state", "after_due", "after_call"]
queries = st.dictionaries(st.sampled_from(KEYS), query_value, max_size=5).map(
    lambda q: "&".join(f"{key}={encoded(value)}" for key, value in q.items())
)
paths = st.one_of(
    st.sampled_from(["/", "/jobs", "/timers", "/workers"]),
    short_text.map(lambda job_id: f"/jobs/{encoded(job_id)}"),
    st.tuples(short_text, st.sampled_from(["cancel", "pause", "reschedule", "nope"])).map(
        lambda pair: f"/jobs/{encoded(pair[0])}/{pair[1]}"
    ),
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def hostile_site(
    request: pytest.FixtureRequest, database_url_factory: Callable[[str], str]
) -> Iterator[Site]:
    opened = open_site(database_url_factory(request.param))
    yield opened
    opened.store.close()


def test_hostile_query_strings_get_a_page_or_a_refusal_never_a_500(hostile_site: Site):
    job_id = hostile_site.one_shot(topic="dash.hostile")
    client = hostile_site.client()

    @hostile.HOSTILE
    @given(path=paths, query=queries)
    def check(path: str, query: str) -> None:
        response = client.get(f"{path}?{query}" if query else path)
        assert response.status_code in (200, 400, 403, 404), (path, query, response.status_code)
        assert hostile_site.service.list(limit=500).items[0].id == job_id  # nothing written

    check()
