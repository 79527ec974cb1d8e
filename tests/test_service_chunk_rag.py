"""chunk-rag over HTTP: the default width and the named widths are accepted, any other width is a 422
naming the field (each width embeds a memory's passages once more)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from xmemory_gpu.engine import MemoryEngine  # noqa: E402
from xmemory_gpu.service import ServiceConfig, create_app  # noqa: E402

LONG = (
    "I started a new job as a product designer at a small studio in Lisbon, and the first week was all "
    "onboarding. The team works on maps for cyclists, which I love, and my manager Ana wants me to lead "
    "the redesign of the route planner by spring. On weekends I still volunteer at the animal shelter."
)


def test_chunk_rag_widths_over_http(tmp_path):
    app = create_app(
        lambda: MemoryEngine.open(tmp_path / "s", embedder="hashing:64"), ServiceConfig(coalesce_ms=0)
    )
    with TestClient(app) as c:
        assert (
            c.post(
                "/v1/memories", json={"user_id": "u", "messages": [{"role": "user", "content": LONG}]}
            ).status_code
            == 200
        )
        for strategy in ("chunk-rag", "chunk-rag:16", "chunk-rag:32", "chunk-rag:128"):
            r = c.post(
                "/v1/search",
                json={
                    "user_id": "u",
                    "query": "Who is the manager?",
                    "strategy": strategy,
                    "budget_tokens": 300,
                },
            )
            assert r.status_code == 200, (strategy, r.text)
            units = r.json()["results"][0]["units"] if "results" in r.json() else r.json()["units"]
            assert units and all(u["type"] == "message" for u in units)
        r = c.post("/v1/search", json={"user_id": "u", "query": "q", "strategy": "chunk-rag:7"})
        assert r.status_code == 422 and "strategy" in r.text
