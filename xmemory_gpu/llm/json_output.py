"""JSON answers from a generator: parse, repair, validate against a pydantic schema, retry the
failures in one batch with a stricter instruction, and count everything.

A stage gets back one validated object per prompt, or ``None`` where every attempt failed (the
caller then falls back to the LLM-free builder's output for that unit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class Generator(Protocol):
    """What the LLM builder needs from a reader (``xmemory_gpu.llm``) or a scripted stand-in."""

    name: str

    def generate(
        self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate"
    ) -> Any:
        """-> an object with ``texts``, ``prompt_tokens`` and ``output_tokens`` lists, one per prompt."""
        ...


@dataclass
class StageCounts:
    """LLM work of one stage for one memory."""

    calls: int = 0  # prompts sent, retries included
    prompt_tokens: int = 0
    output_tokens: int = 0
    units: int = 0  # units the stage had to produce (windows, episodes, themes)
    repaired: int = 0  # answers accepted after a local repair (fences, trailing text, commas, brackets)
    retries: int = 0  # prompts re-sent with the stricter instruction
    fallbacks: int = 0  # units that took the LLM-free builder's output after the last retry

    def add(self, other: StageCounts) -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _close_brackets(s: str) -> str:
    """Append the closers a truncated answer is missing (outside strings)."""
    stack, in_str, esc = [], False, False
    for ch in s:
        if in_str:
            esc = (ch == "\\") and not esc
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return s + ('"' if in_str else "") + "".join(reversed(stack))


def parse_json(text: str) -> tuple[Any, bool]:
    """-> (value, repaired). Raises ValueError when no JSON object can be recovered."""
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        pass
    s = text.strip()
    fence = _FENCE.search(s)
    if fence:
        s = fence.group(1).strip()
    start = s.find("{")
    if start < 0:
        raise ValueError("no JSON object in the answer")
    s = s[start:]
    end = s.rfind("}")
    candidates = [s[: end + 1]] if end >= 0 else []
    candidates.append(_close_brackets(s))
    for c in candidates:
        for variant in (c, _TRAILING_COMMA.sub(r"\1", c)):
            try:
                return json.loads(variant), True
            except json.JSONDecodeError:
                continue
    raise ValueError("the answer is not valid JSON, even after repair")


def validate(text: str, schema: type[M], check: Callable[[M], None] | None = None) -> tuple[M, bool]:
    """Parse and validate one answer; ``check`` adds rules the schema cannot say (index ranges)."""
    value, repaired = parse_json(text)
    try:
        obj = schema.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"field {where}: {first['msg']}") from None
    if check is not None:
        check(obj)
    return obj, repaired


def in_range(field: str, n: int) -> Callable[[BaseModel], None]:
    """A check that every 1-based index in list ``field`` lies in 1..n (what a schema cannot say)."""

    def check(obj: BaseModel) -> None:
        bad = [i for i in getattr(obj, field) if not 1 <= i <= n]
        if bad:
            raise ValueError(f"{field} {bad} outside 1..{n}")

    return check


def example_of(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_config.get("json_schema_extra", {}).get("example", {}))


def stricter(prompt_user: str, schema: type[BaseModel], error: str) -> str:
    return (
        f"{prompt_user}\n\nYour previous answer was rejected ({error}). Answer with one JSON object only, no prose "
        f"and no code fences, exactly of this form: {example_of(schema)}"
    )


def run_json_stage(
    gen: Generator,
    users: list[str],
    schema: type[M],
    *,
    checks: list[Callable[[M], None] | None] | None = None,
    max_tokens: int,
    max_retries: int,
    purpose: str,
    counts: list[StageCounts],
) -> list[M | None]:
    """Send every user message as one batch, then the failures again (stricter) up to ``max_retries``.

    ``users``: the user messages (wrapped in the generator's chat template when it has one).
    ``counts[i]``: where prompt i's calls and tokens are added (the counts of its memory)."""
    chat = getattr(gen, "chat", None) or (lambda u: u)
    out: list[M | None] = [None] * len(users)
    errors: dict[int, str] = {}
    pending = list(range(len(users)))
    for attempt in range(max_retries + 1):
        if not pending:
            break
        texts = [users[i] if attempt == 0 else stricter(users[i], schema, errors[i]) for i in pending]
        res = gen.generate([chat(t) for t in texts], max_tokens=max_tokens, temperature=0.0, purpose=purpose)
        failed = []
        for j, i in enumerate(pending):
            c = counts[i]
            c.calls += 1
            c.retries += attempt > 0
            c.prompt_tokens += int(res.prompt_tokens[j])
            c.output_tokens += int(res.output_tokens[j])
            try:
                obj, repaired = validate(res.texts[j], schema, checks[i] if checks else None)
            except ValueError as exc:
                errors[i] = str(exc)
                failed.append(i)
                continue
            c.repaired += repaired
            out[i] = obj
        pending = failed
    for i in pending:
        counts[i].fallbacks += 1
    return out
