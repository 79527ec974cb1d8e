"""Hashed word features (ops/features): both backends give the counts of the rule as first written
(each word unigram and bigram's BLAKE2b-64 bucket and sign, added one by one) on fresh random texts
with the characters the word rule splits on, the C++ counter reads the words Python gives it (a text's
word runs) and its BLAKE2b is hashlib's on every block size."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.features import cpu as features_cpu
from xmemory_gpu.ops.features import feature_counts
from xmemory_gpu.ops.features import reference as features_reference
from xmemory_gpu.text import words

BACKENDS = [b for b in ("reference", "cpu") if available_backends()[b].available]
needs_cpu = pytest.mark.skipif("cpu" not in BACKENDS, reason="the C++ module is not built")

_PIECES = [
    "dog",
    "Dog",
    "DOG",
    "it's",
    "Caroline's",
    "2nd-hand",
    "well--",
    "'quoted'",
    "-dash",
    "a'b-c'",
    "x",
    "café",
    "naïve",
    "漢字",
    "\U0001f600",
    "\x00",
    "e\u0301",
    "İstanbul",
    "\ud800",
    "12:30",
    "3.5kg",
    "U.S.A.",
    "co-op's-",
    "o'-",
    "_under_",
    "tab\tsep",
    "new\nline",
    "z" * 140,
    "a" * 127 + "-b",
]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    seps = [" ", "  ", ", ", ". ", "! ", "?", "-", "'", "/", "\u00a0", "\u2019"]
    return [
        "".join(str(rng.choice(_PIECES)) + str(rng.choice(seps)) for _ in range(int(rng.integers(0, 25))))
        for _ in range(n)
    ]


def _loop(texts: list[str], dim: int) -> np.ndarray:
    """The rule as first written: each feature's bucket and sign from hashlib, added in turn."""
    out = np.zeros((len(texts), dim))
    for r, text in enumerate(texts):
        w = words(text)
        for f in w + [a + " " + b for a, b in zip(w, w[1:])]:
            h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
            out[r, h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    return out


@pytest.fixture(autouse=True)
def _cold_memos():
    """Each test starts with no bucket remembered (the memos live for the process, per dim)."""
    features_reference._SIGNED.clear()
    features_cpu._COUNTERS.clear()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [2, 37, 384])
def test_counts_are_the_per_feature_loop(backend, dim):
    rng = np.random.default_rng(dim)
    texts = _texts(rng, 200) + ["", "   ", "dog", "the the the", "dog dog", "\ud800\udc00 pair"]
    want = _loop(texts, dim)
    for _ in range(2):  # buckets computed, then remembered
        got = feature_counts(texts, dim, backend=backend)
        assert got.dtype == np.float64 and got.shape == (len(texts), dim)
        np.testing.assert_array_equal(got, want)
    assert feature_counts([], dim, backend=backend).shape == (0, dim)


@needs_cpu
def test_the_backends_agree_on_long_texts_and_subclassed_strings():
    rng = np.random.default_rng(5)
    texts = [" ".join(_texts(rng, 40)) for _ in range(20)] + [np.str_("Dog and Cat")]
    np.testing.assert_array_equal(
        feature_counts(texts, 384, backend="cpu"), feature_counts(texts, 384, backend="reference")
    )


@needs_cpu
def test_blake2b64_is_hashlibs_on_every_block_size():
    from xmemory_gpu import _C

    rng = np.random.default_rng(0)
    for n in [0, 1, 7, 8, 9, 63, 64, 65, 111, 127, 128, 129, 255, 256, 257, 383, 384, 385, 1000]:
        for _ in range(3):
            data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            assert _C.blake2b64(data) == int.from_bytes(
                hashlib.blake2b(data, digest_size=8).digest(), "little"
            ), n


@needs_cpu
def test_the_counter_reads_the_words_it_is_given():
    """The C++ counter takes each text's words as bytes separated by spaces (``text.word_runs``): any
    run of spaces between them, none before or after; anything else is refused naming the item."""
    from xmemory_gpu import _C
    from xmemory_gpu.text import word_runs

    counter = _C.FeatureCounter(53)
    want = _loop(["dog cat bird", "", "it's"], 53)
    np.testing.assert_array_equal(counter.counts([b"  dog cat   bird ", b"   ", b"it's"]), want)
    np.testing.assert_array_equal(
        counter.counts([word_runs("Dog, cat; bird!"), word_runs("' -- '"), word_runs("'it's'")]), want
    )
    with pytest.raises(TypeError, match=r"runs\[1\]: expected bytes"):
        counter.counts([b"dog", "cat"])


@needs_cpu
def test_concurrent_calls_count_alike():
    """One counter per dim is shared (its bucket memo locked): threads get the counts of a lone call."""
    rng = np.random.default_rng(9)
    batches = [_texts(rng, 60) for _ in range(8)]
    want = [_loop(b, 53) for b in batches]
    got: list[np.ndarray | None] = [None] * len(batches)

    def run(i: int) -> None:
        got[i] = feature_counts(batches[i], 53, backend="cpu")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_the_reference_memo_stops_at_its_bound(monkeypatch):
    monkeypatch.setattr(features_reference, "MAX_CACHED", 5)
    rng = np.random.default_rng(4)
    texts = _texts(rng, 50)
    np.testing.assert_array_equal(feature_counts(texts, 41, backend="reference"), _loop(texts, 41))
    assert len(features_reference._SIGNED[41]) == 5
    np.testing.assert_array_equal(feature_counts(texts, 41, backend="reference"), _loop(texts, 41))


_FORK_WHILE_COUNTING = """
import os, signal, threading, time
import numpy as np
from xmemory_gpu.ops.features import feature_counts
big = [" ".join(f"word{i % 997} w{i % 89}-x" for i in range(40000))] * 300  # quick to hand over, seconds to count
busy = threading.Thread(target=feature_counts, args=(big, 64), kwargs={"backend": "cpu"})
busy.start()
time.sleep(0.3)  # the thread is counting: the counter's lock held, the GIL released
pid = os.fork()
if pid == 0:
    signal.alarm(20)
    os._exit(0 if feature_counts(["a dog"], 64, backend="cpu").any() else 2)
_, status = os.waitpid(pid, 0)
busy.join()
print("child", os.waitstatus_to_exitcode(status))
"""


@needs_cpu
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_a_thread_counts_counts_too():
    """A fork while another thread holds the counter's lock: the child counts with a new counter
    instead of waiting on the inherited lock for ever (in a process of its own, not the test's)."""
    out = subprocess.run(
        [sys.executable, "-c", _FORK_WHILE_COUNTING], capture_output=True, text=True, timeout=1800
    )  # a hang guard: seconds of counting, minutes on a loaded machine
    assert out.stdout.strip() == "child 0", out.stdout + out.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_names_the_argument(backend):
    with pytest.raises(ValueError, match="dim: expected an integer >= 2"):
        feature_counts(["a"], 1, backend=backend)
    with pytest.raises(ValueError, match="below 2"):
        feature_counts(["a"], 2**63, backend=backend)
    with pytest.raises(ValueError, match="dim"):
        feature_counts(["a"], True, backend=backend)
    with pytest.raises(TypeError, match="texts: expected a sequence of str"):
        feature_counts("a dog", 8, backend=backend)
    with pytest.raises(TypeError, match=r"texts\[1\]: expected a str, got int"):
        feature_counts(["a", 3], 8, backend=backend)
    with pytest.raises(ValueError, match="triton"):
        feature_counts(["a"], 8, backend="triton")
