"""The worker's HTTP port (``schedule-sdk worker --metrics-port N``): probes and metrics.

- ``GET /healthz``: liveness, 200 while this worker runs (its heartbeat thread is alive), else 503;
  it reads nothing, so a slow database never gets a live worker restarted.
- ``GET /readyz``: readiness, the checks of ``schedule-sdk health`` (the store, Redis, live
  workers, the due backlog) as JSON, 200 when healthy, else 503.
- ``GET /metrics``: the Prometheus exposition (when the metrics are Prometheus ones).

It binds ``127.0.0.1`` unless told otherwise (``--metrics-host``): metrics and probes are for the
host's agents and the orchestrator, not the world.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from schedule_sdk.core.health import HealthReport


class ProbeServer:
    """``/healthz``, ``/readyz`` and ``/metrics`` from a daemon thread (see the module docstring)."""

    def __init__(
        self,
        *,
        live: Callable[[], bool],
        ready: Callable[[], HealthReport],
        metrics: Callable[[], bytes] | None = None,
    ) -> None:
        self._live = live
        self._ready = ready
        self._metrics = metrics
        self._server: ThreadingHTTPServer | None = None

    def serve(self, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
        """Start serving on ``host:port`` (port 0: a free one, see ``server_address``)."""
        probes = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, kind, body = probes.answer(self.path.split("?", 1)[0])
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # probes every few seconds would flood the log

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="schedule-sdk-probes", daemon=True).start()
        self._server = server
        return server

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """The status, content type and body of ``GET path``."""
        if path == "/healthz":
            live = self._live()
            return (200 if live else 503), "text/plain; charset=utf-8", b"ok\n" if live else b"stopped\n"
        if path == "/readyz":
            report = self._ready()
            body = json.dumps(report.as_dict()).encode()
            return (200 if report.ok else 503), "application/json", body
        if path == "/metrics" and self._metrics is not None:
            return 200, "text/plain; version=0.0.4; charset=utf-8", self._metrics()
        return 404, "text/plain; charset=utf-8", b"not found: try /healthz, /readyz or /metrics\n"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
