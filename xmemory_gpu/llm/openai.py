"""Reader over any OpenAI-compatible server (vLLM's server, llama.cpp's server, hosted APIs) through
the legacy ``/v1/completions`` endpoint: raw prompts, greedy (``temperature=0``), top-K logprobs.

Standard library only (``urllib.request``). Prompts go ``batch_size`` to a request (a ``prompt``
list; choices are matched back by ``index``) and up to ``concurrency`` requests run at once in
threads. Each request has a timeout and is retried with exponential backoff and jitter on
timeouts, connection errors, HTTP 429/5xx and malformed responses; after the last attempt
:class:`ReaderHTTPError` says which URL, how many attempts and what was wrong.

Uncertainty: ``mean_nll`` is exact (the server's logprob of each greedy token); ``entropy`` is
estimated from the top-K logprobs (:mod:`.topk_entropy`; an upper bound when the vocabulary size
is known, a lower bound otherwise) and marked ``estimated=True``. ``token_entropy`` is always that
estimate.

Token ids: the ``token_ids`` field of a choice when the server gives one (vLLM >= 0.10.2 with
``return_token_ids``), else tokens of the form ``token_id:N`` (vLLM's
``return_tokens_as_token_ids``), else ``-1`` placeholders, one per generated token. Both vLLM
fields, and ``add_special_tokens=false`` (the prompt is tokenized as is, like the ``hf`` reader),
are sent unless ``vllm_extras=False`` (for servers that reject unknown fields, e.g. OpenAI's).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from .base import UNCERTAINTY_KINDS, Generation, Uncertainty, Usage, chat_prompt, count_tokens
from .topk_entropy import entropy_from_topk

VLLM_EXTRAS = {"return_tokens_as_token_ids": True, "return_token_ids": True, "add_special_tokens": False}


class ReaderHTTPError(RuntimeError):
    """A completions request that failed for good: ``url``, ``attempts`` made, the last ``reason``
    and HTTP ``status`` (``None`` when there was no HTTP answer or it was malformed)."""

    def __init__(self, url: str, attempts: int, reason: str, status: int | None = None) -> None:
        self.url, self.attempts, self.reason, self.status = url, attempts, reason, status
        super().__init__(
            f"POST {url} failed after {attempts} attempt{'s' if attempts != 1 else ''}: {reason}"
        )


class _Retryable(Exception):
    def __init__(self, reason: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.status, self.retry_after = reason, status, retry_after


_Counts = tuple[int, int, int]  # the server's usage: prompt, completion, cached prompt tokens


@dataclass
class _Choice:
    text: str
    token_ids: list[int] | None  # None: the server gave no per-token information
    logprobs: list[float] | None
    top: list[list[float]] | None  # per step: distinct tokens' logprobs (top K, plus the sampled one)
    prompt_tokens: int | None


class OpenAIReader:
    """``base_url``: the API root as OpenAI clients take it (``http://host:8000/v1``);
    ``model``: the served model's name. ``tokenizer``: a local path or hub id (offline) for
    ``chat`` (its chat template) and ``count``; without it prompts are used as is and counts come
    from :func:`xmemory_gpu.tokens.default_counter` (``count_name`` says which).
    ``vocab_size``: for the entropy estimate (default: the tokenizer's size, when given)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        logprobs: int = 5,
        batch_size: int = 8,
        concurrency: int = 4,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        api_key_env: str = "OPENAI_API_KEY",
        tokenizer: str | None = None,
        vocab_size: int | None = None,
        vllm_extras: bool = True,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIReader: base_url must start with http:// or https://, got {base_url!r}")
        if logprobs < 1 or batch_size < 1 or concurrency < 1 or retries < 0 or timeout <= 0:
            raise ValueError(
                "OpenAIReader: logprobs, batch_size, concurrency >= 1, retries >= 0 and timeout > 0 are required"
            )
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.name = f"openai:{base_url}#{model}"
        self.logprobs, self.batch_size, self.concurrency = logprobs, batch_size, concurrency
        self.timeout, self.retries, self.backoff, self.max_backoff = timeout, retries, backoff, max_backoff
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or None
        self.extra = {**(VLLM_EXTRAS if vllm_extras else {}), **(extra_body or {})}
        self.usage = Usage()
        self.requests = 0  # HTTP attempts made (retries included)
        self.tokenizer = None
        if tokenizer is not None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
            self.count_name = f"{tokenizer} (tokenizer)"
            self.additive = False
        else:
            from ..tokens import default_counter

            counter = default_counter()
            self.count_name = counter.name
            self.additive = counter.additive
        self.vocab_size = (
            vocab_size
            if vocab_size is not None
            else (len(self.tokenizer) if self.tokenizer is not None else None)
        )

    # -- text helpers ------------------------------------------------------------------------------
    def chat(self, user: str) -> str:
        return chat_prompt(self.tokenizer, user)

    def count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        if self.tokenizer is not None:
            return count_tokens(self.tokenizer, texts)
        from ..tokens import default_counter

        return default_counter().count(list(texts))

    # -- HTTP --------------------------------------------------------------------------------------
    def _request(
        self, prompts: list[str], max_tokens: int, logprobs: int, strict: bool
    ) -> tuple[list[_Choice], _Counts | None]:
        """One batch: POST with retries, then the parsed choices (in prompt order) and usage counts.
        ``strict``: per-token logprobs are required (uncertainty)."""
        body = {
            "model": self.model,
            "prompt": prompts[0] if len(prompts) == 1 else prompts,
            "max_tokens": max_tokens,
            "temperature": 0,
            "n": 1,
            "logprobs": logprobs,
            "echo": False,
            "stream": False,
            **self.extra,
        }
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempts = self.retries + 1
        last: _Retryable | None = None
        for attempt in range(attempts):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                delay = delay / 2 + random.uniform(0, delay / 2)  # "equal jitter"
                if last is not None and last.retry_after is not None:
                    delay = max(delay, min(last.retry_after, self.max_backoff))
                time.sleep(delay)
            self.requests += 1
            try:
                raw = self._send(data, headers)
                try:
                    answer = json.loads(raw)
                except ValueError as e:
                    raise _Retryable(f"malformed response: invalid JSON ({e}): {raw[:200]!r}") from None
                try:
                    return _parse(answer, len(prompts), max_tokens, strict)
                except ValueError as e:
                    raise _Retryable(f"malformed response: {e}") from None
            except _Retryable as e:
                last = e
        assert last is not None
        raise ReaderHTTPError(self.url, attempts, last.reason, last.status)

    def _send(self, data: bytes, headers: dict[str, str]) -> bytes:
        """One POST: the body of a 2xx answer; _Retryable for what may pass, ReaderHTTPError for
        other 4xx answers (retrying a bad request cannot help)."""
        req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            detail = _body_snippet(e)
            if e.code == 429 or e.code >= 500:
                ra = e.headers.get("Retry-After") if e.headers else None
                raise _Retryable(f"HTTP {e.code} {e.reason}: {detail}", e.code, _seconds(ra)) from None
            hint = (
                " (a server that rejects vLLM's extra fields needs vllm_extras=False)"
                if e.code in (400, 422) and self.extra
                else ""
            )
            raise ReaderHTTPError(self.url, 1, f"HTTP {e.code} {e.reason}: {detail}{hint}", e.code) from None
        except TimeoutError:
            raise _Retryable(f"timed out after {self.timeout:g} s") from None
        except urllib.error.URLError as e:
            kind = "timed out" if isinstance(e.reason, TimeoutError) else "connection error"
            raise _Retryable(f"{kind}: {e.reason}") from None
        except (OSError, HTTPException) as e:
            raise _Retryable(f"connection error: {type(e).__name__}: {e}") from None

    def _run(
        self, prompts: list[str], max_tokens: int, logprobs: int, strict: bool
    ) -> list[tuple[list[str], list[_Choice], _Counts | None]]:
        """All prompts, ``batch_size`` to a request, ``concurrency`` requests at once, in order."""
        batches = [prompts[s : s + self.batch_size] for s in range(0, len(prompts), self.batch_size)]
        if len(batches) <= 1 or self.concurrency == 1:
            return [(b, *self._request(b, max_tokens, logprobs, strict)) for b in batches]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches))) as ex:
            futures = [ex.submit(self._request, b, max_tokens, logprobs, strict) for b in batches]
            try:
                return [(b, *f.result()) for b, f in zip(batches, futures)]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    def _prompt_counts(self, batch: list[str], choices: list[_Choice], usage: _Counts | None) -> list[int]:
        """Prompt tokens per prompt: the server's ``prompt_token_ids``, else its ``usage`` (split over
        a batch in proportion to ``count``; the total stays the server's), else ``count``."""
        if all(c.prompt_tokens is not None for c in choices):
            return [int(c.prompt_tokens) for c in choices]  # type: ignore[arg-type]
        if usage is None:
            return self.count(batch)
        if len(batch) == 1:
            return [usage[0]]
        return _split_total(usage[0], self.count(batch))

    # -- reader interface --------------------------------------------------------------------------
    def generate(
        self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate"
    ) -> Generation:
        if temperature != 0.0:
            raise ValueError("OpenAIReader.generate: only greedy decoding (temperature 0) is supported")
        texts, p_tok, o_tok, total_p, total_o, cached = [], [], [], 0, 0, 0
        for batch, choices, usage in self._run(list(prompts), max_tokens, 1, False):
            p = self._prompt_counts(batch, choices, usage)
            if all(c.token_ids is not None for c in choices):
                o = [len(c.token_ids or []) for c in choices]
            elif usage is not None and len(batch) == 1:
                o = [usage[1]]
            else:  # no per-token information: the local count of the text
                o = self.count([c.text for c in choices])
            texts += [c.text.strip() for c in choices]
            p_tok += p
            o_tok += o
            total_p += usage[0] if usage else sum(p)
            total_o += usage[1] if usage else sum(o)
            cached += usage[2] if usage else 0
        self._record(purpose, len(prompts), total_p, total_o, cached)
        return Generation(texts, p_tok, o_tok)

    def uncertainty(
        self, prompts: list[str], n_tokens: int = 20, kind: str = "mean_nll", purpose: str = "uncertainty"
    ) -> list[Uncertainty]:
        if kind not in UNCERTAINTY_KINDS:
            raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
        out: list[Uncertainty] = []
        total_p = total_o = cached = 0
        for batch, choices, usage in self._run(list(prompts), n_tokens, self.logprobs, True):
            for c, n_prompt in zip(choices, self._prompt_counts(batch, choices, usage)):
                assert (
                    c.token_ids is not None and c.logprobs is not None and c.top is not None
                )  # _parse checked
                ent = [entropy_from_topk(t, self.vocab_size) for t in c.top]
                per = ent if kind == "entropy" else [-v for v in c.logprobs]
                value = sum(per) / len(per) if per else 0.0
                out.append(
                    Uncertainty(
                        value, kind, ent, list(c.logprobs), c.token_ids, n_prompt, estimated=kind == "entropy"
                    )
                )
            total_p += usage[0] if usage else sum(u.prompt_tokens for u in out[-len(batch) :])
            total_o += usage[1] if usage else sum(len(c.token_ids or []) for c in choices)
            cached += usage[2] if usage else 0
        self._record(purpose, len(prompts), total_p, total_o, cached)
        return out

    def _record(self, purpose: str, calls: int, prompt: int, output: int, cached: int) -> None:
        self.usage.add(purpose, calls, prompt, output)
        if cached and hasattr(self.usage, "cached_prompt_tokens"):
            self.usage.cached_prompt_tokens += cached


# -- response parsing (pure) ------------------------------------------------------------------------
def _parse(answer: Any, n: int, max_tokens: int, strict: bool) -> tuple[list[_Choice], _Counts | None]:
    """Validate a ``/v1/completions`` answer for ``n`` prompts; ValueError says what is wrong.
    ``strict``: every choice must carry per-token logprobs."""
    if not isinstance(answer, dict):
        raise ValueError(f"expected a JSON object, got {type(answer).__name__}")
    if "error" in answer and "choices" not in answer:
        raise ValueError(f"server error object: {str(answer['error'])[:200]}")
    choices = answer.get("choices")
    if not isinstance(choices, list):
        raise ValueError("missing 'choices' list")
    if len(choices) != n:
        raise ValueError(f"{len(choices)} choices for {n} prompts")
    if not all(isinstance(c, dict) for c in choices):
        raise ValueError("a choice is not an object")
    idx = [c.get("index") for c in choices]
    if all(isinstance(i, int) for i in idx):
        if sorted(idx) != list(range(n)):  # type: ignore[type-var]
            raise ValueError(f"choice indices {idx} are not 0..{n - 1}")
        choices = sorted(choices, key=lambda c: c["index"])
    parsed = [_parse_choice(c, max_tokens, strict) for c in choices]
    usage = answer.get("usage")
    counts = None
    if (
        isinstance(usage, dict)
        and _is_int(usage.get("prompt_tokens"))
        and _is_int(usage.get("completion_tokens"))
    ):
        details = usage.get("prompt_tokens_details")
        cached = (
            details.get("cached_tokens") if isinstance(details, dict) else None
        )  # OpenAI; vLLM with --enable-prompt-tokens-details
        counts = (
            int(usage["prompt_tokens"]),
            int(usage["completion_tokens"]),
            int(cached) if _is_int(cached) else 0,
        )
    return parsed, counts


def _parse_choice(c: dict, max_tokens: int, strict: bool) -> _Choice:
    text = c.get("text")
    if not isinstance(text, str):
        raise ValueError("a choice has no 'text' string")
    ids = c.get("token_ids")
    ids = [int(i) for i in ids] if isinstance(ids, list) and all(_is_int(i) for i in ids) else None
    pids = c.get("prompt_token_ids")
    n_prompt = len(pids) if isinstance(pids, list) else None
    lp = c.get("logprobs")
    if not isinstance(lp, dict):
        if strict:
            raise ValueError("a choice has no 'logprobs' object")
        return _Choice(text, ids, None, None, n_prompt)
    tokens, token_lp, top = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
    if not (isinstance(tokens, list) and isinstance(token_lp, list) and isinstance(top, list)):
        raise ValueError("'logprobs' lacks the 'tokens', 'token_logprobs' or 'top_logprobs' list")
    if not len(tokens) == len(token_lp) == len(top):
        raise ValueError(f"'logprobs' lists differ in length ({len(tokens)}, {len(token_lp)}, {len(top)})")
    if len(tokens) > max_tokens:
        raise ValueError(f"{len(tokens)} tokens for max_tokens={max_tokens}")
    if ids is not None and len(ids) != len(tokens):
        ids = None
    if not all(_is_num(v) for v in token_lp):
        raise ValueError("a 'token_logprobs' entry is not a number")
    steps = []
    for tok, v, t in zip(tokens, token_lp, top):
        if not (isinstance(t, dict) and all(_is_num(x) for x in t.values())):
            raise ValueError("a 'top_logprobs' entry is not an object of numbers")
        steps.append(list(t.values()) + ([] if tok in t else [v]))  # the sampled token counts once
    if ids is None:
        ids = [_token_id(t) for t in tokens]
    return _Choice(text, ids, [float(v) for v in token_lp], [[float(x) for x in s] for s in steps], n_prompt)


def _token_id(token: Any) -> int:
    """``token_id:N`` (vLLM's ``return_tokens_as_token_ids``) -> N; anything else -> -1."""
    if isinstance(token, str) and token.startswith("token_id:"):
        try:
            return int(token[9:])
        except ValueError:
            return -1
    return -1


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def _split_total(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders; sums to ``total``)."""
    w = [max(x, 0) for x in weights]
    s = sum(w) or len(w)
    w = w if sum(w) else [1] * len(w)
    raw = [total * x / s for x in w]
    out = [int(r) for r in raw]
    for i in sorted(range(len(w)), key=lambda i: raw[i] - out[i], reverse=True)[: total - sum(out)]:
        out[i] += 1
    return out


def _body_snippet(e: urllib.error.HTTPError) -> str:
    try:
        return e.read()[:300].decode("utf-8", "replace").strip() or "(empty body)"
    except Exception:  # noqa: BLE001 - a detail for the message only
        return "(no body)"


def _seconds(v: str | None) -> float | None:
    try:
        return max(0.0, float(v)) if v is not None else None
    except ValueError:
        return None
