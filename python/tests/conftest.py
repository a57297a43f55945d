"""Shared fixtures of the Python tests: the shared data folder ($TERN_SHARED, else ../shared
beside the checkout, as the C tests), the tern binary, and the closing line
"N passed, N failed, N skipped" that scripts/test.sh adds to the C runner's."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))        # the checkout
sys.path.insert(0, os.path.join(ROOT, "python"))     # the package of this checkout, not an installed one


SHIPPED = {"data/stories260k/stories260K.gguf": os.path.join(ROOT, "models", "stories260K.gguf")}


def shared_path(rel):
    """The path of rel in the shared data; stories260K falls back to the repository's own copy
    (models/stories260K.gguf, byte for byte the same file: the C cli_checks suite checks its checksum)."""
    root = os.environ.get("TERN_SHARED") or os.path.join(ROOT, "..", "shared")
    p = os.path.join(root, rel)
    if not os.path.exists(p) and rel in SHIPPED and os.path.exists(SHIPPED[rel]):
        return SHIPPED[rel]
    return p


def require(rel):
    """The path of a shared file; a missing one fails the test in CI (CI=true), skips it elsewhere."""
    p = os.path.abspath(shared_path(rel))
    if not os.path.exists(p):
        if os.environ.get("CI") == "true":
            pytest.fail("missing fixture %s (CI: a missing fixture is a failure)" % p)
        pytest.skip("missing fixture %s" % p)
    return p


def tern_bin():
    """The tern binary: $TERN_BIN (a bare name is the file in the checkout), else ROOT/tern."""
    env = os.environ.get("TERN_BIN")
    b = (env if os.sep in env else os.path.join(ROOT, env)) if env else os.path.join(ROOT, "tern")
    if not os.access(b, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail("%s not built (make builds it before the tests)" % b)
        pytest.skip("%s not built" % b)
    return b


def free_port():
    """A TCP port on the loopback interface that nothing listens on now."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, deadline, proc=None):
    """Polls url until it answers (any status) or time.time() passes deadline (then fails)."""
    import time
    import urllib.error
    import urllib.request
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                pytest.fail("process exited while starting: %s" % url)
            time.sleep(0.05)
    pytest.fail("no answer from %s" % url)


def post_json(url, path, body, headers=None, timeout=60):
    """POST body as JSON to url + path; returns (status, the decoded JSON answer), errors included."""
    import json
    import urllib.error
    import urllib.request
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class Serve:
    """`tern serve -m MODEL ARGS` on a free loopback port, up and answering /health, stopped on
    exit from the with-block (SIGTERM, then SIGKILL past 30 s)."""

    def __init__(self, model_rel, *args):
        import subprocess
        import time
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = subprocess.Popen([tern_bin(), "serve", "-m", require(model_rel), "-t", "1", "--port", str(self.port),
                                      "--no-progress", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(self.url + "/health", time.time() + 30, self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()


STORIES = "data/stories260k/stories260K.gguf"
QWEN3 = "golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf"


@pytest.fixture(scope="session")
def stories():
    import tern
    return tern.Model(require(STORIES), threads=1)


@pytest.fixture(scope="session")
def qwen3():
    import tern
    return tern.Model(require(QWEN3), threads=1)


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    n_pass = len(st.get("passed", []))
    n_fail = len(st.get("failed", [])) + len(st.get("error", []))
    n_skip = len(st.get("skipped", []))
    terminalreporter.write_line("%d passed, %d failed, %d skipped" % (n_pass, n_fail, n_skip))
