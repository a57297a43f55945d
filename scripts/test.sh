#!/bin/sh
# test.sh: `make test`'s recipe. Runs the C test runner on the named suites and, in the rel build,
# the Python package's tests (python/tests, pytest), and ends with ONE closing line
# "N passed, N failed, N skipped": the sum of the runner's closing line and the Python tests'
# (python/tests/conftest.py prints theirs in the same form), which is what .ci/run's tally reads.
#   sh scripts/test.sh RUNNER WITH_PYTHON [SUITE...]
# WITH_PYTHON: 1 in the rel build (libtern.so is built), 0 otherwise (an ASan build cannot be
# loaded into an interpreter that was not started with the sanitizer runtime). Suites: the C
# suite names (tests/main.c); `python` selects the Python tests; none: every C suite and python.
# $PYTHON, when set, is tried first for the Python tests. Exit status: 0 when everything ran and
# passed, 1 otherwise (2: T=python in a build without the shared library).
set -u
runner=$1; with_py=$2; shift 2
c_suites=""; run_c=1; run_py=$with_py
if [ $# -gt 0 ]; then
    run_py=0
    for s in "$@"; do
        if [ "$s" = python ]; then run_py=$with_py; else c_suites="$c_suites $s"; fi
    done
    [ -n "$c_suites" ] || run_c=0
    for s in "$@"; do
        if [ "$s" = python ] && [ "$with_py" = 0 ]; then
            echo "test: the Python tests run in the rel build only (make test T=python)" >&2
            exit 2
        fi
    done
fi
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/tern-test.XXXXXX") || exit 1
trap 'rm -rf "$log_dir"' EXIT
status=0
# closing <log>: the last "N passed, N failed, N skipped" line of a log, or empty
closing() { grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -n 1; }
if [ "$run_c" = 1 ]; then
    # shellcheck disable=SC2086
    { "$runner" $c_suites; echo $? > "$log_dir/c.rc"; } 2>&1 | tee "$log_dir/c.log"
    [ "$(cat "$log_dir/c.rc")" = 0 ] || status=1
    [ "$run_py" = 1 ] || exit $status      # the runner's own closing line is the last line
fi
# The Python that has pytest: python3 on $PATH, else the system's (Debian python3-pytest)
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if [ -n "$p" ] && "$p" -c 'import pytest' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "test: no Python with pytest (make deps installs python3-pytest); the Python tests count as 1 failed"
    echo "0 passed, 1 failed, 0 skipped" > "$log_dir/py.log"
    status=1
else
    echo "=== Python tests ($py -m pytest python/tests)"
    { "$py" -m pytest -q -p no:cacheprovider python/tests; echo $? > "$log_dir/py.rc"; } 2>&1 | tee "$log_dir/py.log"
    [ "$(cat "$log_dir/py.rc")" = 0 ] || status=1
fi
pass=0; fail=0; skip=0
for part in c py; do
    [ -f "$log_dir/$part.log" ] || continue
    line=$(closing "$log_dir/$part.log")
    if [ -z "$line" ]; then echo "test: no closing line from the $part tests: counted as 1 failed"; fail=$((fail + 1)); status=1; continue; fi
    set -- $line
    pass=$((pass + $1)); fail=$((fail + $3)); skip=$((skip + $5))
done
echo "$pass passed, $fail failed, $skip skipped"
exit $status
