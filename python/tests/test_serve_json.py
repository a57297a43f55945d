"""response_format {"type": "json_object"}: the content of every reply is a prefix of one JSON
object, checked here by completing it and parsing with Python's json module (an independent
grammar); streamed deltas add up to the same content; an unsupported format is refused."""

import json

import pytest

from conftest import QWEN3, STORIES, Serve, post_json


def completes_to_object(text):
    """True if text, with closers appended as a JSON-aware scan says they are needed, parses as
    one JSON object (Python's parser): the text is then a prefix of one. Cut values are finished
    (a string closed, a number, literal or escape completed, a dangling key given a value)."""
    s = text.lstrip()
    if not s:
        return True
    if s[0] != "{":
        return False
    stack, i, in_str, esc = [], 0, False, False
    while i < len(s):
        c = s[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if not stack or stack.pop() != c:
                return False
            if not stack and s[i + 1:].strip():
                return False
        i += 1
    if not stack:
        return _parses(s)
    tail = s
    if in_str:
        if esc:
            tail += "n"
        tail = _finish_unicode(tail) + '"'
    for cand in _endings(tail, stack):
        if _parses(cand):
            return True
    return False


def _finish_unicode(t):
    k = t.rfind("\\u")
    if k >= 0 and k >= len(t) - 5 and (k == 0 or t[k - 1] != "\\"):
        t += "0" * (6 - (len(t) - k))
    return t


def _endings(t, stack):
    closers = "".join(reversed(stack))
    stripped = t.rstrip()
    bases = [t, stripped + "0", stripped + "e0", stripped + "0e0", stripped + "rue", stripped + "ue", stripped + "e",
             stripped + "alse", stripped + "lse", stripped + "se", stripped + "ull", stripped + "ll", stripped + "l",
             stripped + "null", stripped + ":null", stripped + "\"\":null", stripped + "\":null"]
    for b in bases:
        yield b + closers
        if stripped.endswith(","):
            yield stripped[:-1] + closers


def _parses(t):
    try:
        return isinstance(json.loads(t), dict)
    except ValueError:
        return False


def test_checker_itself():
    for good in ['', '  {', '{"a"', '{"a":', '{"a": [1, 2.', '{"a": tr', '{"a": "x\\', '{"a": "\\u00', '{"a":{}}',
                 '{"k": [{"b": nul', '{"a": 1e', '{"a": -']:
        assert completes_to_object(good), good
    for bad in ['[', '"a"', '{a', '{"a" 1', '{"a":1,}', '{}{}', '{"a": tx']:
        assert not completes_to_object(bad), bad


@pytest.mark.parametrize("model", [QWEN3, STORIES])
def test_json_object(model):
    with Serve(model, "-np", "1", "-c", "1024") as srv:
        for seed in (1, 2, 3):
            body = {"messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": 48, "temperature": 1.0,
                    "seed": seed, "response_format": {"type": "json_object"},
                    "chat_template_kwargs": {"enable_thinking": False}}
            st, r = post_json(srv.url, "/v1/chat/completions", body)
            assert st == 200, r
            content = r["choices"][0]["message"]["content"]
            assert completes_to_object(content), repr(content)
            if r["choices"][0]["finish_reason"] == "stop":
                assert isinstance(json.loads(content), dict)
        import urllib.request
        req = urllib.request.Request(srv.url + "/v1/chat/completions", data=json.dumps(dict(body, stream=True)).encode(),
                                     headers={"Content-Type": "application/json"})
        streamed = ""
        with urllib.request.urlopen(req, timeout=60) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("data: {"):
                    ch = json.loads(line[6:])["choices"]
                    streamed += (ch[0]["delta"].get("content") or "") if ch else ""
        assert streamed == content                    # the same seed: the same guided reply
        st, r = post_json(srv.url, "/v1/completions", {"prompt": "Data:", "max_tokens": 32, "temperature": 1.0, "seed": 4,
                                                       "response_format": {"type": "json_object"}})
        assert st == 200 and completes_to_object(r["choices"][0]["text"]), r
        st, r = post_json(srv.url, "/v1/chat/completions",
                          dict(body, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}))
        assert st == 400 and r["error"]["param"] == "response_format"
