"""The overview plots' geometry: no axis label is drawn where the SVG cuts it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedule_sdk.domain.overview import WINDOWS, Bucket, Overview
from schedule_sdk.entrypoints.dashboard import plots

T0 = datetime(2030, 3, 4, 12, 0, tzinfo=UTC)
CHAR = 7.0  # an upper bound of a character's width at the templates' 11 px (Chromium: "100 ms" is 40.9 px)


def overview(minutes: int, late_ms: int) -> Overview:
    step = WINDOWS[minutes]
    count = minutes * 60 // int(step.total_seconds()) + 1  # whole buckets, the current one included
    buckets = [Bucket(T0 - (count - 1 - i) * step, 10, 1, late_ms // 10, late_ms) for i in range(count)]
    return Overview(buckets, [("t", 1)], 10 * count, count, buckets[0].start, T0 + step)


def extent(tick: plots.Tick) -> tuple[float, float]:
    width = len(tick.label) * CHAR
    start = {"start": 0.0, "middle": width / 2, "end": width}[tick.anchor]
    return tick.position - start, tick.position - start + width


@pytest.mark.parametrize("minutes", sorted(WINDOWS))
@pytest.mark.parametrize("late_ms", [3, 2_000, 3_600_000])
def test_every_axis_label_fits_inside_the_plot(minutes: int, late_ms: int) -> None:
    data = overview(minutes, late_ms)
    for plot in (plots.fires_per_bucket(data), plots.lateness(data)):
        assert plot.x_ticks[0].label == f"{data.buckets[0].start:%H:%M}"
        last = plot.x_ticks[-1]
        for tick in plot.x_ticks:
            low, high = extent(tick)
            assert 0 <= low and high <= plot.width, (tick, minutes)
        assert last.position <= plot.width
        for tick in plot.y_ticks:  # right-aligned 8 px left of the plotting area
            assert len(tick.label) * CHAR <= plot.left - 8, tick


def test_the_windows_last_bucket_label_ends_at_its_bar() -> None:
    data = overview(60, 5)  # 61 one-minute buckets: a label every 10, the last one on the last
    ticks = plots.fires_per_bucket(data).x_ticks
    assert [t.label for t in ticks][-1] == "12:00" and ticks[-1].anchor == "end"
    assert ticks[-1].position == pytest.approx(plots.WIDTH - 4)  # the bar area's right edge
    assert {t.anchor for t in ticks[:-1]} == {"middle"}


def test_minute_lateness_labels_are_short() -> None:
    assert [plots._ms(v) for v in (1, 1_000, 100_000, 1_000_000)] == ["1 ms", "1 s", "1.7 min", "17 min"]
