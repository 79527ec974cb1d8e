"""A real local OpenAI-compatible ``/v1/completions`` server for tests (no network): a
``ThreadingHTTPServer`` on 127.0.0.1 that serves an ``hf`` reader's model. Greedy tokens come from
the reader's ``uncertainty``; per-step logprobs and the top K from one forward pass of its model
over prompt + continuation. Like vLLM's server it honours ``return_tokens_as_token_ids`` (tokens as
``token_id:N``) and ``return_token_ids`` (``token_ids`` and ``prompt_token_ids`` per choice).

The first path segment picks a behaviour: ``/v1/...`` normal; ``/plain/v1/...`` ignores vLLM's
extra fields (token strings, no ids, like OpenAI or llama.cpp); ``/shuffled/`` returns choices in
reverse order (with ``index``); ``/delay/`` holds each request until two have been in flight at
once (so a client that overlaps its requests is seen to, whatever the machine's speed; bounded by
``HOLD_S``); ``/slow/`` answers nothing until ``release()`` (past any client timeout; bounded by
``HOLD_S``); ``/badjson/`` answers invalid JSON; ``/nochoices/`` JSON without
``choices``; ``/wrongcount/`` one choice too few; ``/flaky/`` 503 on odd-numbered hits;
``/http400/`` a 400. ``hits``, ``batches``, ``auth`` and ``max_inflight`` record what came in.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

HOLD_S = 120.0  # only bounds a wait that a broken client would otherwise never end


class CompletionServer:
    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.lock = threading.Lock()  # one model call at a time (a fast tokenizer is not re-entrant)
        self.stats_lock = threading.Lock()
        self.hits: dict[str, int] = defaultdict(int)
        self.batches: dict[str, list[int]] = defaultdict(list)
        self.auth: dict[str, str | None] = {}
        self.inflight = 0
        self.max_inflight = 0
        self.overlapped = threading.Condition(self.stats_lock)  # notified when in-flight requests change
        self.released = threading.Event()  # set: ``/slow/`` requests end (unanswered)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, mode: str = "") -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}" + (f"/{mode}" if mode else "") + "/v1"

    def __enter__(self) -> CompletionServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        with self.stats_lock:
            self.hits.clear()
            self.batches.clear()
            self.auth.clear()
            self.max_inflight = 0
        self.released.clear()

    def release(self) -> None:
        """End the ``/slow/`` requests still held (unanswered: their clients timed out long ago)."""
        self.released.set()

    # -- one request -------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = h.path.strip("/").split("/")
        mode = parts[0] if parts[0] != "v1" else ""
        if parts[-2:] != ["v1", "completions"]:
            return _send(h, 404, b'{"error": "not found"}')
        body = json.loads(h.rfile.read(int(h.headers.get("Content-Length", 0))))
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        with self.stats_lock:
            self.hits[mode] += 1
            hit = self.hits[mode]
            self.batches[mode].append(len(prompts))
            self.auth[mode] = h.headers.get("Authorization")
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            self.overlapped.notify_all()
            if mode == "delay":  # wait for a second request to arrive while this one is held
                self.overlapped.wait_for(lambda: self.max_inflight >= 2, timeout=HOLD_S)
        try:
            if mode == "slow":
                self.released.wait(HOLD_S)
                return None
            if mode == "badjson":
                return _send(h, 200, b'{"choices": [')
            if mode == "nochoices":
                return _send(
                    h,
                    200,
                    json.dumps(
                        {"object": "text_completion", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
                    ).encode(),
                )
            if mode == "flaky" and hit % 2 == 1:
                return _send(h, 503, b'{"error": "overloaded"}')
            if mode == "http400":
                return _send(h, 400, b'{"error": "bad request"}')
            vllm_like = mode != "plain"
            with self.lock:
                answer = self._complete(
                    prompts,
                    int(body["max_tokens"]),
                    int(body.get("logprobs") or 0),
                    vllm_like and bool(body.get("return_tokens_as_token_ids")),
                    vllm_like and bool(body.get("return_token_ids")),
                )
            if mode == "wrongcount":
                answer["choices"] = answer["choices"][:-1]
            if mode == "shuffled":
                answer["choices"] = answer["choices"][::-1]
            _send(h, 200, json.dumps(answer).encode())
        finally:
            with self.stats_lock:
                self.inflight -= 1
                self.overlapped.notify_all()

    def _complete(self, prompts: list[str], max_tokens: int, k: int, as_ids: bool, with_ids: bool) -> dict:
        r = self.reader
        tok = r.tokenizer
        unc = r.uncertainty(prompts, n_tokens=max_tokens, kind="mean_nll", purpose="server")
        choices = []
        for i, (prompt, u) in enumerate(zip(prompts, unc)):
            p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logits = r.model(torch.tensor([p_ids + u.token_ids])).logits[
                    0, len(p_ids) - 1 : len(p_ids) - 1 + len(u.token_ids)
                ]
            logp = torch.log_softmax(logits.double(), dim=-1)
            name = (lambda t: f"token_id:{t}") if as_ids else (lambda t: tok.convert_ids_to_tokens(t))
            top_lp, top_ids = logp.topk(k, dim=-1) if k else (None, None)
            choice: dict[str, Any] = {
                "index": i,
                "text": tok.decode(u.token_ids, skip_special_tokens=True),
                "logprobs": {
                    "tokens": [name(t) for t in u.token_ids],
                    "token_logprobs": [float(logp[s, t]) for s, t in enumerate(u.token_ids)],
                    "top_logprobs": [
                        {name(int(t)): float(v) for t, v in zip(top_ids[s].tolist(), top_lp[s].tolist())}
                        if k
                        else None
                        for s in range(len(u.token_ids))
                    ],
                    "text_offset": [0] * len(u.token_ids),
                },
                "finish_reason": "stop" if tok.eos_token_id in u.token_ids else "length",
            }
            if with_ids:
                choice["token_ids"], choice["prompt_token_ids"] = list(u.token_ids), list(p_ids)
            choices.append(choice)
        usage = {
            "prompt_tokens": sum(u.prompt_tokens for u in unc),
            "completion_tokens": sum(len(u.token_ids) for u in unc),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {
            "id": "cmpl-test",
            "object": "text_completion",
            "created": int(time.time()),
            "model": "tiny",
            "choices": choices,
            "usage": usage,
        }


def _send(h: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    try:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
        pass
