"""Shared fixtures of the Python tests: the shared data folder ($TERN_SHARED, else ../shared
beside the checkout, as the C tests), the tern binary, and the closing line
"N passed, N failed, N skipped" that scripts/test.sh adds to the C runner's."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))        # the checkout
sys.path.insert(0, os.path.join(ROOT, "python"))     # the package of this checkout, not an installed one


def shared_path(rel):
    root = os.environ.get("TERN_SHARED") or os.path.join(ROOT, "..", "shared")
    return os.path.join(root, rel)


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
