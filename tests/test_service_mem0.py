"""The mem0 surface over HTTP, against a real ``xmemory serve`` on 127.0.0.1 with ``MemoryClient``:
``PUT /v1/memories/{id}`` (update: the old text leaves every answer and, once the server has stopped,
every file), ``POST /v1/reset`` (a key of every scope only), ``metadata`` and ``user_name`` on add,
``limit`` / ``threshold`` / ``filters`` on search and ``filters`` on ``GET /v1/memories`` (a JSON object
in the query string), each refusal a 422 naming the field with nothing stored lost."""

from __future__ import annotations

import hashlib
import json
import signal
import urllib.error
import urllib.parse
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from test_service import ADMIN, ALICE, Server  # noqa: E402

from xmemory_gpu.client import MemoryClient, ServiceError  # noqa: E402

TOKEN = "Qzxvwplorbanth"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("mem0")
    keys = root / "keys.json"
    keys.write_text(json.dumps({ADMIN: "*", ALICE: ["alice"]}))
    s = Server(root / "store", keys)
    yield s
    s.kill(signal.SIGTERM)


def _http(url: str, method: str, path: str, body: dict | None = None, key: str = ADMIN) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _texts(units: list[dict]) -> str:
    return json.dumps(units)


def test_update_rederives_and_leaves_no_old_text(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({ADMIN: "*", ALICE: ["alice"]}))
    s = Server(tmp_path / "store", keys)
    try:
        c = MemoryClient(s.url, api_key=ADMIN)
        ids = c.add(
            [
                {
                    "role": "user",
                    "content": f"My new neighbour is called {TOKEN} and she keeps bees.",
                    "id": "n/1",
                },
                {"role": "user", "content": "I bought a red kayak in town last week.", "id": "k1"},
            ],
            user_id="alice",
        )
        assert ids == ["n/1", "k1"]
        assert TOKEN in _texts(c.get_all(user_id="alice"))
        c.update("n/1", "My new neighbour is called Maple and she keeps goats.", user_id="alice")
        assert (
            c.get("n/1", user_id="alice")["text"] == "My new neighbour is called Maple and she keeps goats."
        )
        units = c.get_all(user_id="alice")
        assert TOKEN not in _texts(units) and "goats" in _texts([u for u in units if u["type"] != "message"])
        assert all(TOKEN not in r["context"] for r in c.search([f"Who is {TOKEN}?", "bees"], user_id="alice"))
        assert (
            "Maple" in c.search("Who is my neighbour?", user_id="alice", strategy="naive-rag")[0]["context"]
        )
        assert TOKEN not in json.dumps(c.history(user_id="alice"))
        alice = MemoryClient(s.url, api_key=ALICE)
        for call, status in (
            (lambda: alice.update("k1", "x", user_id="bob"), 403),
            (lambda: c.update("nope", "x", user_id="alice"), 404),
            (lambda: MemoryClient(s.url).update("k1", "x", user_id="alice"), 401),
        ):
            with pytest.raises(ServiceError) as e:
                call()
            assert e.value.status == status
        assert (
            c.get("k1", user_id="alice")["text"] == "I bought a red kayak in town last week."
        )  # nothing lost
    finally:
        assert s.kill(signal.SIGTERM) == 0
    for f in (tmp_path / "store").rglob("*"):
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f"{f.name} still holds the updated text"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"user_id": "alice"}, "text"),
        ({"user_id": "alice", "text": 3}, "text"),
        ({"user_id": "alice", "text": "x", "metadata": {}}, "metadata"),
        ({"user_id": "", "text": "x"}, "user_id"),
    ],
)
def test_update_refusals_name_the_field(live, body, field):
    c = MemoryClient(live.url, api_key=ADMIN)
    uid = "u-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    c.add([{"role": "user", "content": "I keep a blue lamp.", "id": uid}], user_id="alice")
    code, out = _http(live.url, "PUT", f"/v1/memories/{uid}", body)
    assert code == 422 and out["detail"].startswith(f"{field}:"), out
    assert c.get(uid, user_id="alice")["text"] == "I keep a blue lamp."


def test_reset_needs_a_key_of_every_scope(live):
    c = MemoryClient(live.url, api_key=ADMIN)
    c.add([{"role": "user", "content": "I keep a blue lamp."}], user_id="alice")
    c.add([{"role": "user", "content": "I keep a green lamp."}], user_id="bob", agent_id="helper")
    for client, status in ((MemoryClient(live.url, api_key=ALICE), 403), (MemoryClient(live.url), 401)):
        with pytest.raises(ServiceError) as e:
            client.reset()
        assert e.value.status == status
    assert c.get_all(user_id="alice") and c.get_all(user_id="bob", agent_id="helper")  # nothing was deleted
    assert c.reset() >= 2
    assert c.get_all(user_id="alice") == [] and c.get_all(user_id="bob", agent_id="helper") == []
    assert c.health()["memories"] == 0
    assert c.reset() == 0


def test_metadata_and_filters_on_get_all_and_search(live):
    c = MemoryClient(live.url, api_key=ADMIN)
    c.add(
        [{"role": "user", "content": "I flew to Lisbon and ate custard tarts.", "id": "t1"}],
        user_id="meta",
        metadata={"topic": "travel", "year": 2024},
    )
    c.add(
        [{"role": "user", "content": "I bought a violin and practise scales.", "id": "h1"}],
        user_id="meta",
        metadata={"topic": "hobby", "year": 2024},
    )
    c.add(
        [{"role": "user", "content": "I water the tomato plants every evening.", "id": "p1"}], user_id="meta"
    )
    assert c.get("t1", user_id="meta")["metadata"] == {"topic": "travel", "year": 2024}
    travel = c.get_all(user_id="meta", filters={"topic": "travel"})
    assert travel and all(
        "Lisbon" in u["text"] or "custard" in u["text"] or u["type"] == "theme" for u in travel
    )
    assert {u["id"] for u in travel if u["type"] == "message"} == {"t1"}
    assert {u["id"] for u in c.get_all(user_id="meta", filters={"year": 2024}) if u["type"] == "message"} == {
        "t1",
        "h1",
    }
    assert c.get_all(user_id="meta", filters={"topic": "cooking"}) == []
    res = c.search("What did I buy?", user_id="meta", filters={"topic": "travel"}, strategy="naive-rag")[0]
    assert set(res["message_ids"]) <= {"t1"} and "violin" not in res["context"]
    code, out = _http(
        live.url, "GET", "/v1/memories?user_id=meta&filters=" + urllib.parse.quote("{topic: 1}")
    )
    assert code == 422 and out["detail"].startswith("filters: invalid JSON"), out
    code, out = _http(
        live.url, "GET", "/v1/memories?user_id=meta&filters=" + urllib.parse.quote('{"a": [1]}')
    )
    assert code == 422 and out["detail"].startswith("filters: key 'a':"), out
    code, out = _http(live.url, "GET", "/v1/memories?user_id=meta&filters=" + urllib.parse.quote("[1]"))
    assert code == 422 and out["detail"].startswith("filters:"), out
    assert len([u for u in c.get_all(user_id="meta") if u["type"] == "message"]) == 3  # nothing lost


def test_limit_and_threshold_on_search(live):
    c = MemoryClient(live.url, api_key=ADMIN)
    c.add(
        [
            {"role": "user", "content": f"Note {i}: I bought a {w} in town."}
            for i, w in enumerate(["lamp", "kayak", "violin", "teapot", "bicycle"])
        ],
        user_id="lim",
    )
    full = c.search("What did I buy?", user_id="lim")[0]
    assert len(full["units"]) > 1
    one = c.search("What did I buy?", user_id="lim", limit=1)[0]
    assert len(one["units"]) == 1
    assert c.search("What did I buy?", user_id="lim", threshold=1.0)[0]["units"] == []
    for body, field in (
        ({"limit": 0}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"threshold": "0.5"}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"filters": {"a": {"b": 1}}}, "filters: key 'a'"),
        ({"filters": []}, "filters"),
    ):
        code, out = _http(live.url, "POST", "/v1/search", {"user_id": "lim", "query": "q", **body})
        assert code == 422 and out["detail"].startswith(f"{field}:"), (body, out)


def test_user_name_and_message_names(live):
    c = MemoryClient(live.url, api_key=ADMIN)
    ids = c.add(
        [
            {"role": "user", "name": "Maya", "content": "I adopted a grey cat called Pixel."},
            {"role": "assistant", "content": "Pixel is a lovely name."},
        ],
        user_id="names",
        user_name="Maya",
    )
    assert len(ids) == 2
    speakers = {u["id"]: u["speaker"] for u in c.get_all(user_id="names") if u["type"] == "message"}
    assert speakers[ids[0]] == "Maya"
    code, out = _http(
        live.url,
        "POST",
        "/v1/memories",
        {"user_id": "names", "user_name": 3, "messages": [{"role": "user", "content": "x"}]},
    )
    assert code == 422 and out["detail"].startswith("user_name:"), out
