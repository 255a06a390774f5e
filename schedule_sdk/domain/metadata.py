"""A job's metadata: the audit, filtering and tracing fields (owner, tenant, correlation and
client request ids), and the rule for their text."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from schedule_sdk.domain.errors import InvalidMetadata
from schedule_sdk.domain.text import plain_id

MAX_METADATA_LENGTH = 255


def check_metadata_text(value: object, name: str) -> str:
    """``value`` if it may be stored as metadata field ``name`` (or filter on it): a non-empty
    string of at most :data:`MAX_METADATA_LENGTH` characters with no NUL, no lone surrogate and
    no control character (:func:`~schedule_sdk.domain.text.plain_id`); else :class:`InvalidMetadata`."""
    if not isinstance(value, str) or not value or len(value) > MAX_METADATA_LENGTH:
        raise InvalidMetadata(f"metadata.{name} must be a non-empty string of at most 255 chars")
    return plain_id(value, f"metadata.{name}", InvalidMetadata)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobMetadata:
    """Audit, filtering and tracing fields. Never used for access control."""

    owner_id: str | None = None
    tenant_id: str | None = None
    correlation_id: str | None = None
    #: Unique per tenant, in all statuses: among the jobs of the same ``tenant_id``, or among the
    #: jobs without a tenant when ``tenant_id`` is None; a duplicate raises ``ClientRequestIdInUse``.
    client_request_id: str | None = None

    def __post_init__(self) -> None:
        # Every job a caller makes builds one (a store reads back through stored()): four fields by name.
        for name in _METADATA_FIELDS:
            value = getattr(self, name)
            if value is not None:
                check_metadata_text(value, name)

    @classmethod
    def stored(
        cls,
        owner_id: str | None = None,
        tenant_id: str | None = None,
        correlation_id: str | None = None,
        client_request_id: str | None = None,
    ) -> JobMetadata:
        """Metadata as a store (or an event of a stored job) holds it, not checked again: it was
        checked when written, and a value written before a rule was added reads back as it is."""
        made = object.__new__(cls)
        object.__setattr__(made, "owner_id", owner_id)
        object.__setattr__(made, "tenant_id", tenant_id)
        object.__setattr__(made, "correlation_id", correlation_id)
        object.__setattr__(made, "client_request_id", client_request_id)
        return made

    def to_dict(self) -> dict[str, str | None]:
        return dataclasses.asdict(self)


_METADATA_FIELDS = ("owner_id", "tenant_id", "correlation_id", "client_request_id")
