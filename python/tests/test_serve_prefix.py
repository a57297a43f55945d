"""Prefix reuse on the hybrid model (qwen35-tiny: Gated DeltaNet layers whose recurrent state
cannot be rolled back into an evaluated prompt): each slot keeps checkpoints of the state after
its prompt chunks, so a later request that shares a long prefix with the cached prompt but ends
differently resumes from the last checkpoint inside the shared part (cached_tokens > 0) and
answers exactly as a server that never saw the first request."""

from conftest import Serve, post_json

QWEN35 = "golden/qwen35-tiny-pq2_0/qwen35-tiny-pq2_0.gguf"
SHARED = "The quick brown fox jumps over the lazy dog. " * 12


def _req(tail):
    return {"prompt": SHARED + tail, "max_tokens": 12, "temperature": 0}


def test_prefix_reuse_on_recurrent_state():
    args = ("-np", "1", "-c", "1024", "-b", "64")
    with Serve(QWEN35, *args) as srv:
        st, a = post_json(srv.url, "/v1/completions", _req("Then the fox slept."))
        assert st == 200
        st, b = post_json(srv.url, "/v1/completions", _req("But the dog woke up and barked at the moon."))
        assert st == 200
    cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 64 <= cached < a["usage"]["prompt_tokens"], b["usage"]
    with Serve(QWEN35, *args) as fresh:                # the same request with nothing cached
        st, c = post_json(fresh.url, "/v1/completions", _req("But the dog woke up and barked at the moon."))
    assert c["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert b["choices"][0]["text"] == c["choices"][0]["text"]
