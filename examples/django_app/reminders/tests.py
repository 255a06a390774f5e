"""The reminders app's tests: ``manage.py test reminders`` (no database server, no worker needed).

The views get the real ScheduleService on in-memory parts (``schedule_sdk.testing.make_test_kit``)
through a provider override; ``kit.run_due()`` fires what is due, running this app's listeners.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.test import TransactionTestCase

from schedule_sdk.contrib.django import container as schedule_container
from schedule_sdk.testing import make_test_kit

from . import listeners
from .models import SentReminder

HOUR = timedelta(hours=1)


# --8<-- [start:override]
class RemindersTestCase(TransactionTestCase):
    """Listeners run as in a worker (no surrounding test transaction), hence TransactionTestCase."""

    def setUp(self) -> None:
        self.kit = make_test_kit(listeners=[listeners])  # runs this app's @on_event listeners
        container = schedule_container()  # built by schedule_sdk.contrib.django
        container.schedule_service.override(self.kit.service)
        self.addCleanup(container.schedule_service.reset_override)

    # --8<-- [end:override]

    def create(self, user: str = "ana", due_in: timedelta = HOUR, **extra: Any) -> dict[str, Any]:
        due_at = (self.kit.clock.now() + due_in).isoformat()
        body = {"user_id": user, "message": f"hello {user}", "due_at": due_at, **extra}
        response = self.client.post("/reminders", body, content_type="application/json")
        self.assertEqual(response.status_code, 201, response.content)
        result: dict[str, Any] = response.json()
        return result

    def assert_error(self, response: Any, status: int, code: str) -> None:
        self.assertEqual((response.status_code, response.json()["code"]), (status, code), response.content)


class ReminderApiTests(RemindersTestCase):
    def test_create_then_the_listener_sends_it_at_its_due_time(self) -> None:
        reminder = self.create(timezone="Europe/Paris")
        self.assertEqual((reminder["status"], reminder["timezone"]), ("pending", "Europe/Paris"))

        self.kit.run_due(until=timedelta(minutes=59))
        self.assertEqual(SentReminder.objects.count(), 0)
        self.kit.run_due(until=timedelta(minutes=1))
        sent = self.client.get("/sent").json()
        self.assertEqual([(s["reminder_id"], s["message"]) for s in sent], [(reminder["id"], "hello ana")])
        self.assertEqual(self.client.get(f"/reminders/{reminder['id']}").json()["status"], "completed")

    def test_a_cancelled_reminder_never_fires(self) -> None:
        reminder = self.create()
        self.assertEqual(self.client.delete(f"/reminders/{reminder['id']}").status_code, 204)
        self.assertEqual(self.client.delete(f"/reminders/{reminder['id']}").status_code, 204)  # idempotent
        self.kit.run_due(until=timedelta(days=1))
        self.assertEqual(SentReminder.objects.count(), 0)
        self.assertEqual(self.client.get(f"/reminders/{reminder['id']}").json()["status"], "cancelled")

    def test_paging(self) -> None:
        created = [self.create("bob")["id"] for _ in range(25)]
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            query = {"owner": "bob", "limit": 10, **({"cursor": cursor} if cursor else {})}
            page = self.client.get("/reminders", query).json()
            seen += [item["id"] for item in page["items"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        self.assertEqual((pages, seen), (3, created))

    def test_reschedule(self) -> None:
        old = self.create(due_in=timedelta(hours=5))
        url = f"/reminders/{old['id']}/reschedule"
        due_at = (self.kit.clock.now() + HOUR).isoformat()
        response = self.client.post(url, {"due_at": due_at}, "application/json")
        self.assertEqual(response.status_code, 200, response.content)
        new = response.json()
        self.assertEqual(new["rescheduled_from"], old["id"])
        self.assertNotEqual(new["id"], old["id"])

        self.kit.run_due(until=timedelta(days=1))
        self.assertEqual(list(SentReminder.objects.values_list("reminder_id", flat=True)), [new["id"]])
        later = (self.kit.clock.now() + HOUR).isoformat()
        again = self.client.post(url, {"due_at": later}, "application/json")
        self.assert_error(again, 409, "SCHEDULE_NOT_RESCHEDULABLE")


class ErrorMappingTests(RemindersTestCase):
    def post(self, **fields: Any) -> Any:
        body = {"user_id": "eve", "message": "m", "due_at": "2099-01-01T09:00:00+00:00", **fields}
        return self.client.post("/reminders", body, content_type="application/json")

    def test_bad_input_is_422_with_the_sdk_error_code_and_writes_nothing(self) -> None:
        self.assert_error(self.post(due_at="2099-01-01T09:00:00"), 422, "SCHEDULE_NAIVE_DATETIME")
        self.assert_error(self.post(due_at="2001-01-01T09:00:00Z"), 422, "SCHEDULE_RUN_AT_IN_PAST")
        self.assert_error(self.post(timezone="Mars/Olympus_Mons"), 422, "SCHEDULE_INVALID_TIMEZONE")
        self.assert_error(self.post(due_at="tomorrow"), 422, "INVALID_REQUEST")
        self.assert_error(self.post(user_id=None), 422, "INVALID_REQUEST")
        self.assert_error(self.client.get("/reminders", {"cursor": "!!"}), 422, "SCHEDULE_INVALID_CURSOR")
        self.assertEqual(self.client.get("/reminders").json()["items"], [])

    def test_unknown_id_is_404(self) -> None:
        unknown = "01900000-0000-7000-8000-000000000000"
        self.assert_error(self.client.get(f"/reminders/{unknown}"), 404, "SCHEDULE_NOT_FOUND")
        self.assert_error(self.client.delete(f"/reminders/{unknown}"), 404, "SCHEDULE_NOT_FOUND")

    def test_a_reused_client_request_id_is_409(self) -> None:
        self.assertEqual(self.post(client_request_id="req-1").status_code, 201)
        self.assert_error(self.post(client_request_id="req-1"), 409, "SCHEDULE_CLIENT_REQUEST_ID_IN_USE")


class ListenerTests(RemindersTestCase):
    def test_a_replayed_event_is_sent_once(self) -> None:
        reminder = self.create(due_in=timedelta(seconds=1))
        self.kit.run_due(until=timedelta(seconds=1))
        event = self.kit.events[0]
        self.kit.registry.listeners(f"schedule.{event.topic}.arrived")[0](event)  # at-least-once: a replay
        self.assertEqual(list(SentReminder.objects.values_list("reminder_id", flat=True)), [reminder["id"]])


def _aware(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)
