"""Turns a :class:`~schedule_sdk.ScheduleError` raised by a view into a JSON error response."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from schedule_sdk import (
    ScheduleError,
)


class ScheduleErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, error: Exception) -> HttpResponse | None:
        if not isinstance(error, ScheduleError):
            return None  # Django's usual handling
        return JsonResponse({"code": error.code, "message": error.message}, status=error.http_status)
