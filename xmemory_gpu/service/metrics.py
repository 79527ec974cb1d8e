"""Prometheus text-format metrics: requests and latencies per route, ingest rate, queue depth,
coalesced batch sizes. Labels come from fixed sets (the app's route templates, the HTTP methods
below, status codes), so no request can add a label value of its own choosing."""

from __future__ import annotations

import threading
from collections import defaultdict

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})  # any other: "OTHER"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], list[float]] = {}  # route -> bucket counts + [sum, count]
        self.counters: dict[str, float] = defaultdict(float)
        self.gauges: dict[str, callable] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """One request; ``route`` a route template (the caller's fixed set)."""
        method = method if method in METHODS else "OTHER"
        with self._lock:
            self.requests[(method, route, status)] += 1
            h = self.latency.setdefault((method, route), [0.0] * (len(BUCKETS) + 2))
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def inc(self, name: str, value: float = 1.0) -> None:
        with self._lock:
            self.counters[name] += value

    def render(self) -> str:
        with self._lock:
            out = [
                "# HELP xmemory_requests_total HTTP requests by method, route and status.",
                "# TYPE xmemory_requests_total counter",
            ]
            out += [
                f'xmemory_requests_total{{method="{m}",route="{r}",status="{s}"}} {n}'
                for (m, r, s), n in sorted(self.requests.items())
            ]
            out += [
                "# HELP xmemory_request_seconds Request latency by method and route.",
                "# TYPE xmemory_request_seconds histogram",
            ]
            for (m, r), h in sorted(self.latency.items()):
                lab = f'method="{m}",route="{r}"'
                out += [
                    f'xmemory_request_seconds_bucket{{{lab},le="{b}"}} {int(h[i])}'
                    for i, b in enumerate(BUCKETS)
                ]
                out += [
                    f'xmemory_request_seconds_bucket{{{lab},le="+Inf"}} {int(h[-1])}',
                    f"xmemory_request_seconds_sum{{{lab}}} {h[-2]:.6f}",
                    f"xmemory_request_seconds_count{{{lab}}} {int(h[-1])}",
                ]
            for name, v in sorted(self.counters.items()):
                out += [f"# TYPE xmemory_{name} counter", f"xmemory_{name} {v:g}"]
            for name, fn in sorted(self.gauges.items()):
                out += [f"# TYPE xmemory_{name} gauge", f"xmemory_{name} {fn():g}"]
        return "\n".join(out) + "\n"
