#!/bin/sh
# fuzz/run.sh SECONDS: for each libFuzzer target below, build it (clang, ASan+UBSan), write its seed
# corpus, fuzz it, then print the runner-style closing line counting targets (CI tallies it).
# fuzz_gguf runs SECONDS (60 by default); fuzz_request, fuzz_tok and fuzz_hf FUZZ_SHORT_SECONDS
# (30 by default) each.
# A crash, sanitizer report, leak or timeout fails its target (exit 1); the reproducer is left in
# build/fuzz/TARGET/ (crash-*/leak-*/timeout-*). A target is one `target` line at the bottom;
# seeds_NAME (for fuzz_NAME), when defined, writes its seeds.
set -u
secs=${1:-60}
CC=${FUZZ_CC:-clang}
out=build/fuzz
flags="-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -ffp-contract=off -fno-sanitize-recover=undefined"
shared=${TERN_SHARED:-../shared}
[ -d "$shared" ] && shared=$(cd "$shared" && pwd)   # absolute: each target runs in its own folder
export TERN_SHARED="$shared"
gguf="src/format/gguf.c src/format/qtypes.c src/format/budget.c src/core/core.c src/core/os.c"
tok="src/tokenizer/*.c $gguf"
server="server/api.c server/wire.c server/reply.c server/jsonguide.c $tok"
short=${FUZZ_SHORT_SECONDS:-30}
passed=0
failed=0
skipped=0

# GGUF files from our writer (and the stories260K model when ../shared has it).
seeds_gguf() {
    $CC $flags -fsanitize=address,undefined fuzz/gen_seeds.c $gguf -lm -o "$out/gen_seeds" || return 1
    stories="$shared/data/stories260k/stories260K.gguf"
    [ -f "$stories" ] || stories=""
    "$out/gen_seeds" "$1" $stories
}

# Request bodies, one a line: chat (tools, a call and its result, logit_bias, stop,
# response_format), completions (text, token ids, nested ids), Messages and Responses bodies.
seeds_request() {
    n=0
    while IFS= read -r body; do
        n=$((n + 1))
        printf '%s' "$body" > "$1/seed$n"
    done <<'EOF'
{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Weather?"}]},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto","logit_bias":{"15":-1.5,"7":false},"stop":["\n\n","END"],"response_format":{"type":"json_object"},"temperature":0.7,"top_k":20,"max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,"chat_template_kwargs":{"enable_thinking":false},"reasoning_budget":16,"seed":42}
{"messages":[{"role":"developer","content":"s"},{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"x":[1,2.5,"s",null,true,{"y":-1e-3}]}}}]},{"role":"tool","tool_call_id":"any","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"n":1,"echo":false,"top_n_sigma":-1}
{"prompt":[1,15043,3186],"max_tokens":8,"logprobs":2,"stop":"x","ignore_eos":true,"cache_prompt":false}
{"prompt":[[1,2,3]],"n_predict":4,"parse_special":false,"logit_bias":{"0":100}}
{"model":"stories","prompt":"Once upon a time","temperature":0,"repeat_penalty":1.1,"repeat_last_n":32,"min_p":0.1,"top_p":0.9,"max_completion_tokens":5,"max_tokens":5}
{"model":"m","max_tokens":100,"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}]},{"type":"text","text":"go"}]}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":50},"stop_sequences":["Z"],"stream":false}
{"model":"m","instructions":"be nice","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"reasoning"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"max_output_tokens":20,"text":{"format":{"type":"text"}}}
{"a": [1, -0.5e+3, {"b": "\u00e9\n"}], "c": null, "d": true}
EOF
}

# Texts and chat inputs (fuzz_tok), and the smallest importable tokenizer.json (fuzz_hf).
seeds_tok() {
    $CC $flags -fsanitize=address,undefined fuzz/gen_tok_seeds.c -o "$out/gen_tok_seeds" && "$out/gen_tok_seeds" tok "$1"
}
seeds_hf() {
    $CC $flags -fsanitize=address,undefined fuzz/gen_tok_seeds.c -o "$out/gen_tok_seeds" && "$out/gen_tok_seeds" hf "$1"
}

# target NAME SECONDS MAX_LEN SOURCES_AND_LIBS...: build fuzz/NAME.c with the sources, seed it,
# fuzz it for SECONDS with inputs up to MAX_LEN bytes, and count it passed or failed.
target() {
    name=$1 t=$2 max_len=$3
    shift 3
    dir=$out/$name
    mkdir -p "$dir/corpus"
    if ! $CC $flags -fsanitize=fuzzer,address,undefined "fuzz/$name.c" "$@" -o "$dir/$name"; then
        echo "fuzz: $name: build failed"; failed=$((failed + 1)); return
    fi
    if command -v "seeds_${name#fuzz_}" >/dev/null && ! "seeds_${name#fuzz_}" "$dir/corpus"; then
        echo "fuzz: $name: seed generation failed"; failed=$((failed + 1)); return
    fi
    echo "fuzz: $name: $(ls "$dir/corpus" | wc -l) corpus files, ${t}s"
    if (cd "$dir" && "./$name" -max_total_time="$t" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
            -print_final_stats=1 corpus); then
        passed=$((passed + 1))
    else
        echo "fuzz: $name: the target failed; reproducer in $dir (crash-*/leak-*/timeout-*)"
        failed=$((failed + 1))
    fi
}

mkdir -p "$out"
target fuzz_gguf "$secs" 65536 $gguf -lm
target fuzz_request "$short" 16384 $server -lcjson -lutf8proc -lm -pthread
if [ -f "$shared/data/qwen3-tokenizer/tokenizer.json" ] && [ -f "$shared/data/llama2-spm-vocab/ggml-vocab-llama-spm.gguf" ]; then
    target fuzz_tok "$short" 4096 $tok -lcjson -lutf8proc -lm
else
    echo "fuzz: fuzz_tok: skipped (its vocabularies are not under $shared/data)"; skipped=$((skipped + 1))
fi
target fuzz_hf "$short" 8192 $tok -lcjson -lutf8proc -lm
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
