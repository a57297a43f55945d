"""tern serve --models-dir: every .gguf of a folder behind one address. /v1/models lists them with
their state; a request's "model" picks one (none: 400; unknown: 404 model_not_found); a model
loads on first use and answers as the same model served alone; with a memory budget that holds
one model at a time (TERN_MEM_AVAILABLE) the least recently used idle model is unloaded for the
next; a model with a request running is never unloaded (/models/unload is 409, and a load that
would need its memory is 503 until the request ends); requests that arrive while a model loads
wait for it."""

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import QWEN3, STORIES, Serve, free_port, post_json, require, tern_bin, wait_http


def _generated_total(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return next(int(l.split()[1]) for l in text.splitlines() if l.startswith("tern_generated_tokens_total "))


def _post_raw(url, path, body):
    """POST the bytes body (Content-Type: application/json); returns (status, the decoded JSON answer)."""
    req = urllib.request.Request(url + path, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _states(url):
    data = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=10).read())["data"]
    return {m["id"]: m["status"]["value"] for m in data}


@pytest.fixture()
def folder(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    os.symlink(require(STORIES), d / "stories.gguf")
    os.symlink(require(QWEN3), d / "qwen3.gguf")
    (d / "notes.txt").write_text("not a model")
    return d


def _serve_dir(folder, budget=None, ctx=2048):
    """tern serve --models-dir folder, one slot of ctx tokens, with TERN_MEM_AVAILABLE=budget when
    given; returns (the process, its stderr a pipe; its base URL) once /health answers."""
    port = free_port()
    env = dict(os.environ, TERN_MEM_AVAILABLE=str(budget)) if budget else None
    p = subprocess.Popen([tern_bin(), "serve", "--models-dir", str(folder), "-t", "1", "-np", "1", "-c", str(ctx),
                          "--port", str(port), "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wait_http("http://127.0.0.1:%d/health" % port, time.time() + 30, p)
    return p, "http://127.0.0.1:%d" % port


def test_models_dir(folder):
    # a budget for qwen3 (its file + one 2048-token slot: 4.2 MB of KV cache) or stories, not both at once
    budget = os.path.getsize(require(QWEN3)) + 5_600_000
    p, url = _serve_dir(folder, budget)
    try:
        assert _states(url) == {"qwen3": "unloaded", "stories": "unloaded"}
        req = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}
        st, r = post_json(url, "/v1/completions", req)
        assert st == 400 and r["error"]["param"] == "model"
        st, r = post_json(url, "/v1/completions", dict(req, model="nope"))
        assert st == 404 and r["error"]["code"] == "model_not_found"
        st, r = post_json(url, "/v1/completions", dict(req, model="stories", temperature=5))
        assert st == 400 and r["error"]["param"] == "temperature"
        assert _states(url) == {"qwen3": "unloaded", "stories": "unloaded"}   # a bad request loads nothing
        st, a = post_json(url, "/v1/completions", dict(req, model="stories"))
        assert st == 200 and a["model"] == "stories"
        with Serve(STORIES) as alone:                 # the same model served by itself
            st, b = post_json(alone.url, "/v1/completions", req)
        assert a["choices"][0]["text"] == b["choices"][0]["text"]
        assert _states(url) == {"qwen3": "unloaded", "stories": "loaded"}
        st, r = post_json(url, "/v1/chat/completions",
                      {"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert st == 200 and r["model"] == "qwen3"
        assert _states(url) == {"qwen3": "loaded", "stories": "unloaded"}   # least recently used, idle: out

        # a model with a request running is never unloaded: qwen3 generates a long reply meanwhile
        # (1800 tokens: about a second here, so the two requests below come while it runs)
        done = []
        longreq = {"model": "qwen3", "prompt": "Once", "max_tokens": 1800, "temperature": 0, "ignore_eos": True}
        th = threading.Thread(target=lambda: done.append(post_json(url, "/v1/completions", longreq)))
        th.start()
        deadline = time.time() + 30
        while time.time() < deadline:
            slots = json.loads(urllib.request.urlopen(url + "/slots?model=qwen3", timeout=10).read())
            if any(x["is_processing"] and x["n_decoded"] > 0 for x in slots):
                break
            time.sleep(0.01)
        st, r = post_json(url, "/models/unload", {"model": "qwen3"})
        assert st == 409, r
        st, r = post_json(url, "/v1/completions", dict(req, model="stories"))
        assert st == 503 and "could not be loaded" in r["error"]["message"], r
        th.join(timeout=120)
        assert done and done[0][0] == 200 and done[0][1]["usage"]["completion_tokens"] == 1800
        st, r = post_json(url, "/v1/completions", dict(req, model="stories"))   # now qwen3 is idle: it goes
        assert st == 200 and r["choices"][0]["text"] == a["choices"][0]["text"]
        assert _states(url) == {"qwen3": "unloaded", "stories": "loaded"}

        # two requests for a model that is not loaded: one loads it, the other waits for it
        out = []
        th = [threading.Thread(target=lambda: out.append(post_json(url, "/v1/completions", dict(req, model="qwen3"))))
              for _ in range(2)]
        for t in th:
            t.start()
        for t in th:
            t.join(timeout=60)
        assert [s for s, _ in out] == [200, 200]
        assert out[0][1]["choices"][0]["text"] == out[1][1]["choices"][0]["text"]
        assert _states(url) == {"qwen3": "loaded", "stories": "unloaded"}
        gen_before = _generated_total(url)
        st, r = post_json(url, "/models/unload", {"model": "qwen3"})
        assert st == 200 and r == {"success": True}
        assert _generated_total(url) == gen_before       # an unloaded model's counts stay in the totals
        st, r = post_json(url, "/models/load", {"model": "stories"})
        assert st == 200 and _states(url)["stories"] == "loaded"
        st, r = post_json(url, "/models/load", {"model": "nope"})
        assert st == 404
        st, r = post_json(url, "/models/unload", {})
        assert st == 400
        # a bad body is named as every endpoint names it, not as a missing 'model'
        for path in ("/models/load", "/models/unload"):
            for body, status, text in (
                    (b'{"model": "stories"} x', 400, "not valid JSON"),
                    (b'{"model": "stories", "model": "stories"}', 400, "duplicate key 'model'"),
                    (b'{"model": 5}', 400, "'model' must be a string, got 5"),
                    (b'{"model": "st\xffories"}', 400, "not valid UTF-8"),
                    (b'[]', 400, "object"),
                    (b'{"model": ""}', 400, "'model' is an empty string"),
                    (b'{}', 400, "'model' is required")):
                st, r = _post_raw(url, path, body)
                assert st == status and text in r["error"]["message"], (path, body, st, r)
        # multi-model /tokenize: its body's errors too
        st, r = _post_raw(url, "/tokenize", b'{"model": ["stories"], "content": "x"}')
        assert st == 400 and "'model' must be a string, got an array" in r["error"]["message"], r
        # a query model id with a NUL byte (%00) is refused, not cut at it
        try:
            urllib.request.urlopen(url + "/props?model=stories%00x", timeout=10)
            assert False, "expected 400"
        except urllib.error.HTTPError as e:
            assert e.code == 400 and "NUL byte" in json.loads(e.read())["error"]["message"]
        # ?model= twice names no one model
        try:
            urllib.request.urlopen(url + "/props?model=stories&model=other", timeout=10)
            assert False, "expected 400"
        except urllib.error.HTTPError as e:
            assert e.code == 400 and "the query gives 'model' 2 times; expected one model id" in json.loads(e.read())["error"]["message"]
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_one_model_refuses_load_and_unload():
    with Serve(STORIES) as srv:
        for path in ("/models/load", "/models/unload"):
            st, r = post_json(srv.url, path, {"model": "anything"})
            assert st == 400 and "--models-dir" in r["error"]["message"]


def test_models_dir_refusals(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    only_dirs = tmp_path / "only_dirs"
    (only_dirs / "x.gguf").mkdir(parents=True)
    for args, code, text in (
            (["--models-dir", str(empty)], 1, "no .gguf file"),
            (["--models-dir", str(tmp_path / "missing")], 1, "--models-dir"),
            (["--models-dir", str(empty), "-m", require(STORIES)], 2, "exclude each other"),
            (["--models-dir", str(empty), "--alias", "x"], 2, "--alias"),
            (["--models-dir", str(only_dirs)], 1, "none of its 1 .gguf entries can be served")):
        r = subprocess.run([tern_bin(), "serve", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        assert r.returncode == code and text in r.stderr.decode(), (args, r.returncode, r.stderr)


def test_models_dir_warns_on_entries_not_files(tmp_path):
    # a directory and a FIFO named *.gguf are named on stderr with what they are; the regular file is served
    d = tmp_path / "models"
    d.mkdir()
    os.symlink(require(STORIES), d / "stories.gguf")
    (d / "x.gguf").mkdir()
    os.mkfifo(d / "pipe.gguf")
    os.symlink(require(STORIES), d / ".gguf")                          # no name before .gguf: no model id
    os.symlink(require(STORIES), os.path.join(os.fsencode(d), b"bad\xffname.gguf"))   # an id is UTF-8 text
    p, url = _serve_dir(d, ctx=256)
    try:
        assert _states(url) == {"stories": "unloaded"}
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    err = err.decode()
    for name, kind in (("x.gguf", "a directory"), ("pipe.gguf", "a FIFO")):
        want = "--models-dir: '%s' is %s, expected a regular file (a GGUF model); not served" % (d / name, kind)
        assert want in err, err
    assert "'%s': the name is empty before .gguf" % (d / ".gguf") in err, err
    assert "'%s/bad\\xffname.gguf': the name is not valid UTF-8 (byte 0xff at offset 3)" % d in err, err


def test_models_dir_log_escapes_control_bytes(tmp_path):
    # a file name is untrusted text: its control bytes reach the log as \xNN (here \x0a for a
    # newline, \x0d for a CR), so a name cannot split a log line or forge one of its own
    d = tmp_path / "models"
    d.mkdir()
    dd = os.fsencode(d)
    os.symlink(require(STORIES), os.path.join(dd, b"ev\ntern serve: forged.gguf"))
    with open(os.path.join(dd, b"ba\nd.gguf"), "wb") as f:
        f.write(b"not a model at all")
    os.mkfifo(os.path.join(dd, b"pi\rpe.gguf"))
    p, url = _serve_dir(d, ctx=256)
    try:
        st, r = post_json(url, "/v1/completions", {"model": "ev\ntern serve: forged", "prompt": "x", "max_tokens": 1})
        assert st == 200, r
        st, r = post_json(url, "/v1/completions", {"model": "ba\nd", "prompt": "x", "max_tokens": 1})
        assert st == 500, r
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    err = err.decode()
    assert "tern serve: loaded 'ev\\x0atern serve: forged' (1 slot, context 256, " in err, err
    assert "tern serve: could not load 'ba\\x0ad': %s/ba\\x0ad.gguf: " % d in err, err
    assert "--models-dir: '%s/pi\\x0dpe.gguf' is a FIFO" % d in err, err
    assert not any(l.startswith(("tern serve: forged", "d", "d.gguf", "pe.gguf")) for l in err.splitlines()), err
    assert "\r" not in err, err


def test_models_dir_past_the_limit_singular(tmp_path):
    # 257 models where 256 are served: the one left out is "1 file ... is", not "1 files ... are"
    d = tmp_path / "models"
    d.mkdir()
    for i in range(257):
        os.symlink(require(STORIES), d / ("m%03d.gguf" % i))
    p, url = _serve_dir(d, ctx=256)
    try:
        assert len(_states(url)) == 256
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    assert "tern serve: --models-dir: 1 file past the first 256 is not served\n" in err.decode(), err


def test_models_dir_bad_file(tmp_path):
    # a file that is no GGUF model: 500 naming the model and the reason, not the server's path to
    # it (the server's log has that); the other model is still served
    d = tmp_path / "models"
    d.mkdir()
    os.symlink(require(STORIES), d / "stories.gguf")
    (d / "bad.gguf").write_bytes(b"not a model at all")
    p, url = _serve_dir(d, ctx=256)
    try:
        st, r = post_json(url, "/v1/completions", {"model": "bad", "prompt": "x", "max_tokens": 1})
        msg = r["error"]["message"]
        assert st == 500 and r["error"]["param"] == "model", r
        assert msg.startswith("model 'bad' could not be loaded: ") and "GGUF" in msg and str(tmp_path) not in msg, msg
        st, r = post_json(url, "/v1/completions", {"model": "stories", "prompt": "x", "max_tokens": 1})
        assert st == 200, r
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    assert "could not load 'bad': %s" % (d / "bad.gguf") in err.decode(), err


def test_drain_waits_for_a_request_loading_its_model(tmp_path):
    """SIGTERM while a request is still loading its model (a 460 MB file here, about a second): the
    drain counts that request, so it gets its whole answer before the server stops; a request
    after SIGTERM gets 503."""
    d = tmp_path / "models"
    d.mkdir()
    r = subprocess.run([tern_bin(), "synth", "--arch", "bonsai-1.7b", "--no-weights", "-o", str(d / "big.gguf")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    p, url = _serve_dir(d)
    try:
        out = {}

        def ask():
            out["r"] = _post_raw(url, "/v1/completions", b'{"model": "big", "prompt": "Once", "max_tokens": 4, '
                                 b'"temperature": 0}')

        th = threading.Thread(target=ask)
        th.start()
        deadline = time.time() + 30                   # the request is in: the model starts loading
        while _states(url)["big"] == "unloaded" and time.time() < deadline:
            time.sleep(0.005)
        assert _states(url)["big"] == "loading", _states(url)
        p.terminate()
        th.join(timeout=60)
        st, body = out["r"]
        assert st == 200 and body["usage"]["completion_tokens"] == 4, (st, body)
        assert p.wait(timeout=60) == 0
        err = p.stderr.read().decode()
        assert "draining" in err and "cut short" not in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
