"""A measured value that changed ("the response time has decreased to 120ms" after "it is currently
at 180ms"): ``construct.supersede``'s measure kinds, their change words, and the closer cosine they
need (``MEASURE_THRESHOLD``)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from xmemory_gpu.construct.supersede import (
    MEASURE_THRESHOLD,
    SPAN_THRESHOLD,
    THRESHOLD,
    attributes,
    changes,
    supersessions,
)

OLD = "the user measured the login API response time and it is currently at 180ms under load"
NEW = "the user optimized the login API, and the response time has decreased to 120ms under load"


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        (NEW, {"duration"}),
        (OLD, {"duration"}),
        ("the user's batch job is currently averaging around 140MB per run", {"data size"}),
        ("the API's new rate limit is 120 requests per minute", {"rate"}),
        ("test coverage went up to 90% this week", {"share"}),
        ("the user wants to reduce it to 100ms", set()),  # an intent: nothing changed yet
        ("if the latency dropped to 100ms, the user would ship it", set()),  # a condition
        ("the response time decreased a lot", set()),  # no measured value
        ("the p99 latency has increased to 1,500ms", {"duration"}),  # a thousands separator
        ("the user now listens to 80s music", set()),  # a decade
        ("the user has been using the Fitbit for 9 months now", {"span"}),
        ("the user has now been sober for 40 days", {"span", "schedule"}),  # "days" is a schedule word too
        ("the user started yoga 3 months ago", set()),  # dates, not spans
        ("the user joined a running club 3 weeks back now", set()),
        ("the user is now starting a painting class in 3 weeks", set()),
        ("the response now comes in 200ms", {"duration"}),  # "in" before a duration is no date
    ],
)
def test_what_says_a_measured_value_changed(text, kinds):
    assert changes(text, "user") == frozenset(kinds)


def _x(cos: float) -> np.ndarray:
    """Two unit rows whose cosine is ``cos``."""
    return np.array([[1.0, 0.0], [cos, (1 - cos * cos) ** 0.5]], np.float32)


def test_a_newer_value_supersedes_the_older_of_one_metric():
    sup = supersessions([OLD, NEW], _x(0.8), np.array([0, 1]), ["user", "user"])
    assert sup == {0: 1}


def test_a_measured_change_needs_one_metric():
    low = (THRESHOLD + MEASURE_THRESHOLD) / 2  # close enough for a job or a home, not for a value
    assert supersessions([OLD, NEW], _x(low), np.array([0, 1]), ["user", "user"]) == {}
    size = "the user measured the login API's memory use and it is currently at 250MB under load"
    assert supersessions([size, NEW], _x(0.9), np.array([0, 1]), ["user", "user"]) == {}  # another kind
    assert supersessions([OLD, NEW], _x(0.9), np.array([0, 1]), ["user", "Bob"]) == {}  # another speaker


def test_a_span_of_days_to_years_supersedes_only_at_the_closer_cosine():
    """How long one thing has lasted changes ("for 9 months now" after "for 6 months now"); another
    activity of the same sentence shape ("learning French" after "learning Spanish", cosine 0.76 with
    the default embedder) is no change of it."""
    old = "the user has been using the Fitbit Charge 3 for 6 months now"
    new = "the user has been using the Fitbit Charge 3 for 9 months now"
    assert supersessions([old, new], _x(0.9), np.array([0, 1]), ["user", "user"]) == {0: 1}
    between = (MEASURE_THRESHOLD + SPAN_THRESHOLD) / 2
    assert supersessions([old, new], _x(between), np.array([0, 1]), ["user", "user"]) == {}
    spanish = "the user has been learning Spanish for 2 years"
    french = "the user has been learning French for 6 months now"
    assert supersessions([spanish, french], _x(0.76), np.array([0, 1]), ["user", "user"]) == {}


def test_a_long_run_of_numbers_is_read_in_linear_time():
    text = "the latency is now 5ms and the samples are " + "1," * 50_000
    t0 = time.process_time()
    assert "duration" in attributes(text, "user")
    changes(text, "user")
    assert time.process_time() - t0 < 5.0  # linear: well under a second; quadratic: minutes
