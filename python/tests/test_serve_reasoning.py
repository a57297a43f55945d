"""Reasoning in tern serve on the Qwen3.5 template (qwen35-tiny: the prompt opens a <think> block):
reasoning text goes to reasoning_content and reasoning, never to content; a reasoning budget
(reasoning_budget, vLLM's thinking_budget, or Anthropic's thinking.budget_tokens) closes the block
after that many tokens, so the answer begins: the budgeted reply's reasoning is the first tokens
of the unbudgeted one, and the two names must agree."""

from conftest import post_json, Serve

QWEN35 = "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"


def test_reasoning_budget():
    base = {"messages": [{"role": "user", "content": "Why is the sky blue?"}], "max_tokens": 12, "temperature": 0,
            "ignore_eos": True}
    with Serve(QWEN35, "-np", "1", "-c", "512") as srv:
        st, free = post_json(srv.url, "/v1/chat/completions", base)
        assert st == 200
        fm = free["choices"][0]["message"]
        assert fm.get("reasoning_content") and fm["reasoning"] == fm["reasoning_content"]
        for field in ("reasoning_budget", "thinking_budget"):
            st, r = post_json(srv.url, "/v1/chat/completions", dict(base, **{field: 3}))
            assert st == 200
            m = r["choices"][0]["message"]
            assert r["usage"]["completion_tokens"] == 12
            assert m["reasoning_content"] and fm["reasoning_content"].startswith(m["reasoning_content"])
            assert len(m["reasoning_content"]) < len(fm["reasoning_content"])
            assert m["content"]                       # the answer began after the forced </think>
        st, r = post_json(srv.url, "/v1/chat/completions", dict(base, reasoning_budget=3, thinking_budget=4))
        assert st == 400 and r["error"]["param"] == "thinking_budget"
        st, r = post_json(srv.url, "/v1/chat/completions", dict(base, reasoning_budget=-2))
        assert st == 400 and r["error"]["param"] == "reasoning_budget"
        st, m = post_json(srv.url, "/v1/messages", {"max_tokens": 12, "temperature": 0,
                                                "thinking": {"type": "enabled", "budget_tokens": 3},
                                                "messages": [{"role": "user", "content": "Why is the sky blue?"}]})
        assert st == 200
        blocks = {b["type"]: b for b in m["content"]}
        assert fm["reasoning_content"].startswith(blocks["thinking"]["thinking"])
        assert len(blocks["thinking"]["thinking"]) < len(fm["reasoning_content"])
