"""The reader interface: batched greedy generation and uncertainty, with token accounting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

UNCERTAINTY_KINDS = ("entropy", "mean_nll")


@dataclass
class Uncertainty:
    """Uncertainty of one prompt's greedy continuation (``n_tokens`` steps, or up to EOS).

    ``value``: the mean of ``token_entropy`` (kind "entropy": the paper's wording) or of
    ``-token_logprob`` (kind "mean_nll": the authors' code), in nats."""

    value: float
    kind: str
    token_entropy: list[float]
    token_logprob: list[float]
    token_ids: list[int]
    prompt_tokens: int
    estimated: bool = False  # True when computed from top-k logprobs only (HTTP backends)


@dataclass
class Generation:
    texts: list[str]
    prompt_tokens: list[int]
    output_tokens: list[int]


@dataclass
class Usage:
    """Calls and tokens a reader has spent (prompt + output)."""

    calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_prompt_tokens: int = (
        0  # prompt tokens served from a shared prefix's KV cache (counted in prompt_tokens too)
    )
    by_purpose: dict[str, list[int]] = field(default_factory=dict)  # purpose -> [calls, prompt, output]

    def add(self, purpose: str, calls: int, prompt: int, output: int) -> None:
        self.calls += calls
        self.prompt_tokens += prompt
        self.output_tokens += output
        c = self.by_purpose.setdefault(purpose, [0, 0, 0])
        c[0] += calls
        c[1] += prompt
        c[2] += output


def chat_prompt(tokenizer, user: str) -> str:
    """``user`` as one user turn in a transformers tokenizer's chat template (as is without one)."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
    return user


def count_tokens(tokenizer, texts: list[str]) -> list[int]:
    """Tokens per text in a transformers tokenizer, special tokens left out."""
    return (
        [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]] if texts else []
    )


class Reader(Protocol):
    name: str
    usage: Usage

    def chat(self, user: str) -> str:
        """The prompt string for one user message (the model's chat template when it has one)."""
        ...

    def count(self, texts: list[str]) -> list[int]: ...

    def generate(
        self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate"
    ) -> Generation: ...

    def uncertainty(
        self, prompts: list[str], n_tokens: int = 20, kind: str = "mean_nll", purpose: str = "uncertainty"
    ) -> list[Uncertainty]: ...
