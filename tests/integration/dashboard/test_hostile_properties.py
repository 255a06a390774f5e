"""Generated hostile input against the dashboard's paths, query strings and action forms: every
answer is a page (200), a typed refusal (400, naming a code), a 404 or a 403, never a 500;
nothing is written; the next valid request works. ``SCHEDULE_FUZZ_EXAMPLES`` sets the budget
(60 per property in CI; raise it for a longer run)."""

from __future__ import annotations

import os
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedule_sdk import JobStatus

from .conftest import Site

EXAMPLES = int(os.environ.get("SCHEDULE_FUZZ_EXAMPLES", "60"))
BUDGET = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(
        alphabet=st.sampled_from(["\x00", "\ud800", "\udfff", "%", "_", "'", '"', "<", "é", "9"]), max_size=20
    ),
    st.sampled_from(["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+14:00", "1e308", "nan", "x" * 5000]),
)
PARAMS = ["topic", "status", "owner_id", "tenant_id", "q", "sort", "order", "cursor", "window"]


@BUDGET
@given(params=st.dictionaries(st.sampled_from(PARAMS), hostile_text, max_size=4))
def test_the_jobs_list_answers_any_query_string(site: Site, params: dict[str, str]) -> None:
    client = site.client()
    query = "&".join(f"{quote(k)}={quote(v, safe='', errors='surrogatepass')}" for k, v in params.items())
    for path in ("/jobs?", "/?"):
        response = client.get(path + query)
        assert response.status_code in (200, 400), (path, params, response.status_code)
        if response.status_code == 400:
            assert "SCHEDULE_" in response.text
    assert client.get("/jobs").status_code == 200


@BUDGET
@given(tenant=hostile_text, due=hostile_text, call=hostile_text, job_id=hostile_text)
def test_timers_and_job_pages_answer_any_input(
    site: Site, tenant: str, due: str, call: str, job_id: str
) -> None:
    client = site.client()

    def q(value: str) -> str:
        return quote(value, safe="", errors="surrogatepass")

    timers = client.get(f"/timers?tenant={q(tenant)}&after_due={q(due)}&after_call={q(call)}")
    assert timers.status_code in (200, 400), (tenant, due, call)
    for path in (f"/jobs/{q(job_id)}", f"/jobs/{q(job_id)}/cancel"):
        assert client.get(path).status_code in (200, 404), path


@BUDGET
@given(
    fields=st.dictionaries(
        st.sampled_from(["run_at", "zone", "payload", "every_seconds", "cron"]), hostile_text
    )
)
def test_the_reschedule_form_refuses_bad_fields_and_writes_nothing(
    site: Site, fields: dict[str, str]
) -> None:
    job_id = site.one_shot()
    client = site.client(auth=lambda request: True)
    page = client.get(f"/jobs/{job_id}/reschedule").text
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    body = "&".join(
        f"{k}={quote(v, safe='', errors='surrogatepass')}" for k, v in {"csrf": csrf, **fields}.items()
    )
    response = client.request(
        "POST",
        f"/jobs/{job_id}/reschedule",
        content=body.encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code in (303, 400, 409), (fields, response.status_code)
    if response.status_code != 303:
        assert site.service.get_by_id(job_id).status is JobStatus.PENDING  # nothing written
        assert site.service.get_by_id(job_id).rescheduled_to is None
