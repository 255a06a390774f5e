"""Which Redis a URL names: one server, or a service found through Sentinel; bad ones refused
with a typed error that never shows the password."""

from __future__ import annotations

import pytest

from schedule_sdk import InvalidSetting, Settings
from schedule_sdk.domain.redis_url import SentinelTarget, sentinel_target
from schedule_sdk.domain.text import masked_url


@pytest.mark.parametrize("url", ["redis://localhost:6379/0", "rediss://:pw@h:6380/1", "unix:///tmp/r.sock"])
def test_a_server_url_names_no_sentinel_service(url: str) -> None:
    assert sentinel_target(url) is None


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_db() -> None:
    target = sentinel_target("redis+sentinel://app:s%40cret@10.0.0.1:26379,[::1]:26380,sentinel-c/jobs/3")
    assert target == SentinelTarget(
        sentinels=(("10.0.0.1", 26379), ("::1", 26380), ("sentinel-c", 26379)),
        service="jobs",
        db=3,
        username="app",
        password="s@cret",
    )
    assert target.server_options() == {"db": 3, "username": "app", "password": "s@cret"}
    assert "s@cret" not in repr(target)


def test_tls_to_the_servers_and_db_zero_by_default() -> None:
    target = sentinel_target("rediss+sentinel://h:1/jobs")
    assert target is not None and target.db == 0 and target.server_options()["ssl"] is True


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://:Hunter2Secret@h:1/0", "use redis://host:port/db or redis+sentinel://"),
        ("redis+sentinel://:Hunter2Secret@/jobs/0", "name at least one Sentinel"),
        ("redis+sentinel://:Hunter2Secret@h:1", "give the service"),
        ("redis+sentinel://:Hunter2Secret@h:1/jobs/0/x", "give the service"),
        ("redis+sentinel://:Hunter2Secret@h:port/jobs/0", "bad port 'port'"),
        ("redis+sentinel://:Hunter2Secret@h:70000/jobs/0", "bad port '70000'"),
        ("redis+sentinel://:Hunter2Secret@h:1/jobs/first", "the db must be a number"),
    ],
)
def test_a_bad_url_is_refused_by_the_settings_with_its_password_masked(url: str, says: str) -> None:
    with pytest.raises(InvalidSetting) as raised:
        Settings.load({"redis_url": url}, environ={})
    assert says in str(raised.value)
    assert "Hunter2Secret" not in str(raised.value) and ":***@" in str(raised.value)
    assert raised.value.code == "SCHEDULE_INVALID_SETTING"


def test_a_sentinel_url_is_shown_masked() -> None:
    shown = masked_url("redis+sentinel://:pw@a:26379,b:26380/jobs/0")
    assert shown == "redis+sentinel://:***@a:26379,b:26380/jobs/0"


def test_a_sentinel_url_selects_the_rq_substrate() -> None:
    assert Settings.load({"redis_url": "redis+sentinel://a:26379/jobs/0"}, environ={}).substrate == "rq"
