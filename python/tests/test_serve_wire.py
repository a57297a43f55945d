"""/v1/messages and /v1/responses driven by the official Anthropic and openai npm clients
(tests/server/wire_clients.mjs: whole and streamed replies against the same request as a chat
completion, tool-use conversations, refusals), on the Qwen3 golden model."""

import os
import shutil
import subprocess

import pytest

from conftest import QWEN3, ROOT, STORIES, Serve, post_json

SERVER_TESTS = os.path.join(ROOT, "tests", "server")


def test_official_clients():
    needs = [os.path.join(SERVER_TESTS, "node_modules", p, "package.json") for p in ("openai", "@anthropic-ai/sdk")]
    if not shutil.which("node") or not all(os.path.exists(p) for p in needs):
        if os.environ.get("CI") == "true":
            pytest.fail("node or the npm clients are missing (make deps runs npm ci in tests/server)")
        pytest.skip("node or the npm clients are missing (npm ci --prefix tests/server)")
    with Serve(QWEN3, "--alias", "test-model", "-np", "2", "-c", "1024") as srv:
        r = subprocess.run(["node", os.path.join(SERVER_TESTS, "wire_clients.mjs"), srv.url], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out
    assert "all checks passed" in out


def test_keys_and_error_shapes():
    """--api-key: Anthropic's x-api-key or OpenAI's Bearer, either one right is enough; a refusal
    comes in the error shape of the endpoint's own API (Messages: {"type": "error", ...})."""
    msg = {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    with Serve(STORIES, "--api-key", "K") as srv:
        st, r = post_json(srv.url, "/v1/messages", msg, {"x-api-key": "K"})
        assert st == 200 and r["type"] == "message"
        st, r = post_json(srv.url, "/v1/messages", msg, {"x-api-key": "K", "Authorization": "Bearer nope"})
        assert st == 200
        st, r = post_json(srv.url, "/v1/messages", msg, {"x-api-key": "nope"})
        assert st == 401 and r["type"] == "error" and r["error"]["type"] == "authentication_error"
        st, r = post_json(srv.url, "/v1/chat/completions", chat, {"Authorization": "Bearer K"})
        assert st == 200
        st, r = post_json(srv.url, "/v1/chat/completions", chat, {})
        assert st == 401 and r["error"]["type"] == "authentication_error" and "code" in r["error"]
