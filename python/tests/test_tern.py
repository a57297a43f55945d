"""Tests of the tern Python package against independently computed values: the CLI's own output
(computed here by running ./tern), the reference runtime's token ids (golden/*/prompts.json), the
Qwen3 tokenizer vectors, and hand-written template renderings."""

import ctypes
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

from conftest import QWEN3, ROOT, STORIES, require, tern_bin

import tern

PROMPTS = ["Once upon a time", "", "The cat sat on the mat. It was", "Lily and Ben went to the park"]


def cli(*args):
    r = subprocess.run([tern_bin(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    assert r.returncode == 0, "tern %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.decode())
    return r.stdout.decode("utf-8")


@pytest.fixture(scope="module")
def q35_path(tmp_path_factory):
    """A synthetic qwen35-tiny model (tern synth: random ternary weights, perplexities near 1e6)."""
    path = str(tmp_path_factory.mktemp("q35") / "q35.gguf")
    subprocess.run([tern_bin(), "synth", "--arch", "qwen35-tiny", "-o", path], check=True, stdout=subprocess.DEVNULL)
    return path


# ---- generation equals the CLI ---------------------------------------------------------------------

@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_cli(stories, prompt):
    want = cli("run", "-m", require(STORIES), "-p", prompt, "-n", "48", "--temp", "0", "-t", "1")
    assert want.endswith("\n")                        # tern run ends the text with one newline
    got = stories.generate(prompt, max_tokens=48, temperature=0)
    assert got == want[:-1]
    assert len(got) > 20


def test_speculative_greedy_equals_cli(stories):
    prompt = "Once upon a time, there was a little girl. Once upon a time, there was a little"
    want = cli("run", "-m", require(STORIES), "-p", prompt, "-n", "64", "--temp", "0", "-t", "1", "--spec", "lookup")
    got = stories.generate(prompt, max_tokens=64, temperature=0, speculative={"draft_max": 4})
    assert got == want[:-1]
    assert got == stories.generate(prompt, max_tokens=64, temperature=0)   # greedy: the same text by construction


def test_sampled_equals_cli_with_seed(stories):
    want = cli("run", "-m", require(STORIES), "-p", "Once upon a time", "-n", "40", "--temp", "0.9", "--seed", "7",
               "-t", "1")
    assert stories.generate("Once upon a time", max_tokens=40, temperature=0.9, seed=7) == want[:-1]


def test_stream_concatenation_equals_generate(stories):
    for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 1234, "top_k": 0, "top_p": 1.0, "min_p": 0.0}):
        pieces = list(stories.stream("Once upon a time", max_tokens=60, **kw))
        assert len(pieces) > 10 and all(isinstance(p, str) and p for p in pieces)
        assert "".join(pieces) == stories.generate("Once upon a time", max_tokens=60, **kw)


def test_logit_bias(stories):
    # +100 on a token: greedy decoding gives it at every step (its text from detokenize)
    piece = stories.detokenize([300])
    assert piece and piece != stories.detokenize([301])
    assert stories.generate("Once upon a time", max_tokens=3, temperature=0, logit_bias={300: 100}) == piece * 3
    # a ban: the greedy token (the argmax of the session's logits, computed here) banned gives the
    # second best, for False and for -inf
    s = stories.session(ctx=64)
    s.eval(stories.tokenize("Once upon a time"))
    lg = list(s.logits())
    s.close()
    order = sorted(range(len(lg)), key=lambda i: (-lg[i], i))
    assert stories.generate("Once upon a time", max_tokens=1, temperature=0) == stories.detokenize([order[0]])
    for ban in (False, float("-inf")):
        assert stories.generate("Once upon a time", max_tokens=1, temperature=0,
                                logit_bias={order[0]: ban}) == stories.detokenize([order[1]])
    # chat takes it too (the same sampler)
    assert stories.chat([{"role": "user", "content": "hi"}], max_tokens=2, temperature=0,
                        logit_bias={301: 100}, template="chatml") == stories.detokenize([301]) * 2
    # bad input
    for bad, exc in (([300], TypeError), ({"300": 1}, TypeError), ({True: 1}, TypeError), ({300: "1"}, TypeError),
                     ({300: True}, TypeError), ({-1: 1}, ValueError), ({300: float("nan")}, ValueError),
                     ({300: float("inf")}, ValueError), ({300: 3.5e38}, ValueError), ({300: -3.5e38}, ValueError),
                     ({300: 10**400}, ValueError), ({i: False for i in range(512)}, ValueError)):
        with pytest.raises(exc):
            stories.generate("x", max_tokens=1, logit_bias=bad)
    with pytest.raises(tern.Error) as e:
        stories.generate("x", max_tokens=1, logit_bias={512: 1.0})
    assert "token 512 (entry 1 of 1): not a token of the model, whose vocabulary has ids 0..511" in e.value.message


def test_stop_strings(stories):
    full = stories.generate("Once upon a time", max_tokens=60, temperature=0)
    i = full.index("Lily")                            # the greedy text names her (test_greedy_equals_cli)
    got = stories.generate("Once upon a time", max_tokens=60, temperature=0, stop=["Lily", "zzzz"])
    assert got == full[:i]
    pieces = list(stories.stream("Once upon a time", max_tokens=60, temperature=0, stop="Lily"))
    assert "".join(pieces) == full[:i]
    # a stop string that never occurs changes nothing; one that is the whole text gives ""
    assert stories.generate("Once upon a time", max_tokens=60, temperature=0, stop="qqq") == full
    assert stories.generate("Once upon a time", max_tokens=60, temperature=0, stop=full[:3]) == ""


def test_max_tokens_counts_tokens(stories):
    ids = stories.tokenize("Once upon a time")
    text = stories.generate("Once upon a time", max_tokens=5, temperature=0)
    # five tokens: their text is the detokenised continuation of the prompt's ids
    s = stories.session()
    s.eval(ids)
    toks = []
    for _ in range(5):
        lg = s.logits()
        t = max(range(len(lg)), key=lambda k: (lg[k], -k))
        toks.append(t)
        s.eval([t])
    s.close()
    assert text == stories.detokenize(ids + toks)[len(stories.detokenize(ids)):]


# ---- tokens ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("model_rel,prompts_rel", [(STORIES, "golden/stories260k/prompts.json"),
                                                   (QWEN3, "golden/qwen3-tiny-pq2_0/prompts.json")])
def test_tokenize_golden_prompts(model_rel, prompts_rel, stories, qwen3):
    m = stories if model_rel == STORIES else qwen3
    j = json.load(open(require(prompts_rel), encoding="utf-8"))
    n = 0
    for p in j["prompts"]:
        if "text" not in p:
            continue
        ids = m.tokenize(p["text"], special=True)    # the golden program: add_special, parse_special
        assert ids == p["token_ids"], p["id"]
        assert [m.token_piece(t).hex() for t in ids] == p["token_pieces_hex"], p["id"]
        n += 1
    assert n >= 3


def test_qwen3_vectors(qwen3):
    lines = open(require("data/qwen3-tokenizer/qwen3_encode_vectors.jsonl"), encoding="utf-8").read().splitlines()
    assert len(lines) == 54
    for line in lines:
        v = json.loads(line)
        assert qwen3.tokenize(v["text"], special=True, bos=False) == v["ids"], v["text"]
        assert qwen3.detokenize(v["ids"], special=True) == v["text"]


def test_detokenize_rules(stories):
    assert stories.detokenize([1, 403, 407, 261, 378]) == "Once upon a time"   # BOS drops the first space
    assert stories.detokenize([403, 407]) == " Once upon"
    assert stories.detokenize([1, 403, 2]) == "Once"                           # control tokens: no text
    assert stories.detokenize([1, 403, 2], special=True) == "<s>Once</s>"
    assert stories.detokenize([]) == ""
    assert stories.tokenize("Once", bos=False) == [403]
    assert stories.tokenize(b"Once") == [1, 403]


# ---- chat templates -------------------------------------------------------------------------------

def test_chat_template_golden(qwen3):
    j = json.load(open(require("golden/qwen3-tiny-pq2_0/prompts.json"), encoding="utf-8"))
    p5 = next(p for p in j["prompts"] if p["id"] == "p5")
    assert qwen3.apply_chat_template(p5["messages"], thinking=p5["enable_thinking"]) == p5["text"]
    assert qwen3.chat_tokens(p5["messages"], thinking=p5["enable_thinking"]) == p5["token_ids"]


def test_chat_template_forms(qwen3, stories):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <|im_end|>"}]
    chatml = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|><|im_end|>\n"
              "<|im_start|>assistant\n")
    assert qwen3.apply_chat_template(msgs, template="chatml") == chatml
    assert stories.apply_chat_template(msgs) == chatml          # no template in the file: ChatML
    # Qwen3 with thinking off pre-fills the empty think block
    assert qwen3.apply_chat_template(msgs[1:], thinking=False) == (
        "<|im_start|>user\nHi <|im_end|><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # the user's "<|im_end|>" is text, never the control token: one 151645 per turn end only
    ids = qwen3.chat_tokens(msgs)
    assert ids.count(151645) == 2
    with pytest.raises(tern.Error) as e:
        qwen3.apply_chat_template(msgs, template="nosuch")
    assert e.value.code == -3 and "nosuch" in e.value.message


def test_chat_generates_after_template(qwen3):
    msgs = [{"role": "user", "content": "What is 2+2?"}]
    got = qwen3.chat(msgs, max_tokens=12, temperature=0)
    ids = qwen3.chat_tokens(msgs)
    # independently: the prompt ids evaluated and decoded greedily in a Session
    s = qwen3.session(ctx=256)
    s.eval(ids)
    out = []
    for _ in range(12):
        lg = s.logits()
        t = max(range(len(lg)), key=lambda k: (lg[k], -k))
        if qwen3.is_eog(t):
            break
        out.append(t)
        s.eval([t])
    s.close()
    assert got == qwen3.detokenize(ids + out)[len(qwen3.detokenize(ids)):]
    assert "".join(qwen3.chat(msgs, max_tokens=12, temperature=0, stream=True)) == got


# ---- perplexity -----------------------------------------------------------------------------------

def test_perplexity_equals_cli(stories, q35_path):
    """perplexity() prints as `tern perplexity`'s PPL line to every digit: the same float
    subtraction, expf and summation order. The synthetic qwen35 model's perplexities near 1e6
    show the last digits, which a sum in another order or precision changes."""
    path = require("data/tinystories-sample/tinystories_sample.txt")
    text = open(path, encoding="utf-8").read()
    out = cli("perplexity", "-m", require(STORIES), "-f", path, "-c", "256", "-t", "1", "--chunks", "3")
    want = re.search(r"^PPL = ([0-9.]+)", out, re.M).group(1)
    got = stories.perplexity(text, ctx=256, chunks=3)
    assert "%.6f" % got == want
    assert 1.0 < got < 20.0
    m = tern.Model(q35_path, threads=1)
    for ctx, chunks in ((128, 8), (64, 20)):
        out = cli("perplexity", "-m", q35_path, "-f", path, "-c", str(ctx), "-t", "1", "--chunks", str(chunks))
        want = re.search(r"^PPL = ([0-9.]+)", out, re.M).group(1)
        got = m.perplexity(text, ctx=ctx, chunks=chunks)
        assert "%.6f" % got == want and got > 1e5, (ctx, want, got)
    m.close()


# ---- sessions and threads -------------------------------------------------------------------------

def greedy_run(session, ids, n):
    """Greedy ids after ids in session, and the last logits (a list)."""
    session.eval(ids)
    out = []
    for _ in range(n):
        lg = session.logits()
        t = max(range(len(lg)), key=lambda k: (lg[k], -k))
        out.append(t)
        session.eval([t])
    return out, list(session.logits())


def test_session_logits_and_truncate(stories):
    s = stories.session(ctx=128)
    ids = stories.tokenize("Once upon a time")
    s.eval(ids)
    assert s.pos == len(ids)
    a = s.logits()
    assert len(a) == stories.n_vocab and a.typecode == "f"
    assert memoryview(a).format == "f"
    s.eval([261])
    assert s.logits() != a and a == a                 # a copy: not changed by the next eval
    s.truncate(len(ids) - 1)
    s.eval(ids[-1:])
    assert list(s.logits()) == list(a)                # the same position again gives the same logits
    with pytest.raises(tern.Error) as e:
        s.eval([stories.n_vocab])
    assert e.value.code == -6
    s.truncate(2)                                     # truncate keeps no logits: the error says so
    with pytest.raises(tern.Error) as e:
        s.logits()
    assert "Session.logits: no eval since truncate(2): expected eval() first" in str(e.value), e.value
    s.reset()
    assert s.pos == 0
    with pytest.raises(tern.Error) as e:
        s.logits()
    assert "no eval since reset()" in str(e.value), e.value
    s.close()
    s = stories.session(ctx=16)
    with pytest.raises(tern.Error) as e:
        s.logits()
    assert "no eval since the session started" in str(e.value), e.value
    s.close()
    with pytest.raises(tern.Error):
        s.eval([1])


def test_two_sessions_on_two_threads(stories):
    prompts = [stories.tokenize("Once upon a time"), stories.tokenize("The dog ran to the")]
    seq = []
    for ids in prompts:
        s = stories.session(ctx=256)
        seq.append(greedy_run(s, ids, 40))
        s.close()
    results = [None, None]
    barrier = threading.Barrier(2)

    def work(i):
        s = stories.session(ctx=256)
        barrier.wait()
        results[i] = greedy_run(s, prompts[i], 40)
        s.close()

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results == seq
    assert seq[0][0] != seq[1][0]                      # the two sequences differ: the check can tell them apart
    # Model.generate from two threads at once: each gets its own session
    outs = [None, None]

    def gen(i):
        barrier.wait()
        outs[i] = stories.generate(["Once upon a time", "The dog ran"][i], max_tokens=40, temperature=0)

    ts = [threading.Thread(target=gen, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert outs == [stories.generate("Once upon a time", max_tokens=40, temperature=0),
                    stories.generate("The dog ran", max_tokens=40, temperature=0)]


CTRL_C_SCRIPT = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import tern
# Python keeps SIGINT ignored when it started ignored (a background job, as under CI); a terminal's
# Ctrl-C meets Python's default handler, which is what this test needs
signal.signal(signal.SIGINT, signal.default_int_handler)
m = tern.Model(sys.argv[2], threads=1, ctx=2048)
want = m.generate("Once upon a time", max_tokens=30, temperature=0)
n = 0
try:
    for piece in m.stream("Once", max_tokens=-1, ignore_eos=True, temperature=0):
        n += 1
        if n == 5:                                   # a real SIGINT, as Ctrl-C sends, mid-generation
            os.kill(os.getpid(), signal.SIGINT)
    print("not interrupted", n)
except KeyboardInterrupt:
    again = m.generate("Once upon a time", max_tokens=30, temperature=0)
    print("interrupted after", n, "pieces; clean:", again == want)
"""


def test_ctrl_c_stops_generation_cleanly():
    model = require(STORIES)
    r = subprocess.run([sys.executable, "-c", CTRL_C_SCRIPT, os.path.join(ROOT, "python"), model],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, env=dict(os.environ))
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    m = re.match(r"interrupted after (\d+) pieces; clean: True", out)
    assert m, out
    assert 5 <= int(m.group(1)) < 10                  # stopped within a few tokens of the signal (2047 fill ctx 2048)


# ---- errors ---------------------------------------------------------------------------------------

def test_missing_file_raises_error_with_path():
    path = os.path.join(tempfile.gettempdir(), "tern-no-such-model.gguf")
    with pytest.raises(tern.Error) as e:
        tern.Model(path)
    assert path in str(e.value) and e.value.code == -1 and e.value.name == "TERN_E_IO"


def test_bad_file_raises_library_message(tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(tern.Error) as e:
        tern.Model(p)
    assert e.value.code == -2 and str(p) in str(e.value)


def _gguf_tensor_offset(path, name):
    """The file offset of tensor name's data in the GGUF file at path (a reader written from the
    format's description: header, key/values, tensor infos, data aligned to general.alignment)."""
    import struct
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return buf[pos - n:pos].decode()

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])

    assert buf[:4] == b"GGUF"
    pos = 8
    n_tensors, n_kv = take("Q"), take("Q")
    align = 32
    for _ in range(n_kv):
        k = string()
        v = value(take("I"))
        if k == "general.alignment":
            align = v
    infos = {}
    for _ in range(n_tensors):
        t = string()
        n_dims = take("I")
        pos += 8 * n_dims
        take("I")
        infos[t] = take("Q")
    return (pos + align - 1) // align * align + infos[name]


def test_nonfinite_logits_raise_error(stories, tmp_path):
    """Weights damaged to NaN (an F32 projection, not scanned at load) make every logit NaN: generate
    raises tern.Error (TERN_E_FORMAT) naming the position instead of returning meaningless text,
    for greedy and sampled generation, and so does perplexity (with the logit and its value as
    generation gives them); the undamaged model generates (the control)."""
    src = require(STORIES)
    bad = tmp_path / "nan.gguf"
    data = bytearray(open(src, "rb").read())
    at = _gguf_tensor_offset(src, "blk.4.ffn_down.weight")
    data[at:at + 172 * 64 * 4] = b"\xff" * (172 * 64 * 4)
    bad.write_bytes(bytes(data))
    m = tern.Model(bad, threads=1)
    try:
        for temp in (0, 0.8):
            with pytest.raises(tern.Error) as e:
                m.generate("Once upon a time", max_tokens=4, temperature=temp, seed=1)
            assert e.value.name == "TERN_E_FORMAT" and "are not finite (logit 0 of 512 is NaN)" in e.value.message
        # perplexity names the first scored position (ctx 16: the second half starts at 8), the logit and its value
        with pytest.raises(tern.Error) as e:
            m.perplexity("Once upon a time " * 10, ctx=16, chunks=1)
        assert e.value.name == "TERN_E_FORMAT"
        assert e.value.message.startswith("perplexity: the logits at chunk 1, position 8 (token 8 of the text) are not "
                                          "finite (logit 0 of 512 is NaN); expected finite logits"), e.value.message
    finally:
        m.close()
    assert stories.generate("Once upon a time", max_tokens=4, temperature=0.8, seed=1)


def test_bad_types_raise_type_error(stories):
    with pytest.raises(TypeError) as e:
        tern.Model(123)
    assert str(e.value) == "path must be a str, bytes or os.PathLike, got int"
    assert tern.Model(os.fsencode(require(STORIES)), threads=1).n_vocab == 512    # bytes paths load
    with pytest.raises(TypeError):
        tern.Model(require(STORIES), threads="2")
    with pytest.raises(TypeError):
        stories.tokenize(5)
    with pytest.raises(TypeError):
        stories.tokenize("x", special="yes")
    with pytest.raises(TypeError):
        stories.detokenize([1, "2"])
    with pytest.raises(TypeError):
        stories.detokenize("1 2")
    with pytest.raises(TypeError):
        stories.generate(b"x", max_tokens="10")
    with pytest.raises(TypeError):
        stories.generate("x", stop=[1])
    with pytest.raises(TypeError):
        stories.chat([("user", "hi")])
    with pytest.raises(TypeError):
        stories.chat([{"role": "user", "content": 3}])
    with pytest.raises(TypeError):
        stories.session().eval([1.5])
    with pytest.raises(ValueError):
        stories.generate("x", temperature=float("nan"))
    with pytest.raises(tern.Error) as e:
        stories.detokenize([1, 512])
    assert e.value.code == -6 and "512" in e.value.message and "0..511" in e.value.message


def test_bad_text_raises_value_error(stories):
    """A NUL in a model path (the C call would open the name before it) and a lone surrogate in a
    chat message (no UTF-8 form) are ValueErrors naming where, not a wrong file or a bare codec error."""
    with pytest.raises(ValueError) as e:
        tern.Model(require(STORIES) + "\0x")
    assert str(e.value) == "path holds a NUL character at byte %d, which no file name can carry" % len(
        os.fsencode(require(STORIES)))
    with pytest.raises(ValueError) as e:
        stories.chat([{"role": "user", "content": "hi"}, {"role": "user", "content": "a\udc80b"}])
    assert str(e.value) == ("messages[1]['content'] is not valid Unicode text: '\\udc80' at index 1 (a lone "
                            "surrogate), expected text that UTF-8 can carry")


def test_lone_surrogates_are_value_errors_everywhere(stories):
    """Every str argument with a lone surrogate (no UTF-8 form) raises the ValueError chat raises,
    naming the argument and the index, instead of reaching the model as the bytes ED B3 BF; the same
    bytes passed as bytes are taken as they are."""
    msg = "%s is not valid Unicode text: '\\udcff' at index 1 (a lone surrogate), expected text that UTF-8 can carry"
    for name, call in (("text", lambda: stories.tokenize("a\udcffb")),
                       ("prompt", lambda: stories.generate("a\udcffb", max_tokens=1)),
                       ("prompt", lambda: stories.stream("a\udcffb", max_tokens=1)),
                       ("text", lambda: stories.perplexity("a\udcffb" * 400, ctx=8)),
                       ("stop", lambda: stories.generate("a", max_tokens=1, stop="a\udcffb")),
                       ("stop[1]", lambda: stories.generate("a", max_tokens=1, stop=["x", "a\udcffb"])),
                       ("template", lambda: stories.apply_chat_template([{"role": "user", "content": "hi"}],
                                                                       template="a\udcffb")),
                       ("messages[0]['content']", lambda: stories.chat([{"role": "user", "content": "a\udcffb"}])),
                       ("name", lambda: tern.set_isa("a\udcffb"))):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg % name
    # raw bytes go in as bytes: the three UTF-8 bytes of U+00E9 ("\xc3\xa9") as a str and as bytes
    assert stories.tokenize(b"a\xc3\xa9b") == stories.tokenize("a\u00e9b")
    ids = stories.tokenize(b"a\xedb", bos=False)     # a byte that is no UTF-8: llama2's byte token <0xED>
    assert len(ids) == 3 and ids[1] == 3 + 0xED and stories.token_piece(ids[1]) == b"\xed"


def test_empty_and_out_of_range_inputs(stories):
    """An empty conversation, an empty stop string passed alone and an id outside the vocabulary
    are refused with messages that say so (the server's 400 for "messages": [], token_piece's
    TERN_E_RANGE)."""
    with pytest.raises(ValueError) as e:
        stories.chat([])
    assert str(e.value) == "messages is empty: expected at least one message to reply to"
    with pytest.raises(ValueError) as e:
        stories.generate("Once", max_tokens=1, stop="")
    assert str(e.value) == "stop is empty: a stop string needs at least one character"
    with pytest.raises(tern.Error) as e:
        stories.is_eog(-5)
    assert "is_eog: id -5: expected 0..%d" % (stories.n_vocab - 1) in str(e.value)
    with pytest.raises(tern.Error):
        stories.is_eog(stories.n_vocab)
    assert stories.is_eog(0) in (True, False)


def test_chat_content_parts(qwen3):
    """OpenAI's content parts make the same prompt as the joined string (the server's rule), and a
    part that is not text is a TypeError naming it."""
    plain = [{"role": "user", "content": "hello there"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]}]
    assert qwen3.chat_tokens(parts) == qwen3.chat_tokens(plain)
    assert qwen3.apply_chat_template(parts) == qwen3.apply_chat_template(plain)
    with pytest.raises(TypeError) as e:
        qwen3.chat_tokens([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    assert str(e.value).startswith("messages[0]['content'][0] must be {'type': 'text', 'text': str}, got ")


def test_library_lookup():
    assert tern.library_path() == (os.environ.get("TERN_LIB") or os.path.join(ROOT, "build", "rel", "libtern.so"))
    code = "import sys; sys.path.insert(0, sys.argv[1]); import tern; tern.library_path()"
    env = dict(os.environ, TERN_LIB="/nonexistent/libtern.so")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "python")], stderr=subprocess.PIPE, env=env)
    assert r.returncode != 0 and b"TERN_LIB: /nonexistent/libtern.so" in r.stderr


def test_pip_install_offline(tmp_path):
    """pip install --no-build-isolation of ./python works without network; the installed copy runs."""
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError as e:
        if os.environ.get("CI") == "true":
            pytest.fail("%s: make deps installs python3-setuptools and python3-wheel" % e)
        pytest.skip(str(e))
    target = tmp_path / "site"
    src = tmp_path / "src"                            # a copy: the build leaves build/ and *.egg-info beside it
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "tests"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                        "--target", str(target), str(src)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout.decode()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import tern; m = tern.Model(sys.argv[2]); "
            "print(tern.__file__, m.tokenize('Once upon a time'))")
    env = dict(os.environ, TERN_LIB=tern.library_path())
    r = subprocess.run([sys.executable, "-c", code, str(target), require(STORIES)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()
    f, ids = r.stdout.decode().split(" ", 1)
    assert f.startswith(str(target)) and ids.strip() == "[1, 403, 407, 261, 378]"
    # without TERN_LIB the installed copy, outside any checkout, lists no checkout path among those tried
    env = {k: v for k, v in os.environ.items() if k != "TERN_LIB"}
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import tern; "
                        "print(tern.library_path())", str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, cwd=str(tmp_path))
    if r.returncode == 0:                             # an installed libtern.so (make install) was found
        assert not r.stdout.decode().startswith(str(tmp_path)), r.stdout.decode()
    else:
        assert b"tern: cannot load libtern.so; tried " in r.stderr and b"checkout:" not in r.stderr, r.stderr.decode()


def test_isa_and_load_options():
    """set_isa names what it refuses; mem_available smaller than the file refuses the load with the
    library's memory message (the file's size from the OS here); ptq1_0 modes give the same text."""
    with pytest.raises(tern.Error) as e:
        tern.set_isa("no-such-isa")
    assert e.value.name == "TERN_E_ARG" and "no-such-isa" in str(e.value) and "avx512vnni" in str(e.value)
    other = "neon" if platform.machine() in ("x86_64", "AMD64") else "avx2"   # another architecture's path
    with pytest.raises(tern.Error) as e:
        tern.set_isa(other)
    assert e.value.name == "TERN_E_UNSUPPORTED" and other in str(e.value)
    with pytest.raises(TypeError):
        tern.set_isa(3)
    tern.set_isa(None)                                # the automatic choice
    path = require(STORIES)
    auto = tern.Model(path, threads=1).isa
    for back in (None, ""):                           # ... also after a path was named
        tern.set_isa("ref")
        assert tern.Model(path, threads=1).isa == "ref"
        tern.set_isa(back)
        assert tern.Model(path, threads=1).isa == auto
    size = os.path.getsize(path)
    with pytest.raises(tern.Error) as e:
        tern.Model(path, threads=1, mem_available=size - 1)
    assert e.value.name == "TERN_E_NOMEM" and "available" in str(e.value)
    m = tern.Model(path, threads=1, mem_available=size + (64 << 20))
    assert m.generate("Once", max_tokens=4, temperature=0) == tern.Model(path, threads=1).generate(
        "Once", max_tokens=4, temperature=0)
    with pytest.raises(ValueError):
        tern.Model(path, ptq1_0="fast")
    with pytest.raises(ValueError):
        tern.Model(path, mem_available=0)


def test_struct_layouts_match_tern_h(tmp_path):
    """Every ctypes Structure of the package has the size and field offsets the C compiler gives
    the struct of the same name in include/tern.h (a probe compiled here): a field added to
    tern.h without the binding would make the library write past the Python object."""
    import shutil
    from tern import _lib
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    structs = {name: cls for name, cls in vars(_lib).items()
               if isinstance(cls, type) and issubclass(cls, ctypes.Structure) and name.startswith("tern_")}
    assert len(structs) >= 8
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "tern.h"', "int main(void) {"]
    for name, cls in structs.items():
        lines.append('    printf("%s size %%zu\\n", sizeof(%s));' % (name, name))
        for f in cls._fields_:
            lines.append('    printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, f[0], name, f[0]))
    lines.append("    return 0;\n}")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "probe"
    r = subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode == 0, r.stdout.decode()   # a field the binding names that tern.h lacks fails here
    got = dict(l.rsplit(" ", 1) for l in subprocess.run([str(exe)], stdout=subprocess.PIPE, check=True).stdout.decode().splitlines())
    for name, cls in structs.items():
        assert int(got["%s size" % name]) == ctypes.sizeof(cls), name
        for f in cls._fields_:
            assert int(got["%s.%s" % (name, f[0])]) == getattr(cls, f[0]).offset, (name, f[0])


def test_close_refused_while_a_generation_runs():
    """Model.close() while a stream is partly read, or while another thread generates, raises
    tern.Error instead of freeing what the generation uses; once the stream is closed (or the
    thread ends) the model closes, and a stream read after that raises 'the model is closed'."""
    m = tern.Model(require(STORIES), threads=1)
    it = m.stream("Once upon a time", max_tokens=30, temperature=0)
    next(it)
    with pytest.raises(tern.Error) as e:
        m.close()
    assert e.value.name == "TERN_E_ARG" and "1 call(s) on this model" in e.value.message, e.value.message
    it.close()
    started, done = threading.Event(), threading.Event()

    def worker():
        for _ in m.stream("Once upon a time", max_tokens=-1, ignore_eos=True, temperature=0):
            started.set()
            if done.is_set():
                break
    t = threading.Thread(target=worker)
    t.start()
    assert started.wait(30)
    with pytest.raises(tern.Error):
        m.close()
    done.set()
    t.join(30)
    m.close()
    with pytest.raises(tern.Error) as e:
        next(m.stream("Once upon a time", max_tokens=4))
    assert "the model is closed" in e.value.message
    # a stream made before the close and first read after it
    m2 = tern.Model(require(STORIES), threads=1)
    early = m2.stream("Once upon a time", max_tokens=4)
    m2.close()
    with pytest.raises(tern.Error) as e:
        next(early)
    assert "the model is closed" in e.value.message
    with pytest.raises(tern.Error):
        tern.Session(m)
    # a with-block left by an exception while a stream is unfinished: that exception is the one raised
    with pytest.raises(KeyError):
        with tern.Model(require(STORIES), threads=1) as m3:
            it3 = m3.stream("Once upon a time", max_tokens=30, temperature=0)
            next(it3)
            raise KeyError("from the block")
    it3.close()


CLOSE_DURING_CALLS_SCRIPT = r"""
import sys, threading, time
sys.path.insert(0, sys.argv[1])
import tern
calls = {
    "perplexity": lambda m: m.perplexity("hello world " * 400, ctx=128),
    "tokenize": lambda m: m.tokenize("hello world " * 40000),
    "detokenize": lambda m: m.detokenize(list(range(3, 300)) * 100),
    "apply_chat_template": lambda m: m.apply_chat_template([{"role": "user", "content": "hi " * 200000}]),
    "chat_tokens": lambda m: m.chat_tokens([{"role": "user", "content": "hi " * 40000}]),
    "token_piece": lambda m: [m.token_piece(t) for t in range(m.n_vocab)],
    "is_eog": lambda m: [m.is_eog(t) for t in range(m.n_vocab)],
}
for name, f in calls.items():
    m = tern.Model(sys.argv[2], threads=1)
    want = f(m)
    got, closed, refused = [], [], []
    started = threading.Event()
    def loop():
        started.set()
        try:
            for _ in range({"perplexity": 1, "tokenize": 20, "detokenize": 20}.get(name, 300)):
                got.append(f(m))
        except tern.Error as e:
            closed.append(e.message)
    th = threading.Thread(target=loop)
    th.start()
    started.wait()
    time.sleep(0.05)                                # into the first call (perplexity's lasts about a second)
    while th.is_alive():
        try:
            m.close()
            break
        except tern.Error as e:
            refused.append(e.message)
            time.sleep(0.002)
    th.join()
    m.close()
    try:
        f(m)
        after = "no error"
    except tern.Error as e:
        after = e.message
    print(name, len(refused), all(g == want for g in got), closed, after, set(refused))
"""


def test_close_refused_while_any_call_runs(q35_path):
    """Model.close() from another thread while perplexity, tokenize, detokenize, a chat template,
    token_piece or is_eog runs on the model is refused (the call then ends with the result it gives
    alone) instead of freeing the model under it; after the close each of those calls raises 'the
    model is closed'. In a subprocess: freeing the model under a running call crashes it."""
    r = subprocess.run([sys.executable, "-c", CLOSE_DURING_CALLS_SCRIPT, os.path.join(ROOT, "python"), q35_path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, (r.returncode, r.stdout.decode(), r.stderr.decode())
    lines = r.stdout.decode().splitlines()
    assert [ln.split()[0] for ln in lines] == ["perplexity", "tokenize", "detokenize", "apply_chat_template",
                                               "chat_tokens", "token_piece", "is_eog"], lines
    refusal = ("Model.close: 1 call(s) on this model (generate, stream, chat, perplexity, tokenize, ...) have not "
               "ended; let them end, or close() an unfinished stream, first")
    total = 0
    for ln in lines:
        name, n_refused, same, rest = ln.split(" ", 3)
        assert same == "True", ln                       # every call that ran gave the result it gives alone
        # the loop either ran to its end or stopped at a call made after the close
        assert rest.startswith("[] ") or rest.startswith("['the model is closed'] "), ln
        assert rest.endswith(" the model is closed {%r}" % refusal) or rest.endswith(" the model is closed set()"), ln
        total += int(n_refused)
        if name == "perplexity":                        # one call of about a second: the close lands inside it
            assert int(n_refused) >= 1, ln
    assert total >= 1


INTERRUPT_TARGETS = ("_acquire_session", "_release_session", "_gen_tokens", "_enter", "_leave")


def _interrupt_at(k):
    """A sys.settrace tracer that raises KeyboardInterrupt at the k-th line event (0-based) met in
    the package's functions named in INTERRUPT_TARGETS, as Ctrl-C can between any two lines; the
    list it returns holds the name and line offset where it fired (empty: fewer than k+1 events)."""
    fired, seen = [], [0]

    def local(frame, event, arg):
        if event == "line" and not fired:
            if seen[0] == k:
                fired.append((frame.f_code.co_name, frame.f_lineno - frame.f_code.co_firstlineno))
                raise KeyboardInterrupt
            seen[0] += 1
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_name in INTERRUPT_TARGETS and frame.f_code.co_filename == tern.__file__:
            return local
        return None
    return tracer, fired


def test_ctrl_c_at_any_line_leaves_the_model_closable(stories):
    """A KeyboardInterrupt raised at each line of the session bookkeeping of a generation (acquire,
    the generation loop, release, in turn) leaves no call counted and no native session alive:
    close() then succeeds and frees every session of the model."""
    import gc
    want = stories.generate("Once upon a time", max_tokens=3, temperature=0)
    k = 0
    where = []
    while True:
        m = tern.Model(require(STORIES), threads=1)
        tracer, fired = _interrupt_at(k)
        got = None
        sys.settrace(tracer)
        try:
            got = m.generate("Once upon a time", max_tokens=3, temperature=0)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if not fired:
            assert got == want
            m.close()
            break
        where.append(fired[0])
        m.close()                                   # raises tern.Error if a call stayed counted
        gc.collect()
        live = [o for o in gc.get_objects() if isinstance(o, tern._RawSession) and o.m is m and o.h is not None]
        assert not live, (fired, live)              # every native session of the model was freed
        k += 1
    names = {n for n, _ in where}
    assert {"_acquire_session", "_release_session", "_gen_tokens", "_enter", "_leave"} <= names, where
    assert len(where) > 20, where


def test_handles_refuse_copy_and_pickle(stories):
    """copy.copy, copy.deepcopy and pickle of a Model or Session raise TypeError naming the class and
    what was refused: a copy would share the native handle, and freeing one frees it under the other."""
    import copy
    import pickle
    s = stories.session(ctx=16)
    for obj, cls in ((stories, "Model"), (s, "Session"), (s._s, "RawSession")):
        for what, fn in (("copy", copy.copy), ("deepcopy", copy.deepcopy), ("pickle", pickle.dumps)):
            with pytest.raises(TypeError) as e:
                fn(obj)
            assert str(e.value).startswith("cannot %s a tern.%s: it owns a native handle that only this object "
                                           "frees; " % (what, cls)), str(e.value)
    s.eval([1])
    assert s.pos == 1 and stories.tokenize("Once upon a time") == [1, 403, 407, 261, 378]
    s.close()


def test_closed_session_raises_the_same_error_everywhere(stories):
    """After Session.close() every attribute and method that reads the session, n_ctx included,
    raises tern.Error (TERN_E_ARG) 'the session is closed'."""
    s = stories.session(ctx=16)
    assert s.n_ctx == 16 and s.pos == 0
    s.close()
    for name, call in (("n_ctx", lambda: s.n_ctx), ("pos", lambda: s.pos), ("eval", lambda: s.eval([1])),
                       ("logits", s.logits), ("truncate", lambda: s.truncate(0)), ("reset", s.reset)):
        with pytest.raises(tern.Error) as e:
            call()
        assert (e.value.name, e.value.message) == ("TERN_E_ARG", "the session is closed"), name
    s.close()                                         # a second close does nothing


def test_cli_messages_and_warnings(stories, tmp_path):
    """As the CLI: a ctx longer than the model's trained context (stories260K: 2048) warns with
    tools/model_opts.c's text (perplexity: tools/perplexity.c's), naming the ctx parameter; an
    unknown chat template's error names the template parameter, not the CLI's flag."""
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = tern.Model(require(STORIES), threads=1, ctx=4096)
        s = m.session(ctx=3000)
        tern.Model(require(STORIES), threads=1, ctx=2048).close()        # the trained length: no warning
        m.session(ctx=2048).close()
    assert [str(x.message) for x in w] == [
        "ctx 4096 is longer than the model's trained context (2048 tokens); text past position 2048 may degrade",
        "ctx 3000 is longer than the model's trained context (2048 tokens); text past position 2048 may degrade"]
    assert w[0].filename == __file__
    s.close()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(tern.Error):
            m.perplexity("Once upon a time", ctx=4096)
    assert [str(x.message) for x in w] == ["ctx 4096 is longer than the model's trained context (2048 tokens); "
                                           "predictions past position 2048 of each chunk may degrade"]
    m.close()
    tmpl = tmp_path / "t.jinja"
    tmpl.write_text("hello {{ messages }} unknown")
    path = str(tmp_path / "t.gguf")
    subprocess.run([tern_bin(), "synth", "--arch", "qwen3-tiny", "--chat-template", str(tmpl), "-o", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = tern.Model(path, threads=1)
    for call in (m.apply_chat_template, m.chat_tokens):
        with pytest.raises(tern.Error) as e:
            call([{"role": "user", "content": "hi"}])
        assert e.value.name == "TERN_E_UNSUPPORTED" and e.value.message.endswith(
            "expected the ChatML, Qwen3 or Qwen3.5 family; choose one with template='chatml', 'qwen3' or 'qwen35'")
    assert m.chat_tokens([{"role": "user", "content": "hi"}], template="chatml") == m.tokenize(
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", special=True)
    m.close()


def test_sampling_bounds_are_value_errors(stories):
    """A number past the C float range, or one that rounds to 0 as a float where 0 is refused, and
    speculation bounds outside tern_spec_init's are ValueErrors naming the parameter, raised before
    anything reaches the library."""
    for kw, text in ((dict(temperature=1e300), "temperature must be a finite number in 0.0..100.0, got 1e+300"),
                     (dict(top_p=1e39), "top_p must be a finite number in 0.0..1.0, got 1e+39"),
                     (dict(temperature=100.5), "temperature must be a finite number in 0.0..100.0, got 100.5"),
                     (dict(top_p=5), "top_p must be a finite number in 0.0..1.0, got 5.0"),
                     (dict(repeat_penalty=1e-300), "repeat_penalty must be > 0 as a C float (it rounds to 0)"),
                     (dict(speculative={"draft_max": 0}), "speculative['draft_max'] must be in 1..14, got 0"),
                     (dict(speculative={"draft_max": 15}), "speculative['draft_max'] must be in 1..14, got 15"),
                     (dict(speculative={"ngram_min": 17}), "speculative['ngram_min'] must be in 1..16, got 17"),
                     (dict(speculative={"ngram_min": 3, "ngram_max": 2}), "ngram_max (2) must be >= ngram_min (3)")):
        with pytest.raises(ValueError) as e:
            stories.generate("Once", max_tokens=2, **kw)
        assert text in str(e.value), (kw, str(e.value))
    assert stories.generate("Once", max_tokens=4, temperature=0, speculative={"draft_max": 14, "ngram_min": 1,
                                                                                "ngram_max": 16})
