"""Counters, histograms and a gauge for the series only the event loop's thread updates (a single
process's `Metrics.record` and in-flight count), each family a prometheus-client custom collector
(public API: `Collector`, `CounterMetricFamily`, ...) that renders its series at scrape time as
prometheus-client's own `Counter` / `Histogram` / `Gauge` render theirs: the same samples, labels,
order and `_created` times.

Why not prometheus-client's own: each of its values takes a lock on every update and its children
check their labels on every call; a request makes about eleven updates. Here a series is a float
the loop adds to, and a histogram finds its bucket by bisection. A scrape reads each float whole
under the GIL. With several workers (`gateway serve --workers`) the values must live in the files
prometheus-client shares between processes: `Metrics` uses its own metrics there."""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import INF, floatToGoString

# prometheus-client shows `_created` series unless told not to (PROMETHEUS_DISABLE_CREATED_SERIES,
# disable_created_metrics()); it exposes no reading of that switch, so a counter of its own that
# belongs to no registry is asked at each scrape
_CREATED_PROBE = Counter(
    "gateway_created_probe", "Whether prometheus-client shows _created series", registry=None
)


def _created_shown() -> bool:
    return len(next(iter(_CREATED_PROBE.collect())).samples) > 1


class CounterSeries:
    """One labelled series of a counter."""

    __slots__ = ("value", "created")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:  # as Counter.inc: an upstream's malformed figure fails the update
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class HistogramSeries:
    """One labelled series of a histogram: a count per bucket (not cumulative) and the sum."""

    __slots__ = ("counts", "sum", "created", "_bounds", "_last")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()
        self._bounds = bounds
        self._last = len(bounds)

    def observe(self, amount: float) -> None:
        self.sum += amount
        i = bisect_left(self._bounds, amount)
        if i < self._last and amount <= self._bounds[i]:  # (never for NaN, as Histogram.observe)
            self.counts[i] += 1


S = TypeVar("S", CounterSeries, HistogramSeries)


class _Family(Collector, Generic[S]):
    """A labelled family registered in `registry`; its series appear when first asked for."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry | None
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._series: dict[tuple[str, ...], S] = {}
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> S:
        """The series of these label values (made when first asked for, as `labels` does)."""
        if len(values) != len(self.labelnames):
            raise ValueError("Incorrect label count")
        series = self._series.get(values)
        if series is None:
            series = self._series[values] = self._new()
        return series

    def describe(self) -> Iterable[Metric]:
        return [self._kind(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = self._kind(self.name, self.documentation, labels=self.labelnames)
        created = _created_shown()
        for values, series in self._items():
            self._add(family, values, series, created)
        return [family]

    # a family's own: its series, the prometheus-client family it renders as, a series' samples
    _kind: type[CounterMetricFamily] | type[HistogramMetricFamily]

    def _new(self) -> S:
        raise NotImplementedError

    def _add(self, family: Any, values: tuple[str, ...], series: S, created: bool) -> None:
        raise NotImplementedError

    def _items(self) -> list[tuple[tuple[str, ...], S]]:
        # dict.copy runs whole under the GIL: a scrape from another thread sees no half update
        return list(self._series.copy().items())


class CounterFamily(_Family[CounterSeries]):
    """`Counter(name, documentation, labelnames)` with unlocked series."""

    _kind = CounterMetricFamily

    def _new(self) -> CounterSeries:
        return CounterSeries()

    def _add(self, family: Any, values: tuple[str, ...], series: CounterSeries, created: bool) -> None:
        family.add_metric(values, series.value, series.created if created else None)


class HistogramFamily(_Family[HistogramSeries]):
    """`Histogram(name, documentation, labelnames, buckets=...)` with unlocked series."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry | None,
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds) or not bounds or bounds[0] < 0:
            raise ValueError("buckets must be sorted and not negative")
        if bounds[-1] != INF:
            bounds.append(INF)
        self.bounds = tuple(bounds)
        self._les = tuple(floatToGoString(b) for b in bounds)
        super().__init__(name, documentation, labelnames, registry)

    _kind = HistogramMetricFamily

    def _new(self) -> HistogramSeries:
        return HistogramSeries(self.bounds)

    def _add(self, family: Any, values: tuple[str, ...], series: HistogramSeries, created: bool) -> None:
        cumulative, buckets = 0.0, []
        for le, count in zip(self._les, series.counts, strict=True):
            cumulative += count
            buckets.append((le, cumulative))
        family.add_metric(values, buckets, series.sum)  # the buckets, _count and _sum
        if created:
            labels = dict(zip(self.labelnames, values, strict=True))
            family.samples.append(Sample(f"{self.name}_created", labels, series.created))


class GaugeValue(Collector):
    """A `Gauge(name, documentation)` without labels, its value a float the loop adds to."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry | None) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        if registry is not None:
            registry.register(self)

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.name, self.documentation)]

    def collect(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.name, self.documentation, value=self.value)]
