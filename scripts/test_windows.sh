#!/bin/sh
# test_windows.sh: the Windows build (make windows) under wine. `sh scripts/test_windows.sh DIR`
# (DIR: build/win) runs DIR/tests/run.exe (the suites of WIN_SUITES in the Makefile) and then
# checks of DIR/tern.exe itself; ends with "N passed, N failed, N skipped" summed over both.
# wine's prefix is DIR/wineprefix (created on the first run, ~10 s); WINEDEBUG=-all keeps
# wine's own messages out of the logs. Each wine call has a time limit (a hung one fails).
set -u
dir=${1:?usage: test_windows.sh DIR}
shared=${TERN_SHARED:-../shared}
export WINEDEBUG=-all WINEPREFIX="$(cd "$dir" && pwd)/wineprefix"
W="timeout 300 wine"
pass=0; fail=0; skip=0
ok() { echo "windows: ok: $1"; pass=$((pass + 1)); }
bad() { echo "windows: FAILED: $1"; fail=$((fail + 1)); }

# Create or update the prefix first and wait for wine's background setup to end (wineboot starts
# on the first call and runs beside the next ones; a program started meanwhile can fail to start).
timeout 120 wineboot -u >/dev/null 2>&1
timeout 60 wineserver -w >/dev/null 2>&1

# 1. The C suites. Left out: test_synth_tokenizer_e2e runs `tern synth` through popen with POSIX
#    shell quoting, which cmd.exe does not parse.
log="$dir/tests/run.log"
TERN_SHARED="$shared" TERN_TEST_SKIP=test_synth_tokenizer_e2e $W "$dir/tests/run.exe" > "$log" 2>&1
rc=$?
cat "$log"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
if [ -z "$line" ]; then bad "tests/run.exe gave no closing line (exit $rc)"
else
    pass=$((pass + $(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')))
    fail=$((fail + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
    skip=$((skip + $(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')))
    [ "$rc" = 0 ] || bad "tests/run.exe exit $rc"
fi

# 2. stories260K greedy from BOS, 200 positions, against llama2.c's expected output (which
#    prints the first piece without its leading space; tern ends the text with a newline): the
#    bytes must match exactly, so this also checks that stdout is binary (no CR LF).
model="$shared/data/stories260k/stories260K.gguf"
want="$shared/data/stories260k/expected_greedy_llama2c_test_200steps.txt"
if [ -f "$model" ] && [ -f "$want" ]; then
    got="$dir/tests/greedy200.txt"
    $W "$dir/tern.exe" run -m "$model" -p "" -n 200 --temp 0 --no-progress > "$got" 2> "$got.err"
    rc=$?
    { cat "$want"; printf '\n'; } > "$got.want"
    if [ "$rc" = 0 ] && sed '1s/^ //' "$got" | cmp -s - "$got.want"; then ok "stories260K greedy = llama2.c's 200 steps"
    else bad "stories260K greedy (exit $rc): $(sed '1s/^ //' "$got" | cmp - "$got.want" 2>&1); stderr: $(head -c 400 "$got.err")"; fi
    # the same with --mmap (read into memory on Windows) and 3 threads
    $W "$dir/tern.exe" run -m "$model" -p "" -n 200 --temp 0 --no-progress --mmap -t 3 > "$got" 2> "$got.err"
    rc=$?
    if [ "$rc" = 0 ] && sed '1s/^ //' "$got" | cmp -s - "$got.want"; then ok "stories260K greedy, --mmap -t 3"
    else bad "stories260K greedy --mmap -t 3 (exit $rc); stderr: $(head -c 400 "$got.err")"; fi
    # argv in UTF-8: a prompt with non-ASCII characters reaches the tokenizer as UTF-8 (the
    # CRT's ANSI argv would turn them into '?', and --echo would print those)
    $W "$dir/tern.exe" run -m "$model" -p "Élan café 日本" -n 1 --temp 0 --echo --no-progress > "$got" 2> "$got.err"
    rc=$?
    if [ "$rc" = 0 ] && head -c 24 "$got" | grep -q "Élan café 日本"; then ok "UTF-8 argv and output"
    else bad "UTF-8 argv and output (exit $rc): $(head -c 80 "$got" | od -c | head -n 3); stderr: $(head -c 400 "$got.err")"; fi
else
    if [ "${CI:-}" = true ]; then bad "missing $model or $want"; else echo "windows: skipped: no $model"; skip=$((skip + 1)); fi
fi

# 3. No server in this build: serve says so and exits 1. The stub writes its line before it
#    exits, so an exit with nothing on stderr is wine failing to start the program (its own
#    message hidden by WINEDEBUG=-all): that case runs once more.
$W "$dir/tern.exe" serve -m x > /dev/null 2> "$dir/tests/serve.err"
rc=$?
if [ "$rc" != 0 ] && [ ! -s "$dir/tests/serve.err" ]; then
    $W "$dir/tern.exe" serve -m x > /dev/null 2> "$dir/tests/serve.err"
    rc=$?
fi
if [ "$rc" = 1 ] && grep -q "not available in this build" "$dir/tests/serve.err"; then ok "serve: not available, exit 1"
else bad "serve: exit $rc: $(cat "$dir/tests/serve.err")"; fi

echo "${pass} passed, ${fail} failed, ${skip} skipped"
[ "$fail" = 0 ]
