"""tern serve's /metrics as routers read it: parsed by the Prometheus client library's own text
parser (a malformed line fails the parse), with vLLM's and llama-server's series present and
their values equal to what the requests' own usage and the /slots endpoint report."""

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import STORIES, Serve


@pytest.fixture()
def server():
    with Serve(STORIES, "-np", "2", "-c", "256", "--alias", "stories") as srv:
        yield srv.url


def _post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())


def _samples(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")), s.labels.get("le"))] = s.value
    return out


def _get(samples, name, le=None, model=True):
    labels = (("model_name", "stories"),) if model else ()
    return samples[(name, labels, le)]


def test_router_metrics(server):
    a = _post(server, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 9, "temperature": 0,
                                          "ignore_eos": True})
    b = _post(server, "/v1/completions", {"prompt": "Once upon a time, there", "max_tokens": 5, "temperature": 0,
                                          "ignore_eos": True})
    m = _samples(server)
    n_prompt = a["usage"]["prompt_tokens"] + b["usage"]["prompt_tokens"]
    n_gen = a["usage"]["completion_tokens"] + b["usage"]["completion_tokens"]
    n_cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert n_gen == 14
    assert n_cached > 0                               # the second prompt extends the first's cache
    assert _get(m, "vllm:prompt_tokens_total") == n_prompt
    assert _get(m, "vllm:generation_tokens_total") == n_gen
    assert _get(m, "vllm:prefix_cache_queries_total") == n_prompt
    assert _get(m, "vllm:prefix_cache_hits_total") == n_cached
    assert _get(m, "vllm:num_requests_running") == 0
    assert _get(m, "vllm:num_requests_waiting") == 0
    assert _get(m, "vllm:time_to_first_token_seconds_count") == 2
    assert _get(m, "vllm:inter_token_latency_seconds_count") == n_gen - 2
    assert _get(m, "vllm:inter_token_latency_seconds_bucket", le="+Inf") == n_gen - 2
    slots = json.loads(urllib.request.urlopen(server + "/slots", timeout=10).read())
    held = sum(s["n_cached_tokens"] for s in slots)
    assert held > 0
    assert abs(_get(m, "vllm:kv_cache_usage_perc") - held / (2 * 256)) < 1e-6
    assert abs(_get(m, "llamacpp:kv_cache_usage_ratio", model=False) - held / (2 * 256)) < 1e-6
    assert _get(m, "llamacpp:kv_cache_tokens", model=False) == held
    assert _get(m, "llamacpp:prompt_tokens_total", model=False) == n_prompt
    assert _get(m, "llamacpp:tokens_predicted_total", model=False) == n_gen
    assert _get(m, "llamacpp:requests_processing", model=False) == 0
    assert _get(m, "llamacpp:requests_deferred", model=False) == 0
