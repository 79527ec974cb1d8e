"""The openai reader against a real local HTTP server (``openai_server``) that serves the tiny
random Llama through the hf reader: same tokens, logprobs and texts as the hf reader, batched and
concurrent equal to one by one, usage counts, retries (timeouts, malformed answers, 503), the API
key header, and the top-K entropy estimator on hand-worked distributions. No network."""

from __future__ import annotations

import math
import socket
import time

import numpy as np
import pytest
from openai_server import CompletionServer

from xmemory_gpu.llm import load_reader
from xmemory_gpu.llm.openai import OpenAIReader, ReaderHTTPError, _parse
from xmemory_gpu.llm.topk_entropy import entropy_from_topk

PROMPTS = [
    "alice moved to lisbon last week",
    "where does alice live now",
    "bob",
    "the cat sat on the mat and then it slept",
    "what did bob say",
    "lisbon is a city",
]
# 3 attempts with short backoffs; the timeout is one that only a server that never answers reaches,
# so how many attempts a test sees depends on what the server answers, not on the machine's speed
RETRY = {"timeout": 120.0, "retries": 2, "backoff": 0.01}


@pytest.fixture(scope="module")
def ref(tiny_model):
    return load_reader(f"hf:{tiny_model}", device="cpu", batch_size=3)


@pytest.fixture(scope="module")
def server(tiny_model):
    with CompletionServer(load_reader(f"hf:{tiny_model}", device="cpu")) as s:
        yield s


@pytest.fixture
def srv(server):
    server.reset()
    yield server
    server.release()


def wait_until(cond, tries: int = 6000) -> bool:
    """Poll ``cond`` (every 10 ms, bounded by ``tries``): a condition, not a time, is waited for."""
    for _ in range(tries):
        if cond():
            return True
        time.sleep(0.01)
    return cond()


@pytest.fixture(scope="module")
def ref_nll(ref):
    return ref.uncertainty(PROMPTS, n_tokens=6, kind="mean_nll")


def client(server, mode: str = "", **kw) -> OpenAIReader:
    return OpenAIReader(server.url(mode), "tiny", **kw)


def assert_same(got, want, ids: bool = True) -> None:
    for a, b in zip(got, want, strict=True):
        if ids:
            assert a.token_ids == b.token_ids
        else:
            assert a.token_ids == [-1] * len(b.token_ids)
        np.testing.assert_allclose(a.token_logprob, b.token_logprob, rtol=1e-4, atol=1e-4)
        assert a.value == pytest.approx(b.value, rel=1e-4, abs=1e-4)


# -- the estimator ------------------------------------------------------------------------------------
def _h(p) -> float:
    p = np.asarray(p, float)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def test_topk_entropy_hand_worked():
    p = [0.5, 0.25, 0.25]
    assert entropy_from_topk(np.log(p), None) == pytest.approx(1.5 * math.log(2))  # all mass known: exact
    assert entropy_from_topk(np.log(p), 3) == pytest.approx(1.5 * math.log(2))
    # top 2 of [0.4, 0.3, 0.1, 0.1, 0.1]: r = 0.3; uniform over the 3 others is the true tail here
    q = [0.4, 0.3, 0.1, 0.1, 0.1]
    assert entropy_from_topk(np.log(q[:2]), 5) == pytest.approx(_h(q))
    assert entropy_from_topk(np.log(q[:2]), None) == pytest.approx(_h([0.4, 0.3, 0.3]))  # one lump of 0.3
    assert entropy_from_topk([0.0, -math.inf], None) == 0.0
    with pytest.raises(ValueError, match="NaN"):
        entropy_from_topk([float("nan")], None)


def test_topk_entropy_brackets_truth(rng):
    for _ in range(50):
        v = int(rng.integers(5, 200))
        z = rng.standard_normal(v) * rng.uniform(0.1, 5)
        lp = z - np.log(np.exp(z - z.max()).sum()) - z.max()
        true = _h(np.exp(lp))
        top = np.sort(lp)[::-1][: int(rng.integers(1, v))]
        assert entropy_from_topk(top, None) <= true + 1e-9 <= entropy_from_topk(top, v) + 2e-9


# -- against the hf reader ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["", "plain", "shuffled"])
def test_mean_nll_equals_hf(srv, ref, ref_nll, mode):
    r = client(srv, mode, batch_size=2, concurrency=2)
    got = r.uncertainty(PROMPTS, n_tokens=6, kind="mean_nll")
    assert_same(got, ref_nll, ids=mode != "plain")  # plain: no ids from the server, -1 placeholders
    assert not any(u.estimated for u in got)
    want_p = [u.prompt_tokens for u in ref_nll]
    if mode == "plain":  # per-prompt counts split from the batch's usage: totals are exact
        assert sum(u.prompt_tokens for u in got) == sum(want_p)
    else:
        assert [u.prompt_tokens for u in got] == want_p
    assert r.usage.prompt_tokens == sum(want_p) and r.usage.output_tokens == sum(
        len(u.token_ids) for u in ref_nll
    )


def test_plain_server_single_prompt_counts_exact(srv, ref_nll):
    got = client(srv, "plain", batch_size=1).uncertainty(PROMPTS[:3], n_tokens=6)
    assert [u.prompt_tokens for u in got] == [u.prompt_tokens for u in ref_nll[:3]]


def test_entropy_estimate_brackets_true_entropy(srv, ref, tiny_model):
    true = ref.uncertainty(PROMPTS, n_tokens=6, kind="entropy")
    vocab = len(ref.tokenizer)
    est = {
        (k, v): client(srv, logprobs=k, vocab_size=v).uncertainty(PROMPTS, n_tokens=6, kind="entropy")
        for k in (5, 20)
        for v in (None, vocab)
    }
    for i, t in enumerate(true):
        for res in est.values():
            u = res[i]
            assert u.estimated and u.kind == "entropy" and u.token_ids == t.token_ids
            assert u.value == pytest.approx(np.mean(u.token_entropy))
        lump5, uni5, lump20, uni20 = (
            np.array(est[key][i].token_entropy) for key in [(5, None), (5, vocab), (20, None), (20, vocab)]
        )
        truth = np.array(t.token_entropy)
        # lump <= truth <= uniform (float32 logits: 1e-4), and a larger K tightens both bounds
        assert np.all(lump5 <= lump20 + 1e-9) and np.all(lump20 <= truth + 1e-4)
        assert np.all(truth <= uni20 + 1e-4) and np.all(uni20 <= uni5 + 1e-9)
        # the random tiny model is nearly uniform over ~30k tokens: spreading the rest uniformly is
        # close to exact (the lump is not: it drops almost all of log V)
        np.testing.assert_allclose(uni5, truth, rtol=0.02)
    # the tokenizer gives the vocabulary size by default
    assert client(srv, tokenizer=str(tiny_model)).vocab_size == vocab


def test_generate_equals_hf(srv, ref):
    want = ref.generate(PROMPTS, max_tokens=5)
    for mode in ("", "plain"):
        r = client(srv, mode, batch_size=4, concurrency=2)
        got = r.generate(PROMPTS, max_tokens=5, purpose="answer")
        assert got.texts == want.texts
        if mode == "":
            assert got.prompt_tokens == want.prompt_tokens and got.output_tokens == want.output_tokens
        assert r.usage.by_purpose["answer"] == [
            len(PROMPTS),
            sum(want.prompt_tokens),
            sum(want.output_tokens),
        ]


def test_batching_and_concurrency_equal_one_by_one(srv, ref_nll):
    r = client(
        srv, "delay", batch_size=2, concurrency=3
    )  # the server holds a request until a second one comes
    batched = r.uncertainty(PROMPTS, n_tokens=6)
    assert srv.batches["delay"] == [2, 2, 2] and r.requests == 3
    assert srv.max_inflight >= 2  # requests overlapped
    single = client(srv, batch_size=1, concurrency=1)
    one = [single.uncertainty([p], n_tokens=6)[0] for p in PROMPTS]
    assert srv.batches[""] == [1] * len(PROMPTS)
    assert_same(batched, one)
    assert_same(batched, ref_nll)


def test_usage_counts(srv, ref, ref_nll):
    r = client(srv, batch_size=4)
    r.uncertainty(PROMPTS, n_tokens=6, purpose="probes")
    r.uncertainty(PROMPTS[:2], n_tokens=6, purpose="probes")
    p = [u.prompt_tokens for u in ref_nll]
    o = [len(u.token_ids) for u in ref_nll]
    assert r.usage.calls == len(PROMPTS) + 2
    assert r.usage.by_purpose["probes"] == [len(PROMPTS) + 2, sum(p) + sum(p[:2]), sum(o) + sum(o[:2])]
    assert r.requests == 3


# -- failures and retries -----------------------------------------------------------------------------
def test_timeout_retried_then_raises(srv):
    # the server answers nothing until the test ends: only the client's timeout ends each attempt
    r = client(srv, "slow", **{**RETRY, "timeout": 0.2})
    with pytest.raises(ReaderHTTPError, match=r"slow/v1/completions failed after 3 attempts: timed out") as e:
        r.uncertainty(PROMPTS[:1], n_tokens=3)
    assert e.value.attempts == 3 and r.requests == 3
    # a loaded server may read the last attempt after its client gave up: it still arrives, once
    assert wait_until(lambda: srv.hits["slow"] >= 3) and srv.hits["slow"] == 3


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("badjson", "invalid JSON"),
        ("nochoices", "missing 'choices'"),
        ("wrongcount", "1 choices for 2 prompts"),
    ],
)
def test_malformed_response_retried_then_raises(srv, mode, reason):
    r = client(srv, mode, **RETRY)
    with pytest.raises(
        ReaderHTTPError, match=f"failed after 3 attempts: malformed response: .*{reason}"
    ) as e:
        r.uncertainty(PROMPTS[:2], n_tokens=3)
    assert e.value.url == srv.url(mode) + "/completions" and e.value.status is None
    assert srv.hits[mode] == 3


def test_503_once_then_success(srv, ref_nll):
    r = client(srv, "flaky", **RETRY)  # the server's first answer is a 503, its second the completion
    got = r.uncertainty(PROMPTS[:2], n_tokens=6)
    assert srv.hits["flaky"] == 2 and r.requests == 2
    assert_same(got, ref_nll[:2])


def test_503_every_time_raises(srv):
    r = client(srv, "flaky", timeout=120.0, retries=0)
    with pytest.raises(ReaderHTTPError, match="after 1 attempt: HTTP 503") as e:
        r.uncertainty(PROMPTS[:1], n_tokens=2)
    assert e.value.status == 503


def test_bad_request_not_retried(srv):
    with pytest.raises(ReaderHTTPError, match="after 1 attempt: HTTP 400.*vllm_extras=False") as e:
        client(srv, "http400", **RETRY).uncertainty(PROMPTS[:1], n_tokens=2)
    assert e.value.status == 400 and srv.hits["http400"] == 1


def test_connection_refused_retried():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    r = OpenAIReader(f"http://127.0.0.1:{port}/v1", "tiny", **RETRY)
    with pytest.raises(ReaderHTTPError, match="after 3 attempts: connection error"):
        r.generate(["x"], max_tokens=2)
    assert r.requests == 3


def test_api_key_header_from_env(srv, monkeypatch):
    monkeypatch.setenv("XMEM_TEST_KEY", "sk-test-123")
    client(srv, api_key_env="XMEM_TEST_KEY").generate(PROMPTS[:1], max_tokens=2)
    assert srv.auth[""] == "Bearer sk-test-123"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client(srv, "plain").generate(PROMPTS[:1], max_tokens=2)
    assert srv.auth["plain"] is None


# -- specs, chat, count, parsing ----------------------------------------------------------------------
def test_load_reader_openai_spec(srv, ref, tiny_model):
    r = load_reader(f"openai:{srv.url()}#tiny", batch_size=3, tokenizer=str(tiny_model))
    assert isinstance(r, OpenAIReader) and r.name == f"openai:{srv.url()}#tiny" and r.batch_size == 3
    assert r.count(PROMPTS) == ref.count(PROMPTS) and "tokenizer" in r.count_name
    assert r.chat("hi there") == ref.chat("hi there")
    from xmemory_gpu.tokens import default_counter

    plain = load_reader(f"openai:{srv.url()}#tiny")
    assert plain.count_name == default_counter().name and plain.count(["a b"]) == default_counter().count(
        ["a b"]
    )
    for bad in ("openai:http://localhost:8000/v1", "openai:#m", "openai:localhost:8000#m"):
        with pytest.raises(ValueError):
            load_reader(bad)


def test_parse_choice_details():
    top = [{"token_id:7": -0.5, "token_id:3": -1.5}, {"x": -0.1, "z": -3.0}]
    ans = {
        "choices": [
            {
                "index": 1,
                "text": "b",
                "logprobs": {"tokens": ["token_id:9"], "token_logprobs": [-2.0], "top_logprobs": top[:1]},
            },
            {
                "index": 0,
                "text": "a",
                "token_ids": [4, 8],
                "prompt_token_ids": [1, 2, 3],
                "logprobs": {
                    "tokens": ["x", "y"],
                    "token_logprobs": [-0.1, -0.2],
                    "top_logprobs": [top[1], {"y": -0.2}],
                },
            },
        ]
    }
    (a, b), usage = _parse(ans, 2, 4, strict=True)
    assert usage is None and (a.text, b.text) == ("a", "b")
    assert a.token_ids == [4, 8] and a.prompt_tokens == 3 and b.token_ids == [9] and b.prompt_tokens is None
    assert b.top == [[-0.5, -1.5, -2.0]]  # the sampled token, not in the top K, is added once
    assert a.top == [[-0.1, -3.0], [-0.2]]  # ids from the 'token_ids' field, token strings as keys
    with pytest.raises(ValueError, match="tokens for max_tokens=1"):
        _parse(ans, 2, 1, strict=True)
    with pytest.raises(ValueError, match="not 0..1"):
        _parse({"choices": [{**ans["choices"][0], "index": 5}, ans["choices"][1]]}, 2, 4, strict=True)
    with pytest.raises(ValueError, match="no 'logprobs'"):
        _parse({"choices": [{"text": "a"}]}, 1, 4, strict=True)
    usage = {"prompt_tokens": 3, "completion_tokens": 1}
    assert _parse({"choices": [{"text": "a"}], "usage": usage}, 1, 4, strict=False)[1] == (3, 1, 0)
    usage["prompt_tokens_details"] = {"cached_tokens": 2}
    assert _parse({"choices": [{"text": "a"}], "usage": usage}, 1, 4, strict=False)[1] == (3, 1, 2)
