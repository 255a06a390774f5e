"""The worker's HTTP probes, answered without a socket: liveness reads nothing, readiness is the
health report, unknown paths are 404."""

from __future__ import annotations

import json

from schedule_sdk.core.health import Check, HealthReport
from schedule_sdk.entrypoints.probes import ProbeServer


def probes(*, live: bool, ready: bool, metrics: bool = True) -> ProbeServer:
    report = HealthReport([Check("store", True, "reachable"), Check("workers", ready, "0 live of 1")])
    return ProbeServer(
        live=lambda: live, ready=lambda: report, metrics=(lambda: b"m 1\n") if metrics else None
    )


def test_healthz_is_the_worker_running_and_readyz_the_health_report():
    up = probes(live=True, ready=True)
    assert up.answer("/healthz")[::2] == (200, b"ok\n")
    status, kind, body = up.answer("/readyz")
    assert (status, kind) == (200, "application/json") and json.loads(body)["ok"] is True
    assert up.answer("/metrics")[::2] == (200, b"m 1\n")
    down = probes(live=False, ready=False, metrics=False)
    assert down.answer("/healthz")[0] == 503
    status, _, body = down.answer("/readyz")
    assert status == 503 and json.loads(body)["checks"][1] == {
        "name": "workers",
        "ok": False,
        "detail": "0 live of 1",
        "warning": False,
    }
    assert down.answer("/metrics")[0] == 404 and down.answer("/")[0] == 404
