"""The OpenVINO embedder (optional extra ``openvino``): the sentence-transformers rows within float32
noise on real LoCoMo texts, unit rows, repeats embedded once, rows independent of the rest of the call
(and of the thread count and performance hint), the IR cache, and a one-line error without openvino."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.embed import embedder_for_store, encode_queries, load_embedder

needs_openvino = pytest.mark.skipif(
    importlib.util.find_spec("openvino") is None, reason="openvino is not installed"
)


def _chat_texts(rng: np.random.Generator, n: int) -> list[str]:
    words = (
        "I went to the park with my dog yesterday and it rained a lot so we came back early "
        "Caroline said her support group meets on Tuesdays at the library near the station"
    ).split()
    return [
        f"{rng.choice(['Caroline', 'Melanie'])}: " + " ".join(rng.choice(words, int(rng.integers(1, 60))))
        for _ in range(n)
    ]


def _locomo_texts(path: Path, n: int) -> list[str]:
    """``n`` messages spread over the dev split (every conversation)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [
        turn["text"]
        for conv in data
        for key, turns in conv["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
    ]
    return texts[:: max(1, len(texts) // n)][:n]


@pytest.fixture(scope="module")
def ov():
    return load_embedder("openvino")


@pytest.fixture(scope="module")
def st():
    return load_embedder("all-MiniLM-L6-v2")


@needs_openvino
def test_rows_match_sentence_transformers_on_locomo_texts(ov, st, locomo_path):
    """Same tokenizer, truncation (256 word pieces), mean pooling and normalisation as sentence-
    transformers, in float32: measured min cosine 0.9999998, max |diff| 3.9e-7 on the 3,435 dev
    messages (the bound below leaves margin for other CPUs' kernels)."""
    texts = _locomo_texts(locomo_path, 400) + [
        "x " * 600,
        "",
        "  padded  ",
        "Émile's café, naïve 😀",
    ]  # truncated, empty, odd
    a, b = ov.encode(texts), st.encode(texts)
    assert a.shape == b.shape == (len(texts), 384) and a.dtype == np.float32
    assert (a * b).sum(1).min() >= 1 - 1e-6
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert ov.max_seq_length == st.model.max_seq_length == 256
    assert ov.compiled.get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"


@needs_openvino
def test_unit_rows_and_repeats_embedded_once(ov):
    calls = []
    real = ov._run
    ov._run = lambda batches: calls.extend(batches) or real(batches)
    try:
        texts = [
            "Melanie paints sunsets.",
            "hi",
            "Melanie paints sunsets.",
            "Caroline went to a support group.",
            "hi",
        ]
        x = ov.encode(texts)
    finally:
        del ov._run
    fed = sorted(tuple(row) for b in calls for row in b["input_ids"].tolist())
    assert len(fed) == len(set(fed)) == 3  # each distinct text once, and no filler rows
    assert all(b["attention_mask"].all() for b in calls)  # one token count per batch: nothing padded
    assert x.shape == (5, ov.dim)
    np.testing.assert_array_equal(x[0], x[2])
    np.testing.assert_array_equal(x[1], x[4])
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(x[3], ov.encode(["Caroline went to a support group."])[0])


@needs_openvino
def test_rows_do_not_depend_on_the_rest_of_the_call(ov):
    """A text alone, among a few or among many gives the bit-identical row (same rule as
    tests/test_embed.py), with no filler: OpenVINO's rows for one token count do not depend on the
    batch size. Padding would change them, hence one token count per batch."""
    rng = np.random.default_rng(7)
    long = [
        " ".join(rng.choice(["the", "support", "group", "painting", "Caroline"], int(n)))
        for n in rng.integers(60, 300, 30)
    ]
    texts = _chat_texts(rng, 150) + long  # 4 to 256 tokens (the longest truncated)
    bulk = ov.encode(texts)
    i = 0
    while i < len(texts):
        n = int(rng.integers(1, 8))
        np.testing.assert_array_equal(
            ov.encode(texts[i : i + n]), bulk[i : i + n], err_msg=f"rows {i}..{i + n}"
        )
        i += n
    np.testing.assert_array_equal(ov.encode(texts[::-1]), bulk[::-1])
    small = load_embedder("openvino", batch_size=3)
    np.testing.assert_array_equal(small.encode(texts), bulk)


@needs_openvino
def test_rows_do_not_depend_on_threads_or_performance_hint(ov):
    """A machine with more cores, or the THROUGHPUT hint (several streams), gives the same rows."""
    from xmemory_gpu.embed.openvino import OpenVINOEmbedder

    texts = _chat_texts(np.random.default_rng(11), 80)
    want = ov.encode(texts)
    for e in (
        OpenVINOEmbedder(num_threads=1),
        OpenVINOEmbedder(num_threads=4),
        OpenVINOEmbedder(performance_hint="THROUGHPUT"),
    ):
        np.testing.assert_array_equal(e.encode(texts), want)


@needs_openvino
def test_empty_input_and_queries(ov):
    assert ov.encode([]).shape == (0, 384) and ov.encode_queries([]).shape == (0, 384)
    q = "When did Caroline go to the support group?"
    np.testing.assert_array_equal(encode_queries(ov, [q]), ov.encode([q]))  # a lone query: no padding
    qs = [q, "hi", "What does Melanie paint, and where did she see the sunset she painted last summer?"]
    np.testing.assert_allclose(
        encode_queries(ov, qs), ov.encode(qs), atol=1e-5
    )  # padded batch: float32 noise


@needs_openvino
def test_store_name_and_reload(ov):
    assert (
        ov.name == "ov:all-MiniLM-L6-v2"
    )  # not the torch embedder's name: rows are close, not bit-identical
    again = embedder_for_store(ov.name)
    assert type(again) is type(ov) and again.name == ov.name
    texts = _chat_texts(np.random.default_rng(5), 20)
    np.testing.assert_array_equal(again.encode(texts), ov.encode(texts))


@needs_openvino
def test_converted_model_is_cached_and_rows_do_not_depend_on_the_cache(tmp_path, monkeypatch, ov):
    """The run that converts (cache empty, or no cache) gives the same rows as later runs that read
    the cached IR (a model straight from convert_model differs in the last bit: it is always read
    back from an IR)."""
    from xmemory_gpu.embed import openvino as mod

    first = mod.OpenVINOEmbedder(cache_dir=tmp_path)
    (entry,) = list(tmp_path.iterdir())
    assert sorted(p.name for p in entry.iterdir()) == ["model.bin", "model.xml", "source.json"]
    no_cache = mod.OpenVINOEmbedder(cache_dir=None)
    assert list(tmp_path.iterdir()) == [entry]
    monkeypatch.setattr(
        mod, "_convert", lambda *a: pytest.fail("converted again instead of reading the cache")
    )
    second = mod.OpenVINOEmbedder(cache_dir=tmp_path)
    texts = _chat_texts(np.random.default_rng(9), 30)
    want = ov.encode(texts)
    for e in (first, no_cache, second):
        np.testing.assert_array_equal(e.encode(texts), want)


@pytest.mark.parametrize("spec", ["openvino", "ov:all-MiniLM-L6-v2"])
def test_one_line_error_without_openvino(monkeypatch, spec):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino -> ImportError
    with pytest.raises(ValueError, match=r"needs the package openvino \(pip install") as info:
        load_embedder(spec)
    assert "\n" not in str(info.value)


def test_bad_openvino_spec():
    with pytest.raises(ValueError, match="no model folder"):
        load_embedder("ov:/no/such/model")


needs_nncf = pytest.mark.skipif(
    importlib.util.find_spec("openvino") is None or importlib.util.find_spec("nncf") is None,
    reason="openvino and nncf are not installed",
)


@pytest.fixture(scope="module")
def ov8_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("ov8")


@pytest.fixture(scope="module")
def ov8(ov8_cache):
    """The int8 embedder, quantised once into a fresh cache (about 25 s on 2 cores)."""
    from xmemory_gpu.embed.openvino import OpenVINOEmbedder

    return OpenVINOEmbedder(int8=True, cache_dir=ov8_cache)


@needs_nncf
def test_int8_rows_close_to_float32_on_locomo_texts(ov8, ov, locomo_path):
    """int8 weights and activations: measured on the 3,435 dev messages and a third of the statements,
    cosine to the float32 rows mean 0.9963, 1st percentile 0.984, min 0.908; the dev split's evidence
    recall moved by at most 0.002 (benchmarks/RESULTS.md). The bounds leave margin for other CPUs."""
    texts = _locomo_texts(locomo_path, 400)
    cos = (ov8.encode(texts) * ov.encode(texts)).sum(1)
    assert cos.mean() >= 0.99 and np.percentile(cos, 1) >= 0.95 and cos.min() >= 0.8, (cos.mean(), cos.min())
    assert ov8.name == "ov-int8:all-MiniLM-L6-v2" and embedder_for_store(ov8.name).name == ov8.name
    kinds = {op.get_type_name() for op in ov8._ir.get_ops()}
    assert "FakeQuantize" in kinds  # quantised, not the float32 graph under another name


@needs_nncf
def test_int8_rows_do_not_depend_on_the_rest_of_the_call(ov8):
    rng = np.random.default_rng(3)
    texts = _chat_texts(rng, 120)
    bulk = ov8.encode(texts)
    for i in range(0, len(texts), 7):
        np.testing.assert_array_equal(ov8.encode(texts[i : i + 7]), bulk[i : i + 7])
    np.testing.assert_array_equal(ov8.encode([texts[5]])[0], bulk[5])


@needs_nncf
def test_int8_model_is_quantised_once_and_deterministically(ov8, ov8_cache, monkeypatch):
    """The quantised IR is cached beside the float32 one; a second load reads it; quantising again
    from scratch (no cache) gives the same rows: the calibration corpus is fixed, not the user's data."""
    from xmemory_gpu.embed import openvino as mod

    entries = sorted(p.name for p in ov8_cache.iterdir())
    assert len(entries) == 2 and entries[1].startswith(
        f"{entries[0]}-int8-"
    )  # the float32 IR, then the int8 one
    texts = _chat_texts(np.random.default_rng(4), 40)
    want = ov8.encode(texts)
    fresh = mod.OpenVINOEmbedder(int8=True, cache_dir=None)
    np.testing.assert_array_equal(fresh.encode(texts), want)
    monkeypatch.setattr(
        mod, "_quantize", lambda *a: pytest.fail("quantised again instead of reading the cache")
    )
    again = mod.OpenVINOEmbedder(int8=True, cache_dir=ov8_cache)
    np.testing.assert_array_equal(again.encode(texts), want)
    assert sorted(p.name for p in ov8_cache.iterdir()) == entries


@needs_openvino
def test_one_line_error_without_nncf(monkeypatch, tmp_path):
    """Reported before anything is converted, with a cache (the int8 key needs nncf's version) or without."""
    monkeypatch.setitem(sys.modules, "nncf", None)
    from xmemory_gpu.embed import openvino as mod

    monkeypatch.setattr(
        mod, "_convert", lambda *a: pytest.fail("converted before reporting the missing package")
    )
    for cache in (tmp_path, None):
        with pytest.raises(ValueError, match=r"needs the package nncf \(pip install") as info:
            mod.OpenVINOEmbedder(int8=True, cache_dir=cache)
        assert "\n" not in str(info.value)


@needs_openvino
def test_conversion_and_quantisation_start_their_telemetry_declined(monkeypatch):
    """openvino-telemetry decides consent when a tool starts; it declines when it sees a CI run, which
    ``_no_telemetry`` makes it see (checked on the decision itself, not on the process-wide client,
    which keeps its first decision); the caller's environment is restored after."""
    from openvino_telemetry.utils.opt_in_checker import OptInChecker

    from xmemory_gpu.embed.openvino import _no_telemetry

    for var in ("CI", "TF_BUILD", "JENKINS_URL"):
        monkeypatch.delenv(var, raising=False)
    assert not OptInChecker._run_in_ci()
    with _no_telemetry():
        assert OptInChecker._run_in_ci()
    assert "CI" not in os.environ
    monkeypatch.setenv("CI", "false")
    with _no_telemetry():
        assert os.environ["CI"] == "true"
    assert os.environ["CI"] == "false"


@needs_nncf
@pytest.mark.parametrize(
    "damage", ["truncated weights", "garbage graph", "damaged source.json", "missing weights"]
)
def test_a_damaged_int8_cache_entry_is_rebuilt_and_replaced(ov8, ov8_cache, tmp_path, monkeypatch, damage):
    """A damaged cached int8 IR is not fatal: the open quantises again and replaces the entry, and the
    open after reads the repaired entry. (The quantiser is stubbed: the float32 model stands in.)"""
    import shutil

    from xmemory_gpu.embed import openvino as mod

    for entry in ov8_cache.iterdir():
        shutil.copytree(entry, tmp_path / entry.name)
    (int8,) = [p for p in tmp_path.iterdir() if "-int8-" in p.name]
    if damage == "truncated weights":
        with (int8 / "model.bin").open("r+b") as fh:
            fh.truncate((int8 / "model.bin").stat().st_size // 2)
    elif damage == "garbage graph":
        (int8 / "model.xml").write_text("<net><layers", encoding="utf-8")
    elif damage == "damaged source.json":
        (int8 / "source.json").write_text("{", encoding="utf-8")
    else:
        (int8 / "model.bin").unlink()
    calls = []
    monkeypatch.setattr(mod, "_quantize", lambda model, tokenize: calls.append(1) or model)
    first = mod.OpenVINOEmbedder(int8=True, cache_dir=tmp_path)
    assert calls == [1] and mod._entry_intact(int8)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in ov8_cache.iterdir()
    )  # nothing left aside
    again = mod.OpenVINOEmbedder(int8=True, cache_dir=tmp_path)
    assert calls == [1]  # read from the repaired entry
    texts = ["Melanie paints sunsets.", "Caroline went to a support group."]
    np.testing.assert_array_equal(again.encode(texts), first.encode(texts))


@needs_nncf
def test_a_cached_int8_open_reads_no_float32_ir(ov8, ov8_cache, monkeypatch):
    """The second open of ov-int8 reads the quantised IR only (no conversion, no quantisation)."""
    from xmemory_gpu.embed import openvino as mod

    monkeypatch.setattr(mod, "_convert", lambda *a: pytest.fail("converted"))
    monkeypatch.setattr(mod, "_quantize", lambda *a: pytest.fail("quantised"))
    read = []
    real = mod._cached_ir
    monkeypatch.setattr(
        mod,
        "_cached_ir",
        lambda target, build, source: read.append(target.name) or real(target, build, source),
    )
    mod.OpenVINOEmbedder(int8=True, cache_dir=ov8_cache)
    assert len(read) == 1 and "-int8-" in read[0]
