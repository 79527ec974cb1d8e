"""The default encoder (all-MiniLM-L6-v2: a 6-layer BERT, mean pooling, unit rows) as a plain torch
forward, loaded from the model folder's ``model.safetensors`` and ``tokenizer.json``.

It needs torch, ``tokenizers`` and ``safetensors`` only, not transformers or sentence-transformers,
so a process's first text is embedded about 4 s sooner. On the CPU its dense layers run on
``ops.linear`` (one FMA chain per output: a row depends on its own tokens alone), the rest as the
model's own modules run it (the same torch calls in the same order), so a text's vector has the same
bits as ``SentenceTransformer`` with routed layers gives it (``tests/test_embed_minilm.py`` checks it).
On a GPU (``device="cuda"``) the dense layers are torch's (cuBLAS, float32): the same function, its
last bits those of the GPU's kernels.

A forward takes texts of one token count (no padding: the embedder batches by length), shapes
[B, T] token ids -> [B, 384] float32 unit rows."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..ops.linear import PackedLinear, pack_linear, rowwise_linear

MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json: longer texts are truncated to this


@dataclass(frozen=True)
class BertConfig:
    """The model's ``config.json`` fields the forward uses."""

    hidden: int
    heads: int
    layers: int
    eps: float

    @classmethod
    def read(cls, folder: Path) -> BertConfig:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
            raise ValueError(f"{folder}: expected a BERT model with gelu activations")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{folder}: expected absolute position embeddings")
        return cls(
            int(cfg["hidden_size"]),
            int(cfg["num_attention_heads"]),
            int(cfg["num_hidden_layers"]),
            float(cfg["layer_norm_eps"]),
        )


class WordPieceTokenizer:
    """``tokenizer.json`` on the ``tokenizers`` library: ids with [CLS] / [SEP], truncated to
    ``max_length`` tokens, never padded; called as the transformers tokenizer is called here."""

    def __init__(self, folder: Path, max_length: int) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tok.no_padding()
        self._tok.enable_truncation(max_length)
        self._max_length = max_length
        self._lock = threading.Lock()

    def __call__(self, texts: list[str], truncation: bool = True, max_length: int | None = None) -> dict:
        if max_length is not None and max_length != self._max_length:
            with self._lock:  # a shared tokenizer: its setting changes under a lock, and rarely
                self._tok.enable_truncation(max_length)
                self._max_length = max_length
        enc = self._tok.encode_batch(list(texts))
        ids = [e.ids for e in enc]
        return {
            "input_ids": ids,
            "token_type_ids": [[0] * len(i) for i in ids],
            "attention_mask": [[1] * len(i) for i in ids],
        }

    def batch_decode(self, ids: list[list[int]], skip_special_tokens: bool = True) -> list[str]:
        return self._tok.decode_batch(ids, skip_special_tokens=skip_special_tokens)


class _Dense:
    """One dense layer on ``ops.linear`` (weights packed once)."""

    def __init__(self, weights: dict[str, Any], prefix: str) -> None:
        self.layer: PackedLinear = pack_linear(
            weights[f"{prefix}.weight"].numpy(), weights[f"{prefix}.bias"].numpy(), backend="cpu"
        )

    def __call__(self, x: Any) -> Any:
        import torch

        y = rowwise_linear(x.reshape(-1, x.shape[-1]).numpy(), self.layer, backend="cpu")
        return torch.from_numpy(y).reshape(*x.shape[:-1], y.shape[1])


class _TorchDense:
    """One dense layer as ``torch.nn.functional.linear`` on the weights' device (cuBLAS on a GPU)."""

    def __init__(self, weights: dict[str, Any], prefix: str) -> None:
        self.weight = weights[f"{prefix}.weight"]
        self.bias = weights[f"{prefix}.bias"]

    def __call__(self, x: Any) -> Any:
        import torch

        return torch.nn.functional.linear(x, self.weight, self.bias)


class MiniLM:
    """The encoder and its tokenizer, in eval mode; ``model(features)["sentence_embedding"]`` and
    ``tokenizer(...)`` as a ``SentenceTransformer`` offers them. ``device``: where the weights live
    and the forward runs (``cpu``: dense layers on ``ops.linear``; else torch's); ``rowwise=False``
    puts a CPU model's dense layers on torch too (as on a GPU: for checking that path without one)."""

    training = False

    def __init__(
        self,
        folder: str | Path,
        max_seq_length: int = MAX_SEQ_LENGTH,
        *,
        device: str = "cpu",
        rowwise: bool | None = None,
    ) -> None:
        import torch
        from safetensors.torch import load_file

        self.device = torch.device(device)
        self.rowwise = self.device.type == "cpu" if rowwise is None else bool(rowwise)
        if self.rowwise and self.device.type != "cpu":
            raise ValueError("the row-wise dense layers (ops.linear) run on the CPU only")
        root = Path(folder)
        self.config = BertConfig.read(root)
        self.max_seq_length = max_seq_length
        self.tokenizer = WordPieceTokenizer(root, max_seq_length)
        w = {k.removeprefix("bert."): v for k, v in load_file(str(root / "model.safetensors")).items()}
        if not self.rowwise:
            w = {k: v.to(self.device) for k, v in w.items()}
        dense = _Dense if self.rowwise else _TorchDense
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.norms = {
            k.removesuffix(".weight"): (v, w[k.replace(".weight", ".bias")])
            for k, v in w.items()
            if "LayerNorm.weight" in k
        }
        self.dense: dict[str, _Dense] = {}
        for i in range(self.config.layers):
            p = f"encoder.layer.{i}."
            for name in (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "intermediate.dense",
                "output.dense",
            ):
                self.dense[p + name] = dense(w, p + name)

    def eval(self) -> MiniLM:
        return self

    def _norm(self, x: Any, name: str) -> Any:
        import torch

        weight, bias = self.norms[name]
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, self.config.eps)

    def _layer(self, h: Any, i: int) -> Any:
        import torch

        p = f"encoder.layer.{i}."
        heads = self.config.heads
        b, t, d = h.shape

        def split(x: Any) -> Any:  # [B, T, D] -> [B, heads, T, D / heads]
            return x.view(b, t, -1, d // heads).transpose(1, 2)

        q = split(self.dense[p + "attention.self.query"](h))
        k = split(self.dense[p + "attention.self.key"](h))
        v = split(self.dense[p + "attention.self.value"](h))
        a = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=0.0, scale=(d // heads) ** -0.5, is_causal=False
        )
        a = a.transpose(1, 2).contiguous().reshape(b, t, -1).contiguous()
        h = self._norm(self.dense[p + "attention.output.dense"](a) + h, p + "attention.output.LayerNorm")
        m = torch.nn.functional.gelu(self.dense[p + "intermediate.dense"](h))
        return self._norm(self.dense[p + "output.dense"](m) + h, p + "output.LayerNorm")

    def __call__(self, features: dict[str, Any]) -> dict[str, Any]:
        """``features["input_ids"]`` [B, T] int64 (no padding) -> ``{"sentence_embedding": [B, H]}``."""
        import torch

        ids = features["input_ids"]
        mask = features.get("attention_mask")
        if mask is not None and not bool(mask.all()):
            raise ValueError("attention_mask: padded batches are not supported (batch texts by length)")
        with torch.inference_mode():
            t = ids.shape[1]
            h = self.word[ids] + self.token_type[torch.zeros_like(ids)]
            h = h + self.position[torch.arange(t, device=ids.device)].unsqueeze(0)
            h = self._norm(h, "embeddings.LayerNorm")
            for i in range(self.config.layers):
                h = self._layer(h, i)
            ones = torch.ones(h.shape[:2], dtype=torch.int64, device=h.device).unsqueeze(-1)
            ones = ones.expand(h.size()).to(h.dtype)
            pooled = torch.sum(h * ones, 1) / torch.clamp(ones.sum(1), min=1e-9)
            return {"sentence_embedding": torch.nn.functional.normalize(pooled, p=2, dim=1)}

    def encode_ids(self, ids: list[list[int]]) -> np.ndarray:
        """[B, H] float32 unit rows for B token-id lists of one length."""
        import torch

        x = torch.tensor(ids, dtype=torch.long, device=self.device)
        return self({"input_ids": x})["sentence_embedding"].cpu().numpy()

    def encode(self, texts: list[str], batch_size: int = 64, **_: Any) -> np.ndarray:
        """[n, H] float32 unit rows, texts batched by token count (``SentenceTransformer.encode``'s
        call form; its other keywords are accepted and need nothing here)."""
        ids = self.tokenizer(list(texts))["input_ids"]
        out = np.empty((len(ids), self.config.hidden), np.float32)
        by_length: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            by_length.setdefault(len(row), []).append(i)
        for rows in by_length.values():
            for start in range(0, len(rows), batch_size):
                part = rows[start : start + batch_size]
                out[part] = self.encode_ids([ids[i] for i in part])
        return out
