"""Three `tern serve` replicas behind HAProxy (Debian's, started here), loopback only, bounded in
time: requests of one session (the X-Session-ID header, hashed by the balancer) return to the
replica that caches their prefix (usage.prompt_tokens_details.cached_tokens > 0 on a
follow-up); a replica killed outright is taken out by the health check and no request sent
after that is lost; a replica sent SIGTERM drains: its running request finishes, /health turns
503, the balancer routes its sessions elsewhere, and it exits by itself. HAProxy runs
deploy/haproxy.cfg, the configuration docs/DEPLOY.md gives, with its addresses replaced."""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import QWEN3, free_port, require, tern_bin, wait_http

HAPROXY = "/usr/sbin/haproxy"
LIMIT_S = 120                                         # the whole test stops by itself past this


def _post(url, body, session, timeout=60):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "X-Session-ID": session})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def _generated(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("tern_generated_tokens_total "):
            return int(line.split()[1])
    return 0


def _decoding(port):
    """True while a slot of the replica is generating (GET /slots)."""
    slots = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/slots" % port, timeout=5).read())
    return any(s["is_processing"] and s["n_decoded"] > 0 for s in slots)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _haproxy_cfg(lb_port, ports):
    """deploy/haproxy.cfg with its listening address and its three servers' addresses replaced."""
    text = open(os.path.join(ROOT, "deploy", "haproxy.cfg")).read()
    assert text.count("bind 127.0.0.1:8000") == 1
    text = text.replace("bind 127.0.0.1:8000", "bind 127.0.0.1:%d" % lb_port)
    for i, port in enumerate(ports):
        old = "server r%d 127.0.0.1:%d check" % (i, 8080 + i)
        assert text.count(old) == 1
        text = text.replace(old, "server r%d 127.0.0.1:%d check" % (i, port))
    return text


@pytest.fixture()
def fleet(tmp_path):
    if not os.access(HAPROXY, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail("%s missing (make deps installs haproxy)" % HAPROXY)
        pytest.skip("%s missing" % HAPROXY)
    model = require(QWEN3)
    deadline = time.time() + 30
    replicas = []
    procs = []
    try:
        for _ in range(3):
            port = free_port()
            p = subprocess.Popen([tern_bin(), "serve", "-m", model, "-t", "1", "-np", "2", "-c", "2048",
                                  "--port", str(port), "--no-progress", "--drain-timeout", "30"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
            replicas.append((port, p))
        for port, p in replicas:
            wait_http("http://127.0.0.1:%d/health" % port, deadline, p)
        lb_port = free_port()
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(_haproxy_cfg(lb_port, [port for port, _ in replicas]))
        lb = subprocess.Popen([HAPROXY, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(lb)
        wait_http("http://127.0.0.1:%d/health" % lb_port, deadline, lb)
        time.sleep(0.6)                               # every server's first health checks pass (rise 2 x 200 ms)
        yield "http://127.0.0.1:%d" % lb_port, replicas
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def _replica_of(url, replicas, session):
    """Which replica serves a session: the one whose generated-token count moves."""
    before = [_generated(port) if p.poll() is None else 0 for port, p in replicas]
    _post(url, {"prompt": "Hi", "max_tokens": 1, "temperature": 0}, session)
    after = [_generated(port) if p.poll() is None else 0 for port, p in replicas]
    moved = [i for i in range(len(replicas)) if after[i] != before[i]]
    assert len(moved) == 1, (before, after)
    return moved[0]


def test_sticky_failover_drain(fleet):
    url, replicas = fleet
    t_end = time.time() + LIMIT_S
    # sticky: a follow-up of each session reuses the prefix its first request left
    homes = {}
    for k in range(6):
        session = "conv-%d" % k
        prompt = "Conversation %d: the quick brown fox jumps over the lazy dog, again and again." % k
        st, a = _post(url, {"prompt": prompt, "max_tokens": 4, "temperature": 0}, session)
        assert st == 200
        st, b = _post(url, {"prompt": prompt + " And then?", "max_tokens": 4, "temperature": 0}, session)
        assert st == 200
        assert b["usage"]["prompt_tokens_details"]["cached_tokens"] >= a["usage"]["prompt_tokens"] - 1, (a, b)
        homes[session] = _replica_of(url, replicas, session)
    assert len(set(homes.values())) >= 2, homes       # the hash spreads sessions over replicas

    # a replica killed outright: once its health check has failed, nothing is lost
    dead = homes["conv-0"]
    replicas[dead][1].kill()
    replicas[dead][1].wait(timeout=10)
    time.sleep(1.0)                                   # > fall 2 x inter 200 ms, with room
    for k in range(12):
        st, r = _post(url, {"prompt": "After the failure %d" % k, "max_tokens": 2, "temperature": 0}, "conv-%d" % (k % 6))
        assert st == 200 and r["usage"]["completion_tokens"] == 2
    assert time.time() < t_end

    # SIGTERM drains a live replica: its running request finishes, then it leaves and exits
    live = [i for i in range(3) if i != dead]
    target = live[0]
    session = next((s for s, h in homes.items() if h == target), None)
    if session is None:                               # find a session id the hash sends there
        for k in range(100):
            if _replica_of(url, replicas, "probe-%d" % k) == target:
                session = "probe-%d" % k
                break
    assert session is not None
    result = {}

    def long_request():
        result["r"] = _post(url, {"prompt": "A long story", "max_tokens": 1800, "temperature": 0, "ignore_eos": True},
                            session, timeout=90)

    import threading
    th = threading.Thread(target=long_request)
    port_t = replicas[target][0]
    th.start()
    while not _decoding(port_t) and th.is_alive():
        time.sleep(0.01)                              # wait until it is generating there
    assert _decoding(port_t)
    replicas[target][1].send_signal(signal.SIGTERM)
    health, deadline = 200, time.time() + 5           # the replica turns its health check to 503
    while health == 200 and time.time() < deadline:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/health" % port_t, timeout=2)
            time.sleep(0.01)
        except urllib.error.HTTPError as e:
            health = e.code
    assert health == 503
    assert th.is_alive()                              # while its request still runs
    # the session's requests are answered at once, also before the balancer's checks take the
    # replica out (its 503s are retried on another replica), and after
    until = time.time() + 0.8
    while time.time() < until:
        st, r = _post(url, {"prompt": "Elsewhere", "max_tokens": 2, "temperature": 0}, session)
        assert st == 200 and r["usage"]["completion_tokens"] == 2
        time.sleep(0.02)
    th.join(timeout=90)
    st, r = result["r"]
    assert st == 200 and r["usage"]["completion_tokens"] == 1800
    assert replicas[target][1].wait(timeout=30) == 0  # exits by itself once idle
    assert time.time() < t_end
