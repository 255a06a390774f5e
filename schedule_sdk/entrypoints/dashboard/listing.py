"""The jobs list's links: its filters as a query string, and the column headers that sort it
(keeping the filters, toggling the order on a second click)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from schedule_sdk.domain.overview import JOB_SORTS

#: The fields of the jobs list's form that filter it (not its order nor its page).
FILTER_FIELDS = ("topic", "owner_id", "tenant_id", "status", "outcome", "q")


def default_order(sort: str) -> str:
    """A sort's first order: soonest due first, else newest first."""
    return "asc" if sort == "due" else "desc"


def filter_query(form: Mapping[str, str]) -> str:
    """The filters of ``form`` (its non-empty filter fields) as a query string."""
    return urlencode({k: form[k] for k in FILTER_FIELDS if form.get(k)})


@dataclass(frozen=True, slots=True)
class SortLink:
    """A column header's link: the query string of the list sorted by it, and the order the
    list has now when it is sorted by this column (None: it is sorted by another)."""

    query: str
    current: str | None


def sort_links(form: Mapping[str, str]) -> dict[str, SortLink]:
    """One link per sort of :data:`JOB_SORTS`: the filters kept, the page dropped; the column
    the list is sorted by toggles its order, another starts at its default order."""
    sort = form.get("sort") or "created"
    if sort not in JOB_SORTS:
        sort = "created"
    order = form.get("order") or default_order(sort)
    links = {}
    for column in JOB_SORTS:
        current = order if column == sort else None
        following = ("asc" if current == "desc" else "desc") if current else default_order(column)
        filters = {k: form[k] for k in FILTER_FIELDS if form.get(k)}
        links[column] = SortLink(urlencode({**filters, "sort": column, "order": following}), current)
    return links
