"""``xmemory serve DIR --ray --shards N``: the HTTP API sharded by user on Ray Serve.

On one local Ray instance for the module (``num_cpus=2``, 127.0.0.1), 2 shards, the hashing
embedder: users stay on their shard (isolation, keys, the cross-shard batch refused); a shard
replica killed with SIGKILL under load is restarted by Serve with every acknowledged add present,
while the other shard keeps answering; the user-to-shard mapping survives a restart (the manifest).
The manifest's rules are tested without Ray."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from xmemory_gpu.cli import main
from xmemory_gpu.distributed.shards import MANIFEST, ManifestError, open_shard_set, shard_of
from xmemory_gpu.memory.store import Store

SPEC = "hashing:64"
KEY = "k" * 16  # every scope
BOUND = "b" * 16  # bound to ALICE only


# -- the store set's manifest (no Ray) ------------------------------------------------------------
def test_shard_of_is_sha256_mod_n_and_spreads_users():
    for user in ("alice", "bob", "ü/漢字", ""):
        want = int.from_bytes(hashlib.sha256(user.encode()).digest()[:8], "big")
        assert [shard_of(user, n) for n in (1, 2, 3, 7)] == [want % n for n in (1, 2, 3, 7)]
    counts = [0, 0]
    for i in range(1000):
        counts[shard_of(f"user-{i}", 2)] += 1
    assert min(counts) > 400


def test_manifest_is_written_once_and_fixes_the_count(tmp_path: Path):
    root = tmp_path / "set"
    made = open_shard_set(root, 3)
    assert made.stores == ("shard-0", "shard-1", "shard-2")
    assert json.loads((root / MANIFEST).read_text())["shards"] == 3
    assert open_shard_set(root).shards == 3 == open_shard_set(root, 3).shards  # omitted: the manifest's
    with pytest.raises(ManifestError, match="has 3 shard"):
        open_shard_set(root, 2)
    (root / MANIFEST).write_text(
        '{"format": "xmemory-shards/1", "shards": 2, "hash": "sha256-be64-mod", "stores": ["a"]}'
    )
    with pytest.raises(ManifestError, match="stores"):
        open_shard_set(root)
    single = tmp_path / "single"
    single.mkdir()
    (single / "memory.sqlite").write_bytes(b"")
    with pytest.raises(ManifestError, match="single store"):
        open_shard_set(single, 2)


def test_cli_refuses_a_count_that_disagrees_before_starting_ray(tmp_path: Path, capsys):
    open_shard_set(tmp_path / "set", 2)
    assert main(["serve", str(tmp_path / "set"), "--ray", "--shards", "3"]) == 2
    assert "has 2 shard(s), not --shards 3" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "one"), "--shards", "2"]) == 2
    assert "sharding needs --ray" in capsys.readouterr().err


# -- on Ray Serve ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray")
    serve = pytest.importorskip("ray.serve")
    pytest.importorskip("requests")
    from xmemory_gpu.distributed.ray_serve import init_ray

    init_ray("local", num_cpus=2, object_store_memory=300 * 2**20, log_to_driver=False)  # on 127.0.0.1 only
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield port
    try:
        serve.shutdown()
    finally:
        ray.shutdown()


def _deploy(root: Path, port: int, shards: int | None = 2, **kw):
    from xmemory_gpu.distributed.ray_serve import deploy
    from xmemory_gpu.service import ServiceConfig

    cfg = ServiceConfig(api_keys={KEY: None, BOUND: frozenset({"alice"})})
    return deploy(str(root), shards=shards, config=cfg, port=port, embedder=SPEC, shard_cpus=0.5, **kw)


def _stop() -> None:
    from ray import serve

    from xmemory_gpu.distributed.ray_serve import APP_NAME

    serve.delete(APP_NAME)  # graceful: each shard drains, commits and closes its store


def _users(n_each: int, shards: int = 2) -> list[list[str]]:
    """``n_each`` user ids per shard."""
    out: list[list[str]] = [[] for _ in range(shards)]
    i = 0
    while min(map(len, out)) < n_each:
        u = f"user-{i}"
        if len(out[shard_of(u, shards)]) < n_each:
            out[shard_of(u, shards)].append(u)
        i += 1
    return out


def _add(s, url: str, user: str, text: str, key: str = KEY):
    return s.post(
        f"{url}/v1/memories",
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
        json={"user_id": user, "messages": [{"speaker": user, "text": text}]},
    )


def _texts(s, url: str, user: str) -> set[str]:
    r = s.get(
        f"{url}/v1/memories", params={"user_id": user}, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    )
    assert r.status_code == 200, r.text
    return {u["text"] for u in r.json()["units"] if u["type"] == "message"}


def _stored_users(store: Path) -> set[str]:
    st = Store.open(store)
    try:
        return {json.loads(m)[0] for m in st.memory_ids()}
    finally:
        st.close()


def _until(cond, tries: int = 3000) -> bool:
    """Poll ``cond`` every 0.1 s; ``tries`` only bounds a wait for what never comes (a condition,
    not a time, ends the wait)."""
    for _ in range(tries):
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def _assert_loopback_only() -> None:
    """Every socket Ray, Serve's HTTP proxy and the replicas listen on is bound to a loopback address
    (a replica's inter-deployment gRPC server too: Serve binds it to ``[::]:0``, which
    ``ray_serve._loopback_replica_grpc`` turns into 127.0.0.1 on a local node)."""
    psutil = pytest.importorskip("psutil")
    loopback, wide = [], []
    for p in psutil.Process().children(recursive=True):
        try:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN:
                    ok = c.laddr.ip in ("127.0.0.1", "::ffff:127.0.0.1", "::1")
                    (loopback if ok else wide).append((c.laddr, " ".join(p.cmdline())[:60]))
        except psutil.NoSuchProcess:
            pass
    assert len(loopback) >= 3, loopback
    assert not wide, wide


def test_users_are_isolated_across_shards(cluster, tmp_path: Path):
    import requests

    port = cluster
    url = f"http://127.0.0.1:{port}"
    (a0, b0), (a1, _) = _users(2)
    alice = "alice"
    root = tmp_path / "set"
    _deploy(root, port)
    try:
        with requests.Session() as s:
            for u in (a0, b0, a1, alice):
                r = _add(s, url, u, f"{u} keeps the spare key under the blue flowerpot")
                assert r.status_code == 200, r.text
                assert r.headers["X-Shard"] == str(shard_of(u, 2))
            r = s.post(
                f"{url}/v1/search",
                headers={"Authorization": f"Bearer {KEY}"},
                json={"user_id": a0, "query": "where is the spare key?"},
            )
            assert r.status_code == 200 and r.headers["X-Shard"] == "0"
            got = json.dumps(r.json())
            assert a0 in got and a1 not in got and b0 not in got  # same text elsewhere: never in a0's answer
            assert _texts(s, url, a1) == {f"{a1} keeps the spare key under the blue flowerpot"}
            # keys: checked at the ingress; a bound key reaches only its user, wherever it lives
            assert _add(s, url, alice, "x", key=BOUND).status_code == 200
            assert _add(s, url, a1, "x", key=BOUND).status_code == 403
            assert _add(s, url, a1, "x", key="n" * 16).status_code == 401
            assert s.get(f"{url}/v1/memories", params={"user_id": a0}).status_code == 401
            # a batch is one commit: on one shard it is served, across shards refused with 422
            one = {
                "items": [{"user_id": u, "messages": [{"speaker": u, "text": "batched"}]} for u in (a0, b0)]
            }
            r = s.post(f"{url}/v1/memories/batch", json=one, headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 200 and len(r.json()["ids"]) == 2
            two = {
                "items": [{"user_id": u, "messages": [{"speaker": u, "text": "batched"}]} for u in (a0, a1)]
            }
            r = s.post(f"{url}/v1/memories/batch", json=two, headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 422 and r.json()["errors"][0]["field"] == "items"
            # no user id: the shard's own validation answers, as the single-process service does
            r = s.post(f"{url}/v1/search", json={"query": "x"}, headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 422 and r.json()["errors"][0]["field"] == "user_id"
            # store-wide routes fan out
            h = s.get(f"{url}/health", headers={"Authorization": f"Bearer {KEY}"}).json()
            assert h["status"] == "ok" and h["shards"] == 2 and h["messages"] == 7 and h["memories"] == 4
            assert s.get(f"{url}/health").json() == {"status": "ok"}
            m = s.get(f"{url}/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
            assert 'shard="0"' in m and 'shard="1"' in m
            assert s.get(f"{url}/metrics", headers={"Authorization": f"Bearer {BOUND}"}).status_code == 403
        _assert_loopback_only()
    finally:
        _stop()
    assert _stored_users(root / "shard-0") == {a0, b0} | ({alice} if shard_of(alice, 2) == 0 else set())
    assert _stored_users(root / "shard-1") == {a1} | ({alice} if shard_of(alice, 2) == 1 else set())


def test_kill_9_of_a_shard_under_load_keeps_every_acknowledged_add(cluster, tmp_path: Path):
    """SIGKILL shard 0's replica while 4 clients add (2 to shard 0's users, 2 to shard 1's); the test
    then holds shard 0's store lock, so the replica Serve starts in its place waits, until shard 0's
    users were answered 503 (never another shard's answer) and shard 1's were served as before; once
    the lock is let go the new replica opens the same store and every add answered 200 is there.
    Every wait is for a condition (bounded by a count of polls), never a fixed time; ``timeout_s``
    is how long the ingress waits for a shard that is down before its 503, long enough that a
    loaded machine's shard 1 answers well within it."""
    import requests

    from xmemory_gpu.distributed.ray_serve import shard_handle
    from xmemory_gpu.memory.locks import WriterLock, WriterLockError

    port = cluster
    url = f"http://127.0.0.1:{port}"
    users = _users(3)
    root = tmp_path / "set"
    _deploy(root, port, timeout_s=10.0)
    log: list[tuple[float, str, int, str, int]] = []  # (time, user, shard, text, status)
    stop = threading.Event()
    lock = threading.Lock()

    def client(c: int) -> None:
        with requests.Session() as s:
            n = 0
            while not stop.is_set():
                u = users[c % 2][n % 3]
                text = f"client {c} note {n} for {u}"
                try:
                    r = _add(s, url, u, text)
                    status = r.status_code
                    if status == 200 and r.headers["X-Shard"] != str(shard_of(u, 2)):
                        status = -2  # answered by another shard
                except requests.RequestException:
                    status = -1
                with lock:
                    log.append((time.monotonic(), u, shard_of(u, 2), text, status))
                n += 1

    def count(shard: int, status: int, after: float = 0.0, before: float = float("inf")) -> int:
        with lock:
            return sum(1 for e in log if e[2] == shard and e[4] == status and after < e[0] < before)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(4)]
    held = WriterLock(root / "shard-0")
    try:
        for t in threads:
            t.start()
        assert _until(lambda: count(0, 200) >= 10 and count(1, 200) >= 10), (
            "the clients' adds were not served"
        )
        old = shard_handle(0).pid.remote().result(timeout_s=120)
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        for _ in range(
            6000
        ):  # the kernel drops the dead replica's lock at once; take it before the new replica does
            try:
                held.acquire()
                break
            except WriterLockError:
                time.sleep(0.01)
        else:
            raise AssertionError("the killed replica's store lock was never released")
        # shard 0 is down while the lock is held: its users' requests time out into 503s, shard 1's are served
        down = _until(lambda: count(0, 503, after=killed) >= 1 and count(1, 200, after=killed + 1) >= 5)
        released = time.monotonic()
        held.release()
        assert down, "shard 0's users were not answered 503, or shard 1's not served, while shard 0 was down"
        new = None
        for _ in range(600):  # the new replica answers on the same store
            try:
                new = shard_handle(0).pid.remote().result(timeout_s=30)
                if new != old:
                    break
            except Exception:  # noqa: BLE001 - the replica is down or starting
                pass
            time.sleep(0.2)
        assert new is not None and new != old, "Serve did not restart shard 0"
        back = time.monotonic()
        _until(lambda: count(0, 200, after=back) >= 5)
    finally:
        held.release()
        stop.set()
        for t in threads:
            t.join(timeout=300)  # a hang guard: each client ends after its request in flight
    try:
        print(
            f"\nkill -9 of shard 0: down {back - killed:.1f} s ({released - killed:.1f} s held by the test); "
            f"{len(log)} adds, {sum(e[4] == 200 for e in log)} acknowledged, {count(0, 503)} answered 503 "
            f"(all shard 0's); shard 1: {count(1, 200, killed, released)} acknowledged while shard 0 was down"
        )
        statuses = {e[4] for e in log}
        assert statuses <= {200, 503}, (
            statuses
        )  # never another shard's answer (-2), never a dropped connection
        assert all(e[4] == 200 for e in log if e[2] == 1), "shard 1 failed while shard 0 was down"
        assert count(1, 200, killed + 1, released) >= 5, "shard 1 paused while shard 0 was down"
        assert count(0, 503, killed, back + 5) >= 1, "shard 0's users were not answered 503 while it was down"
        assert count(0, 200, after=back) >= 5, "shard 0 never served again"
        acked: dict[str, set[str]] = {}
        for _, u, _, text, status in log:
            if status == 200:
                acked.setdefault(u, set()).add(text)
        with requests.Session() as s:
            for u, texts in acked.items():
                missing = texts - _texts(s, url, u)
                assert not missing, f"{u}: acknowledged adds lost: {sorted(missing)[:3]}"
    finally:
        _stop()


def test_routing_is_stable_across_a_restart(cluster, tmp_path: Path):
    import requests

    port = cluster
    url = f"http://127.0.0.1:{port}"
    root = tmp_path / "set"
    everyone = [u for group in _users(3) for u in group]
    _deploy(root, port)
    try:
        with requests.Session() as s:
            first = {}
            for u in everyone:
                r = _add(s, url, u, f"{u} was here first")
                assert r.status_code == 200, r.text
                first[u] = r.headers["X-Shard"]
    finally:
        _stop()
    before = {k: _stored_users(root / f"shard-{k}") for k in (0, 1)}
    with pytest.raises(ManifestError, match="not --shards 3"):
        _deploy(root, port, shards=3)
    _deploy(root, port, shards=None)  # the manifest's count, the manifest's rule
    try:
        with requests.Session() as s:
            for u in everyone:
                r = s.get(
                    f"{url}/v1/memories", params={"user_id": u}, headers={"Authorization": f"Bearer {KEY}"}
                )
                assert r.status_code == 200 and r.headers["X-Shard"] == first[u] == str(shard_of(u, 2))
                assert {x["text"] for x in r.json()["units"] if x["type"] == "message"} == {
                    f"{u} was here first"
                }
                assert _add(s, url, u, f"{u} came back").headers["X-Shard"] == first[u]
    finally:
        _stop()
    for k in (0, 1):
        assert _stored_users(root / f"shard-{k}") == before[k] == {u for u in everyone if first[u] == str(k)}
