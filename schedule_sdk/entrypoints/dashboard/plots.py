"""Server-rendered SVG plots: geometry computed here, drawn by the templates (values escaped there)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schedule_sdk.domain.overview import Overview

WIDTH, HEIGHT = 720, 180
LEFT, BOTTOM, TOP = 60, 22, 8
#: Half the width of an x-axis label ("HH:MM" at the templates' 11 px), with a margin: a label
#: centred closer than this to the right edge would be cut, so it ends at its bar's right edge.
LABEL_HALF = 18


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str
    failed_height: float = 0.0


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    label: str
    #: The SVG ``text-anchor`` of the label: where ``position`` is on it.
    anchor: str = "middle"


@dataclass(slots=True)
class Plot:
    """What a template needs to draw one plot."""

    width: int = WIDTH
    height: int = HEIGHT
    #: Where the plotting area starts: y-axis labels end left of it, axis lines start there.
    left: int = LEFT
    bars: list[Bar] = field(default_factory=list)
    lines: dict[str, str] = field(default_factory=dict)  # series name -> SVG polyline points
    dots: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    empty: bool = True


def _x_ticks(overview: Overview, slot: float) -> list[Tick]:
    """About six labels under the buckets, centred; one too close to the right edge to be
    centred (the window's last bucket, often) ends at its bucket's right edge instead."""
    count = len(overview.buckets)
    every = max(1, count // 6)
    ticks = []
    for i, b in enumerate(overview.buckets):
        if i % every:
            continue
        centre = LEFT + i * slot + slot / 2
        if centre + LABEL_HALF > WIDTH:
            ticks.append(Tick(min(centre + slot / 2, WIDTH - 1), f"{b.start:%H:%M}", "end"))
        else:
            ticks.append(Tick(centre, f"{b.start:%H:%M}"))
    return ticks


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exponent = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * exponent:
            return float(step * exponent)
    return float(10 * exponent)


def fires_per_bucket(overview: Overview) -> Plot:
    """Bars: fires per bucket, the failed part of each bar drawn separately."""
    plot = Plot()
    buckets = overview.buckets
    if not buckets:
        return plot
    inner_w, inner_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    slot = inner_w / len(buckets)
    top = _nice_max(max(b.fires for b in buckets))
    for i, b in enumerate(buckets):
        h = inner_h * b.fires / top
        failed = inner_h * b.failures / top
        title = f"{b.start:%Y-%m-%d %H:%M} UTC: {b.fires} fires, {b.failures} failed"
        plot.bars.append(Bar(LEFT + i * slot + 1, TOP + inner_h - h, max(slot - 2, 1), h, title, failed))
    plot.y_ticks = [Tick(TOP + inner_h * (1 - f), f"{top * f:g}") for f in (0, 0.5, 1)]
    plot.x_ticks = _x_ticks(overview, slot)
    plot.empty = overview.total_fires == 0
    return plot


def lateness(overview: Overview) -> Plot:
    """Lines on a log scale: lateness p50 and p99 per bucket (buckets without fires are gaps)."""
    plot = Plot()
    buckets = overview.buckets
    if not buckets:
        return plot
    inner_w, inner_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    slot = inner_w / len(buckets)
    values = [v for b in buckets for v in (b.p50_ms, b.p99_ms) if v is not None]
    top = max(10.0, _nice_max(max(values, default=1)))
    scale = math.log10(top + 1)

    def y(ms: int) -> float:
        return TOP + inner_h * (1 - math.log10(ms + 1) / scale)

    for name in ("p50", "p99"):
        points: list[tuple[float, float, str]] = []
        for i, b in enumerate(buckets):
            value = b.p50_ms if name == "p50" else b.p99_ms
            if value is not None:
                label = f"{b.start:%H:%M} UTC {name} <= {value} ms"
                points.append((round(LEFT + i * slot + slot / 2, 1), round(y(value), 1), label))
        plot.dots[name] = points
        plot.lines[name] = " ".join(f"{px},{py}" for px, py, _ in points)
    ticks = [t for t in (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000) if t <= top]
    plot.y_ticks = [Tick(y(t), _ms(t)) for t in ticks]
    plot.x_ticks = _x_ticks(overview, slot)
    plot.empty = not values
    return plot


def failures_by_topic(overview: Overview) -> Plot:
    """Horizontal bars: failed fires per topic (the worst first)."""
    rows = overview.failures_by_topic
    row_h = 22
    plot = Plot(height=max(row_h * len(rows) + 8, 30))
    if not rows:
        return plot
    top = max(n for _, n in rows)
    label_w, inner_w = 220, WIDTH - 220 - 60
    for i, (topic, n) in enumerate(rows):
        plot.bars.append(Bar(label_w, 4 + i * row_h, max(inner_w * n / top, 2), row_h - 6, f"{topic}: {n}"))
    plot.empty = False
    return plot


def _ms(value: int) -> str:
    if value >= 60_000:
        return f"{value / 60_000:.2g} min"  # 1.7 min, 17 min: short enough for the axis
    if value >= 1_000:
        return f"{value / 1_000:g} s"
    return f"{value} ms"
