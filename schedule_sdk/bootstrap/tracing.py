"""Which :class:`~schedule_sdk.ports.Tracing` adapter the ``tracing`` setting picks: none
(:class:`~schedule_sdk.core.unobserved.NoTracing`) or OpenTelemetry
(:class:`~schedule_sdk.adapters.otel.OtelTracing`, with the ``otel`` extra). OpenTelemetry is
imported only when asked for, and ``auto`` falls back to none when it is not installed.
"""

from __future__ import annotations

from schedule_sdk.core.unobserved import NoTracing
from schedule_sdk.domain.errors import InvalidSetting
from schedule_sdk.ports import Tracing


def tracing_for(setting: str) -> Tracing:
    """The tracing adapter for the ``tracing`` setting: ``none``; ``otel`` (the ``otel`` extra
    must be installed); ``auto``: ``otel`` when OpenTelemetry is importable, else ``none``."""
    if setting == "none":
        return NoTracing()
    try:
        from schedule_sdk.adapters.otel import OtelTracing
    except ImportError as missing:
        if setting == "otel":
            raise InvalidSetting(
                f"tracing='otel' needs the otel extra (pip install 'schedule-sdk[otel]'): {missing}"
            ) from missing
        return NoTracing()
    return OtelTracing()
