"""The LLM builder with a scripted generator that answers well, answers in repairable form, answers
malformed JSON and then recovers under the stricter instruction, or never answers usefully:
nothing is lost, and repairs, retries and fallbacks are counted exactly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.construct.llm_prompts import Boundaries, Facts
from xmemory_gpu.construct.llm_stages import LLMBuilder
from xmemory_gpu.construct.pipeline import build_memories, build_store
from xmemory_gpu.datasets.locomo import load_locomo
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.llm.json_output import StageCounts, parse_json, run_json_stage, validate
from xmemory_gpu.memory.store import Store

_NUM = re.compile(r"^(\d+)\. ", re.M)


class ScriptedGenerator:
    """Answers by prompt kind; ``mode(kind, n_prompt)`` picks good / fenced / bad-then-good / garbage."""

    name = "scripted"

    def __init__(self, mode):
        self.mode = mode
        self.seen: dict[str, int] = {}  # prompt (without the stricter suffix) -> attempts so far
        self.order: dict[str, int] = {}  # prompt -> 1-based order of first appearance
        self.calls = 0
        self.batches: list[tuple[str, int]] = []

    def chat(self, user: str) -> str:
        return f"<user>{user}</user>"

    def _good(self, kind: str, prompt: str) -> str:
        n = len(_NUM.findall(prompt))
        if kind == "boundaries":
            return json.dumps({"starts": [1, max(1, n // 2 + 1)]})
        if kind == "episodes":
            date = re.search(r"sent on (\S+)\.", prompt).group(1)
            return json.dumps({"title": "a talk", "content": "They talked.", "timestamp": date})
        if kind == "facts":
            return json.dumps(
                {
                    "facts": [
                        {"text": f"Fact number {i} here.", "sources": [i]} for i in range(1, min(n, 3) + 1)
                    ]
                }
            )
        return json.dumps({"summary": "A theme."})

    def generate(self, prompts, max_tokens=32, temperature=0.0, purpose="generate"):
        kind = purpose.split()[-1]
        self.batches.append((kind, len(prompts)))
        texts = []
        for p in prompts:
            key = f"{kind}|{p.split(chr(10) * 2 + 'Your previous answer')[0].removesuffix('</user>')}"
            attempt = self.seen.get(key, 0)
            self.seen[key] = attempt + 1
            self.order.setdefault(key, len(self.order) + 1)
            m = self.mode(kind, self.order[key], attempt)
            good = self._good(kind, p)
            texts.append(
                {
                    "good": good,
                    "fenced": f"Sure!\n```json\n{good}\n```",
                    "garbage": "I cannot do that.",
                    "bad_then_good": good if attempt else "{'starts': oops",
                }[m]
            )
            self.calls += 1
        return SimpleNamespace(
            texts=texts,
            prompt_tokens=[len(p.split()) for p in prompts],
            output_tokens=[len(t.split()) for t in texts],
        )


@pytest.fixture(scope="module")
def convs(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "synthetic.json"
    write_json(generate_conversations(3, seed=5, sessions=(2, 3), turns_per_session=(8, 14)), path)
    return path, load_locomo(path)


def test_parse_json_repairs():
    assert parse_json('{"a": 1}') == ({"a": 1}, False)
    assert parse_json('here:\n```json\n{"a": [1, 2,]}\n```') == ({"a": [1, 2]}, True)
    assert parse_json('{"summary": "cut off') == ({"summary": "cut off"}, True)
    with pytest.raises(ValueError, match="no JSON object"):
        parse_json("no json at all")
    with pytest.raises(ValueError, match="field starts.1"):
        validate('{"starts": [1, "x"]}', Boundaries)
    with pytest.raises(ValueError, match="field facts.0.sources"):
        validate('{"facts": [{"text": "abc", "sources": []}]}', Facts)


def test_stage_retries_then_falls_back_and_counts():
    gen = ScriptedGenerator(
        lambda kind, i, attempt: ["good", "fenced", "bad_then_good", "garbage"][(i - 1) % 4]
    )
    counts = [StageCounts() for _ in range(4)]
    users = [f"Messages:\n1. A: hi\n2. B: hello {i}" for i in range(4)]
    out = run_json_stage(
        gen, users, Boundaries, max_tokens=8, max_retries=2, purpose="build boundaries", counts=counts
    )
    assert [o is not None for o in out] == [True, True, True, False]
    assert [c.calls for c in counts] == [1, 1, 2, 3]
    assert [c.retries for c in counts] == [0, 0, 1, 2]
    assert [c.repaired for c in counts] == [0, 1, 0, 0]
    assert [c.fallbacks for c in counts] == [0, 0, 0, 1]
    assert gen.batches == [
        ("boundaries", 4),
        ("boundaries", 2),
        ("boundaries", 1),
    ]  # failures re-sent as one batch


@pytest.mark.parametrize("mix", ["good", "garbage", "mixed"])
def test_llm_builder_loses_no_message(convs, mix):
    _, conversations = convs
    modes = {
        "good": lambda k, i, a: "good",
        "garbage": lambda k, i, a: "garbage",
        "mixed": lambda k, i, a: ["good", "fenced", "bad_then_good", "garbage"][i % 4],
    }
    gen = ScriptedGenerator(modes[mix])
    mems = build_memories(
        conversations, HashingEmbedder(64), XMemoryConfig(), llm=LLMBuilder(gen, max_retries=1)
    )
    # bulk mode: one batch per stage (plus one retry batch), all conversations together
    kinds = [k for k, _ in gen.batches]
    assert kinds == sorted(kinds, key=["boundaries", "episodes", "facts", "summaries"].index)
    assert len(gen.batches) <= 8
    for conv, mem in zip(conversations, mems):
        ids = [mid for ep in mem.episodes for mid in ep.message_ids]
        assert ids == [m.id for m in conv.messages]  # every message in exactly one episode, in order
        assert all(len(ep.message_ids) <= XMemoryConfig().segment.max_messages for ep in mem.episodes)
        for n in mem.semantics:  # provenance: each source message lies in one of the node's episodes
            assert set(n.message_ids) <= {mid for e in n.episode_ids for mid in mem.episodes[e].message_ids}
        llm = mem.stats["llm"]
        assert llm["episodes"]["units"] == len(mem.episodes) and llm["summaries"]["units"] == len(mem.themes)
        assert (
            mem.stats["llm_tokens"] == sum(c["prompt_tokens"] + c["output_tokens"] for c in llm.values()) > 0
        )
        for stage, c in llm.items():
            if mix == "good":
                assert c["fallbacks"] == c["retries"] == 0 and c["calls"] == c["units"], stage
            elif mix == "garbage":
                assert (
                    c["fallbacks"] == c["units"]
                    and c["calls"] == 2 * c["units"]
                    and c["retries"] == c["units"]
                ), stage
            else:
                assert c["calls"] == c["units"] + c["retries"] and c["fallbacks"] <= c["retries"], stage
        if mix == "good":
            assert all(t.summary == "A theme." for t in mem.themes)
            assert all(n.text.startswith("Fact number") for n in mem.semantics)
            assert all(ep.text == "They talked." for ep in mem.episodes)
        if mix == "garbage":  # every unit took the LLM-free output
            free = build_memories([conv], HashingEmbedder(64), XMemoryConfig())[0]
            assert [n.text for n in mem.semantics] == [n.text for n in free.semantics]
            assert [e.text for e in mem.episodes] == [e.text for e in free.episodes]
    if mix == "mixed":
        total = {k: sum(m.stats["llm"][k]["fallbacks"] for m in mems) for k in mems[0].stats["llm"]}
        assert sum(total.values()) > 0
        assert sum(m.stats["llm"][k]["repaired"] for m in mems for k in total) > 0


def test_build_store_with_llm_and_stats_cli(convs, tmp_path):
    path, conversations = convs
    gen = ScriptedGenerator(lambda k, i, a: ["good", "garbage"][i % 2])
    rep = build_store(
        path,
        tmp_path / "s",
        embedder=HashingEmbedder(64),
        llm=LLMBuilder(gen, max_retries=1),
        max_sessions=1,
        progress=False,
    )
    assert len(rep.built) == 3
    store = Store.open(tmp_path / "s")
    for conv in conversations:
        mem = store.get(conv.sample_id)
        first = conv.messages[0].session
        assert [m.id for m in mem.messages] == [m.id for m in conv.messages if m.session == first]
        assert mem.stats["builder"] == "llm (scripted)" and mem.stats["llm"]["facts"]["fallbacks"] >= 0
        assert mem.stats["statements_from_one_message"] is False  # a fact may come from several messages
    out = subprocess.run(
        [sys.executable, "-m", "xmemory_gpu", "stats", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "LLM builder work" in out and "fallbacks" in out and "summaries" in out
