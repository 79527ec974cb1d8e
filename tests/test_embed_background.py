"""The sentence-transformers embedder's model loads once per process, in the background: ``warm_up``
returns before the load ends, ``encode`` waits for it, a failed load is an error naming the model
on ``encode``, two embedders of one model and device share one load, and ``dim`` / ``name`` are
known from the model's configuration without loading it. A fake loader stands in for the model;
events order the threads (no timing). Each embedder checks its own declared width against the
shared model; a load cut short (``KeyboardInterrupt``) is loaded afresh later; a child forked while
a model loads loads it itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from xmemory_gpu.embed import EmbedderLoadError, background, warm_up
from xmemory_gpu.embed import sentence_transformers as st
from xmemory_gpu.embed.background import ModelLoad

ROOT = Path(__file__).resolve().parents[1]
DIM = 8
JOIN_S = 120  # a safety net for a broken implementation, never reached when it works


class FakeTokenizer:
    def __call__(self, texts, truncation=True, max_length=16):
        ids = [[101, *(ord(c) % 50 for c in t[: max_length - 2]), 102] for t in texts]
        return {"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]}


class FakeModel:
    training = False
    max_seq_length = 16
    device = "cpu"
    tokenizer = FakeTokenizer()


class FakeLoader:
    """``load_model``'s stand-in: counts its calls, notes its thread, waits for ``release`` when
    gated, raises ``error`` when given one."""

    def __init__(self, *, gated: bool = False, error: BaseException | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.threads: list[int] = []
        self.loading = threading.Event()
        self.release = threading.Event()
        if not gated:
            self.release.set()
        self.error = error

    def __call__(self, spec: str, device: str) -> st.LoadedModel:
        self.calls.append((spec, device))
        self.threads.append(threading.get_ident())
        self.loading.set()
        assert self.release.wait(JOIN_S)
        if self.error is not None:
            raise self.error
        return st.LoadedModel(FakeModel(), DIM, rowwise=True, direct=True)


def _fake_forward(e: st.SentenceTransformerEmbedder) -> st.SentenceTransformerEmbedder:
    # one forward: each text's token ids, repeated to DIM, as its row (deterministic, no torch)
    e.forward_tokens = lambda tokens: np.stack(
        [np.resize(np.asarray(ids, np.float32), DIM) for ids in tokens["input_ids"]]
    )
    return e


def _embedder(name: str, device: str = "cpu") -> st.SentenceTransformerEmbedder:
    return _fake_forward(st.SentenceTransformerEmbedder(name, device=device))


@pytest.fixture
def name(request, tmp_path) -> str:
    """A model name of this test alone (the shared loads are keyed by name)."""
    return f"fake-{request.node.name}-{tmp_path.name}"


def test_warm_up_returns_before_the_load_and_encode_waits_for_it(monkeypatch, name):
    loader = FakeLoader(gated=True)
    monkeypatch.setattr(st, "load_model", loader)
    e = _embedder(name)
    assert e.load_state == "idle"
    e.warm_up()  # returns while the loader is held
    assert loader.loading.wait(JOIN_S)  # it runs, in another thread
    assert e.load_state == "loading"
    assert loader.threads == [loader.threads[0]] and loader.threads[0] != threading.get_ident()
    assert not e._load.ready
    out: list[np.ndarray] = []
    waiter = threading.Thread(target=lambda: out.append(e.encode(["I moved to Lisbon.", "hi"])))
    waiter.start()
    assert not out  # the loader still holds: encode cannot have returned
    loader.release.set()
    waiter.join(JOIN_S)
    assert not waiter.is_alive() and out[0].shape == (2, DIM) and e.load_state == "ready"
    np.testing.assert_allclose(np.linalg.norm(out[0], axis=1), 1.0, rtol=1e-6)
    assert loader.calls == [(name, "cpu")]


def test_encode_without_warm_up_loads_in_the_calling_thread(monkeypatch, name):
    loader = FakeLoader()
    monkeypatch.setattr(st, "load_model", loader)
    e = _embedder(name)
    assert e.encode(["ok"]).shape == (1, DIM)
    assert loader.threads == [threading.get_ident()]


def test_a_failed_background_load_surfaces_on_encode(monkeypatch, name):
    loader = FakeLoader(error=OSError("model.safetensors: no such file"))
    monkeypatch.setattr(st, "load_model", loader)
    e = _embedder(name)
    e.warm_up()  # does not raise: the load fails in its thread
    for _ in range(2):  # every later call gets the same error; the load is not retried
        with pytest.raises(
            EmbedderLoadError,
            match=rf"embedder '{name}' on cpu: loading the model failed: OSError: model.safetensors: no such file",
        ):
            e.encode(["hello"])
    assert len(loader.calls) == 1 and e.load_state == "failed"
    assert isinstance(EmbedderLoadError("x"), RuntimeError)  # the CLI's one-line errors catch it


def test_two_embedders_of_one_model_share_one_load(monkeypatch, name):
    loader = FakeLoader(gated=True)
    monkeypatch.setattr(st, "load_model", loader)
    a, b = _embedder(name), _embedder(name)
    a.warm_up()
    b.warm_up()
    assert loader.loading.wait(JOIN_S)
    loader.release.set()
    np.testing.assert_array_equal(a.encode(["same text"]), b.encode(["same text"]))
    assert a.model is b.model and loader.calls == [(name, "cpu")]
    other = _embedder(name, device="meta")  # another device: its own load
    other.encode(["x"])
    assert loader.calls == [(name, "cpu"), (name, "meta")] and other.model is not a.model


def test_concurrent_first_calls_run_the_loader_once():
    calls = []
    go = threading.Event()

    def loader() -> str:
        calls.append(1)
        return "model"

    load = ModelLoad("'m' on cpu", loader)
    got: list[str] = []

    def call() -> None:
        go.wait(JOIN_S)
        got.append(load.result())

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    load.start()
    go.set()
    for t in threads:
        t.join(JOIN_S)
    assert got == ["model"] * 8 and calls == [1]


def _model_folder(root: Path, pooling: dict, modules: list[str] | None = None) -> Path:
    kinds = modules or [
        "sentence_transformers.models.Transformer",
        "sentence_transformers.models.Pooling",
        "sentence_transformers.models.Normalize",
    ]
    paths = {"Transformer": "", "Pooling": "1_Pooling", "Normalize": "2_Normalize"}
    entries = [
        {"idx": i, "name": str(i), "path": paths.get(k.rsplit(".", 1)[-1], f"{i}_X"), "type": k}
        for i, k in enumerate(kinds)
    ]
    root.mkdir(parents=True)
    (root / "modules.json").write_text(json.dumps(entries))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return root


def test_dim_and_name_come_from_the_configuration_without_loading(monkeypatch, tmp_path):
    loader = FakeLoader()
    monkeypatch.setattr(st, "load_model", loader)
    legacy = _model_folder(
        tmp_path / "legacy",
        {"word_embedding_dimension": DIM, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False},
    )
    e = _embedder(str(legacy))
    assert (e.name, e.dim) == (str(legacy), DIM) and loader.calls == []
    new = _model_folder(tmp_path / "new", {"embedding_dimension": 4, "pooling_mode": ["mean", "max"]})
    assert st.configured_dim(new) == 8
    dense = _model_folder(
        tmp_path / "dense",
        {"embedding_dimension": 4, "pooling_mode": "mean"},
        ["x.Transformer", "x.Pooling", "sentence_transformers.models.Dense"],
    )
    assert st.configured_dim(dense) is None  # a Dense layer changes the width: the model tells
    assert st.configured_dim(tmp_path / "nothing") is None
    assert st.configured_dim(st.default_model_path()) == 384


def test_a_model_wider_than_its_configuration_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(st, "load_model", FakeLoader())  # loads DIM-wide vectors
    folder = _model_folder(tmp_path / "m", {"embedding_dimension": DIM * 2, "pooling_mode": "mean"})
    e = _embedder(str(folder))
    assert e.dim == DIM * 2
    with pytest.raises(
        EmbedderLoadError,
        match=f"gives {DIM}-dimensional vectors; its configuration or its store declares {DIM * 2}",
    ):
        e.encode(["x"])


def test_a_store_s_recorded_width_stands_in_for_an_undeclared_one(monkeypatch, name):
    """A hub name has no folder to read: the store's recorded width is the embedder's until the
    model loads, and a model of another width is refused then."""
    from xmemory_gpu.embed import embedder_for_store

    loader = FakeLoader()
    monkeypatch.setattr(st, "load_model", loader)
    e = _fake_forward(embedder_for_store(f"org/{name}", dim=DIM))
    assert (e.name, e.dim, loader.calls) == (f"org/{name}", DIM, [])
    assert e.encode(["x"]).shape == (1, DIM)
    wrong = embedder_for_store(f"org/{name}-wide", dim=DIM + 1)
    assert wrong.dim == DIM + 1
    with pytest.raises(EmbedderLoadError, match=f"gives {DIM}-dimensional vectors"):
        wrong.encode(["x"])


@pytest.mark.parametrize("wrong_first", [True, False])
def test_each_embedder_checks_its_own_width_of_a_shared_model(monkeypatch, name, wrong_first):
    """Two stores of one hub model recording different widths: one load, and only the embedder whose
    width the model does not give fails, whichever asked first."""
    loader = FakeLoader()
    monkeypatch.setattr(st, "load_model", loader)
    hub = f"org/{name}"
    wrong = st.SentenceTransformerEmbedder(hub, expected_dim=DIM * 2)
    right = _fake_forward(st.SentenceTransformerEmbedder(hub, expected_dim=DIM))
    first, second = (wrong, right) if wrong_first else (right, wrong)
    for e in (first, second, first):  # the answer does not depend on the order or on repeats
        if e is wrong:
            with pytest.raises(
                EmbedderLoadError,
                match=re.escape(
                    f"embedder '{hub}' on cpu: the model gives {DIM}-dimensional vectors; "
                    f"its configuration or its store declares {DIM * 2}"
                ),
            ):
                _ = e.loaded
        else:
            assert e.loaded.dim == DIM and e.encode(["x"]).shape == (1, DIM)
    assert (right.dim, wrong.dim) == (DIM, DIM * 2) and loader.calls == [(hub, "cpu")]
    assert (right.load_state, wrong.load_state) == ("ready", "failed")


def test_an_interrupted_load_is_loaded_afresh_on_the_next_call():
    calls: list[int] = []

    def loader() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return "model"

    load = ModelLoad("'m' on cpu", loader)
    with pytest.raises(KeyboardInterrupt):  # the caller that got it, as it is
        load.result()
    assert load.state == "idle" and not load.started
    assert load.result() == "model" and load.state == "ready" and calls == [1, 1]


def test_an_interrupted_background_load_is_taken_over_by_a_waiter(monkeypatch):
    """The load thread cut short re-raises in its own thread; a caller waiting for it loads the model
    itself."""
    loading, release = threading.Event(), threading.Event()
    threads: list[int] = []

    def loader() -> str:
        threads.append(threading.get_ident())
        if len(threads) == 1:
            loading.set()
            assert release.wait(JOIN_S)
            raise SystemExit(3)
        return "model"

    raised: list[type] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_type))
    load = ModelLoad("'m' on cpu", loader)
    load.start()
    assert loading.wait(JOIN_S) and load.state == "loading"
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(load.result()))
    waiter.start()
    release.set()
    waiter.join(JOIN_S)
    assert not waiter.is_alive() and got == ["model"] and load.state == "ready"
    assert len(threads) == 2 and threads[1] == waiter.ident != threads[0]
    assert raised in ([SystemExit], [])  # the load thread's own hook (the default one ignores SystemExit)


def test_an_exception_of_the_loader_is_not_retried():
    calls: list[int] = []

    def loader() -> str:
        calls.append(1)
        raise RuntimeError("no weights")

    load = ModelLoad("'m' on cpu", loader)
    for _ in range(2):
        with pytest.raises(
            EmbedderLoadError, match="'m' on cpu: loading the model failed: RuntimeError: no weights"
        ):
            load.result()
    assert calls == [1] and load.state == "failed"


def _child_loads(load: ModelLoad, key: str) -> None:
    """In a forked child: exit 0 when the unfinished load is loaded afresh here and a shared load can
    be created (fresh locks), else 1; never returns."""
    code = 1
    try:
        got: list[object] = []

        def use() -> None:
            got.append(load.result())
            got.append(background.shared_load(key, "'k' on cpu", lambda: "other").result())

        t = threading.Thread(target=use, daemon=True)
        t.start()
        t.join(JOIN_S)
        code = 0 if got == ["child", "other"] else 1
    finally:
        os._exit(code)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_a_model_loads_loads_it_itself(request):
    parent = os.getpid()
    loading, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def loader() -> str:
        if os.getpid() != parent:
            return "child"
        calls.append(1)
        loading.set()
        assert release.wait(JOIN_S)
        return "parent"

    load = ModelLoad("'m' on cpu", loader)
    load.start()
    assert loading.wait(JOIN_S)
    key = f"fork-{request.node.name}"
    try:
        with background._LOADS_LOCK, load._lock:  # locks held by the forking thread stay usable in the child
            pid = os.fork()
            if pid == 0:
                _child_loads(load, key)
        _, status = os.waitpid(pid, 0)  # the child bounds its own wait and always exits
        assert os.waitstatus_to_exitcode(status) == 0
        assert load.state == "loading"  # the parent's load goes on
    finally:
        release.set()
    assert load.result() == "parent" and calls == [1]


def test_warm_up_helper_falls_back_to_one_encode():
    class Plain:
        dim, name = 2, "plain"

        def __init__(self) -> None:
            self.texts: list[str] = []

        def encode(self, texts):
            self.texts += texts
            return np.ones((len(texts), 2), np.float32)

    p = Plain()
    warm_up(p)
    assert p.texts == ["warm up"]


def test_the_default_embedder_is_named_and_sized_without_importing_torch():
    """Constructing the default embedder (and importing the engine) loads no model: a fresh process
    knows its name and width with torch and sentence-transformers not imported."""
    code = (
        "import sys\n"
        "import xmemory_gpu.engine\n"
        "from xmemory_gpu.embed import load_embedder\n"
        "e = load_embedder('all-MiniLM-L6-v2')\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "print(e.name, e.dim, heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "all-MiniLM-L6-v2 384 []"
