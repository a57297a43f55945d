"""tern: Python bindings of the tern inference engine (libtern.so through ctypes).

    import tern
    m = tern.Model("stories260K.gguf")
    print(m.generate("Once upon a time", max_tokens=64, temperature=0))

See docs/PYTHON.md for the API, its bounds, errors, threading and how libtern.so is found.
"""

import array
import ctypes
import ctypes.util
import math
import os
import threading
import warnings
import weakref

from . import _lib

__all__ = ["Error", "Model", "Session", "library_path", "set_isa"]
__version__ = "0.1.0"

_LIB = None
_LIB_PATH = None
_LIB_LOCK = threading.Lock()


def _lib_handle():
    global _LIB, _LIB_PATH
    with _LIB_LOCK:
        if _LIB is None:
            _LIB, _LIB_PATH = _lib.load()
    return _LIB


def library_path():
    """The path libtern.so was loaded from (loads it if needed)."""
    _lib_handle()
    return _LIB_PATH


def set_isa(name):
    """Choose the kernel path for the whole process by name ("ref", "avx2", "avx512vnni", "neon",
    "dotprod", "i8mm", ...; None or "": the fastest this CPU runs). Call it before loading models:
    weights are laid out at load for the path then active. Raises tern.Error: TERN_E_ARG for a name
    that is no path on any architecture, TERN_E_UNSUPPORTED when the path is not built in, this CPU
    cannot run it, or it disagrees with the scalar reference here."""
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be None or a str, got %s" % type(name).__name__)
    lib = _lib_handle()
    err = _lib.tern_err()
    if lib.tern_set_isa(_utf8("name", name or ""), ctypes.byref(err)) != 0:
        _raise(err)


class Error(Exception):
    """An error reported by the engine. code: the TERN_E_* value (negative int); name: its name
    ("TERN_E_IO"); message: the library's text (what, where, expected, got)."""

    def __init__(self, code, message):
        self.code = code
        self.name = _lib.ERROR_NAMES.get(code, "TERN_E_%d" % code)
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


def _raise(err):
    raise Error(err.code, err.msg.decode("utf-8", "replace"))


def _raise_chat(err):
    """_raise for the chat template calls: the library's unknown-template message names the CLI's
    flag; here the choice is the template parameter."""
    msg = err.msg.decode("utf-8", "replace").replace("choose one with --chat-template chatml|qwen3|qwen35",
                                                     "choose one with template='chatml', 'qwen3' or 'qwen35'")
    raise Error(err.code, msg)


def _warn_ctx(ctx, n_ctx_train, what="text past position %d may degrade"):
    """The CLI's warning for a context longer than the model's trained one (tools/model_opts.c),
    naming the ctx parameter."""
    if n_ctx_train > 0 and ctx > n_ctx_train:
        warnings.warn("ctx %d is longer than the model's trained context (%d tokens); %s"
                      % (ctx, n_ctx_train, what % n_ctx_train), stacklevel=3)


def _raise_bad_logits(lib, gen):
    """The generation stopped on logits that were not finite (damaged weights): raise Error
    (TERN_E_FORMAT) with the library's message naming the position and the logit."""
    err = _lib.tern_err()
    lib.tern_gen_logits_error(gen, ctypes.byref(err))
    _raise(err)


def _raise_bad_row(where, row):
    """Logits row (n_vocab floats) holds a NaN or an infinity: raise Error (TERN_E_FORMAT) naming
    where, the first such logit, n_vocab and its value, as tern_gen_logits_error and `tern
    perplexity` do."""
    i = next(k for k, x in enumerate(row) if not math.isfinite(x))
    v = row[i]
    raise Error(_lib.TERN_E_FORMAT, "%s are not finite (logit %d of %d is %s); expected finite logits: the model's "
                "weights may be damaged (NaN or Inf)" % (where, i, len(row), "NaN" if v != v else "+Inf" if v > 0 else "-Inf"))


# ---- argument checks: every value is checked here, before anything reaches C ---------------------

def _int(name, v, lo=None, hi=None, none_ok=False):
    if v is None and none_ok:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s must be an int, got %s" % (name, type(v).__name__))
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError("%s must be in %s..%s, got %d" % (name, lo if lo is not None else "", hi if hi is not None else "", v))
    return v


def _float(name, v, lo=None, hi=None):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("%s must be a number, got %s" % (name, type(v).__name__))
    v = float(v)
    if not math.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        if lo is not None and hi is not None:
            rng = " in %s..%s" % (lo, hi)
        elif lo is not None:
            rng = " >= %s" % lo
        else:
            rng = " <= %s" % hi if hi is not None else ""
        raise ValueError("%s must be a finite number%s, got %r" % (name, rng, v))
    return v


def _f32(name, v, lo=None, hi=None):
    """_float, and the value as the C float it becomes: a number past the float range (|x| > 3.4e38)
    is a ValueError naming it, not an infinity the library refuses."""
    v = _float(name, v, lo, hi)
    f = ctypes.c_float(v).value
    if not math.isfinite(f):
        raise ValueError("%s must be within the float range (|x| <= 3.4e38), got %r" % (name, v))
    return f


def _utf8(name, v):
    """The str v as UTF-8. A lone surrogate ("\\udcff", which os.fsdecode and the surrogateescape
    error handler make of bytes that are not UTF-8) has no UTF-8 form: ValueError naming the
    argument and the index, never bytes the text did not hold."""
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("%s is not valid Unicode text: %s at index %d (a lone surrogate), expected text that UTF-8 "
                         "can carry" % (name, ascii(v[e.start]), e.start)) from None


def _text(name, v):
    """str (encoded as UTF-8; a lone surrogate is a ValueError, see _utf8) or bytes (any bytes: the
    tokenizer takes them as they are)."""
    if isinstance(v, str):
        return _utf8(name, v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    raise TypeError("%s must be str or bytes, got %s" % (name, type(v).__name__))


def _ids(name, v):
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError("%s must be a sequence of ints, got %s" % (name, type(v).__name__))
    out = list(v)
    for i, t in enumerate(out):
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError("%s[%d] must be an int, got %s" % (name, i, type(t).__name__))
        if not -2**31 <= t < 2**31:
            raise ValueError("%s[%d] = %d does not fit a 32-bit token id" % (name, i, t))
    return out


def _stops(stop):
    if stop is None:
        return []
    if isinstance(stop, str):
        if not stop:
            raise ValueError("stop is empty: a stop string needs at least one character")
        _utf8("stop", stop)
        stop = [stop]
    if not isinstance(stop, (list, tuple)):
        raise TypeError("stop must be a str or a list of str, got %s" % type(stop).__name__)
    for i, s in enumerate(stop):
        if not isinstance(s, str):
            raise TypeError("stop[%d] must be a str, got %s" % (i, type(s).__name__))
        if not s:
            raise ValueError("stop[%d] is empty: a stop string needs at least one character" % i)
        _utf8("stop[%d]" % i, s)   # matched against decoded text, which never holds a lone surrogate
    return list(stop)


def _logit_bias(v):
    """logit_bias {token_id: bias} (llama-cpp-python's and OpenAI's): the ids and the biases, a bias
    a finite number or False / -inf (a ban). Ids are checked against the vocabulary by the sampler."""
    if v is None:
        return [], []
    if not isinstance(v, dict):
        raise TypeError("logit_bias must be a dict {token_id: bias}, got %s" % type(v).__name__)
    ids, bias = [], []
    for k, b in v.items():
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError("logit_bias key %r must be an int token id, got %s" % (k, type(k).__name__))
        if not 0 <= k < 2**31:
            raise ValueError("logit_bias key %d is not a token id (expected 0..2**31-1)" % k)
        if b is False:
            b = float("-inf")
        elif isinstance(b, bool) or not isinstance(b, (int, float)):
            raise TypeError("logit_bias[%d] must be a number or False (a ban), got %s" % (k, type(b).__name__))
        try:
            f = float(b)
        except OverflowError:
            f = float("nan")
        if f != f or f == float("inf") or (f != float("-inf") and abs(f) > 3.4028234663852886e38):
            raise ValueError("logit_bias[%d] = %r: expected a number within the float range or -inf / False (a ban)"
                             % (k, b))
        b = f
        ids.append(k)
        bias.append(b)
    return ids, bias


def _libm_expf():
    """The C library's expf, which tools/perplexity.c calls (so perplexity's sums take its exact
    values), else exp rounded to a float (within one float ulp of it)."""
    try:
        f = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6").expf
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
        return f
    except (OSError, AttributeError):
        return lambda x: ctypes.c_float(math.exp(x)).value


_expf = _libm_expf()


def _int32_array(ids):
    return (ctypes.c_int32 * max(1, len(ids)))(*ids)


class _Sampling:
    """Sampler parameters of generate/stream/chat, checked (bounds of tern_sampler_init)."""

    def __init__(self, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop,
                 speculative, ignore_eos, logit_bias=None):
        self.max_tokens = _int("max_tokens", max_tokens, -1, 2**31 - 1)
        self.bias_ids, self.bias = _logit_bias(logit_bias)
        p = _lib.tern_sampler_params()
        lib = _lib_handle()
        lib.tern_sampler_params_default(ctypes.byref(p))
        p.temp = _f32("temperature", temperature, 0.0, 100.0)      # the CLI's --temp range
        p.top_k = _int("top_k", top_k, -2**31, 2**31 - 1)
        p.top_p = _f32("top_p", top_p, 0.0, 1.0)                   # the CLI's --top-p range
        p.min_p = _f32("min_p", min_p, 0.0, 1.0)
        p.repeat_penalty = _f32("repeat_penalty", repeat_penalty, None, None)
        if p.repeat_penalty <= 0:
            raise ValueError("repeat_penalty must be > 0%s, got %r" % (
                " as a C float (it rounds to 0)" if _float("repeat_penalty", repeat_penalty) > 0 else "", repeat_penalty))
        self.repeat_last_n = _int("repeat_last_n", repeat_last_n, -1, 2**31 - 1)
        p.seed = _lib.TERN_SEED_RANDOM if seed is None else _int("seed", seed, 0, 2**64 - 2)
        self.params = p
        self.stop = _stops(stop)
        if not isinstance(ignore_eos, bool):
            raise TypeError("ignore_eos must be a bool, got %s" % type(ignore_eos).__name__)
        self.ignore_eos = ignore_eos
        self.spec = None
        if speculative is not None and speculative is not False:
            sp = _lib.tern_spec_params()
            lib.tern_spec_params_default(ctypes.byref(sp))
            if isinstance(speculative, dict):
                for k, v in speculative.items():
                    if k in ("draft_max", "ngram_min", "ngram_max"):   # bounds of tern_spec_init (tern.h)
                        lo, hi = {"draft_max": (1, 14), "ngram_min": (1, 16), "ngram_max": (1, 16)}[k]
                        setattr(sp, k, _int("speculative[%r]" % k, v, lo, hi))
                    elif k == "adaptive":
                        if not isinstance(v, bool):
                            raise TypeError("speculative['adaptive'] must be a bool, got %s" % type(v).__name__)
                        sp.adaptive = v
                    else:
                        raise ValueError("speculative: unknown key %r (expected draft_max, ngram_min, ngram_max, "
                                         "adaptive)" % (k,))
            elif speculative is not True:
                raise TypeError("speculative must be a bool or a dict, got %s" % type(speculative).__name__)
            if sp.ngram_max < sp.ngram_min:
                raise ValueError("speculative: ngram_max (%d) must be >= ngram_min (%d)" % (sp.ngram_max, sp.ngram_min))
            sp.ignore_eos = ignore_eos
            self.spec = sp


def _chat_msgs(messages):
    if not isinstance(messages, (list, tuple)):
        raise TypeError("messages must be a list of {'role': str, 'content': str} dicts, got %s" % type(messages).__name__)
    keep = []
    arr = (_lib.tern_chat_msg * max(1, len(messages)))()
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise TypeError("messages[%d] must be a dict, got %s" % (i, type(msg).__name__))
        parts = msg.get("content")
        if isinstance(parts, (list, tuple)):   # OpenAI's content parts: the text parts joined, as the server
            for j, part in enumerate(parts):
                if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                    raise TypeError("messages[%d]['content'][%d] must be {'type': 'text', 'text': str}, got %r"
                                    % (i, j, part if not isinstance(part, (str, bytes)) else type(part).__name__))
            msg = dict(msg, content="".join(part["text"] for part in parts))
        for k in ("role", "content"):
            if not isinstance(msg.get(k), str):
                raise TypeError("messages[%d][%r] must be a str, got %s" % (i, k, type(msg.get(k)).__name__))
        role, content = _utf8("messages[%d]['role']" % i, msg["role"]), _utf8("messages[%d]['content']" % i, msg["content"])
        if b"\0" in role or b"\0" in content:
            raise ValueError("messages[%d] holds a NUL character, which the template cannot carry" % i)
        keep += [role, content]
        arr[i].role, arr[i].content = role, content
    return arr, keep


class _NoCopy:
    """Refuses copy.copy, copy.deepcopy and pickle: the object owns a native handle that exactly one
    Python object frees, so a copy would free it under the other (or carry a dead pointer)."""

    def _no_copy(self, what):
        raise TypeError("cannot %s a tern.%s: it owns a native handle that only this object frees; %s"
                        % (what, type(self).__name__.lstrip("_"), self._no_copy_hint))

    def __copy__(self):
        self._no_copy("copy")

    def __deepcopy__(self, memo):
        self._no_copy("deepcopy")

    def __reduce_ex__(self, protocol):
        self._no_copy("pickle")


class Model(_NoCopy):
    """A loaded GGUF model (read-only, shared by its sessions).

    path: the .gguf file (str, bytes or os.PathLike). threads: worker threads including the caller
    (None: all online cores; 1..1024). numerics: None or "fast", "ggml", "f32" (see tern.h).
    ctx: the context of the sessions generate/stream/chat use (None: 4096, or the model's trained
    context when that is shorter, as `tern run`; 1..2**24). mmap: map the file instead of reading
    it. mem_available: None (the OS's figure) or the bytes the memory checks assume available.
    ptq1_0: None/"auto", "transcode" or "direct" (how PTQ1_0 matrices run; the same bits).
    Raises tern.Error (the file, its format, memory) or TypeError/ValueError (arguments)."""

    def __init__(self, path, threads=None, numerics=None, ctx=None, mmap=False, mem_available=None, ptq1_0=None):
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError("path must be a str, bytes or os.PathLike, got %s" % type(path).__name__)
        path = os.fsencode(path)
        if b"\0" in path:   # the C call would stop at it and open another file's name
            raise ValueError("path holds a NUL character at byte %d, which no file name can carry" % path.index(b"\0"))
        threads = _int("threads", threads, 1, 1024, none_ok=True)
        if numerics is not None and not isinstance(numerics, str):
            raise TypeError("numerics must be None or a str, got %s" % type(numerics).__name__)
        if numerics is not None and numerics not in _lib.NUMERICS:
            raise ValueError("numerics must be one of fast, ggml, f32, got %r" % numerics)
        ctx = _int("ctx", ctx, 1, 1 << 24, none_ok=True)
        if not isinstance(mmap, bool):
            raise TypeError("mmap must be a bool, got %s" % type(mmap).__name__)
        mem_available = _int("mem_available", mem_available, 1, (1 << 64) - 1, none_ok=True)
        if ptq1_0 is not None and not isinstance(ptq1_0, str):
            raise TypeError("ptq1_0 must be None or a str, got %s" % type(ptq1_0).__name__)
        if ptq1_0 is not None and ptq1_0 not in _lib.PTQ1_0:
            raise ValueError("ptq1_0 must be one of auto, transcode, direct, got %r" % ptq1_0)
        lib = _lib_handle()
        self._lib = lib
        self._h = None
        o = _lib.tern_model_opts()
        lib.tern_model_opts_default(ctypes.byref(o))
        o.n_threads = threads or 0
        o.use_mmap = mmap
        o.numerics = _lib.NUMERICS[numerics or "fast"]
        o.mem_available = mem_available or 0
        o.ptq1_0 = _lib.PTQ1_0[ptq1_0 or "auto"]
        if not os.path.exists(path):   # the library's own message for a missing file, with the path
            raise Error(-1, "cannot open '%s': No such file or directory" % os.fsdecode(path))
        h = ctypes.c_void_p()
        err = _lib.tern_err()
        if lib.tern_model_load(ctypes.byref(h), path, ctypes.byref(o), ctypes.byref(err)) != 0:
            msg = err.msg.decode("utf-8", "replace")
            if os.fsdecode(path) not in msg:
                msg = "'%s': %s" % (os.fsdecode(path), msg)
            raise Error(err.code, msg)
        self._h = h
        self.path = os.fsdecode(path)
        info = _lib.tern_model_info()
        lib.tern_model_get_info(h, ctypes.byref(info))
        self.arch = info.arch.decode()
        self.name = (info.name or b"").decode("utf-8", "replace")
        self.n_vocab = info.n_vocab
        self.n_ctx_train = info.n_ctx_train
        self.bos = info.bos
        self.eos = info.eos
        self.add_bos = info.add_bos
        self.n_threads = info.n_threads
        self.isa = info.isa.decode()
        self.has_chat_template = info.has_chat_template
        if ctx is None:
            ctx = 4096 if self.n_ctx_train <= 0 else min(4096, self.n_ctx_train)
        else:
            _warn_ctx(ctx, self.n_ctx_train)
        self.ctx = ctx
        self._idle = []                      # pooled _RawSessions of generate/stream/chat, not in use
        self._uses = weakref.WeakSet()       # a _Use per call now running on _h (close() refuses while any)
        self._sessions = weakref.WeakSet()   # live Session objects (close() refuses while any exist)
        # guards _idle, the additions to _uses and _sessions, and _h's freeing. Reentrant: a
        # _RawSession's __del__ takes it and may run (garbage collection) in a thread that holds it
        self._idle_lock = threading.RLock()

    _no_copy_hint = "share this object (threads may) or load the file again"

    # ---- lifetime --------------------------------------------------------------------------------

    def close(self):
        """Free the model. Raises Error (TERN_E_ARG) while a Session of it is open, or while a call
        on it (generate, stream, chat, perplexity, tokenize, detokenize, token_piece, is_eog,
        apply_chat_template, chat_tokens, in any thread) has not ended: a stream iterator not
        read to its end holds the model until it is closed (its close()) or freed. Every call
        after close() raises Error (TERN_E_ARG) "the model is closed"."""
        with self._idle_lock:
            if self._h is None:
                return
            if len(self._sessions):
                raise Error(_lib.TERN_E_ARG, "Model.close: %d Session(s) of this model are still open; close them first"
                            % len(self._sessions))
            n = len(self._uses)
            if n:
                raise Error(_lib.TERN_E_ARG, "Model.close: %d call(s) on this model (generate, stream, chat, perplexity, "
                            "tokenize, ...) have not ended; let them end, or close() an unfinished stream, first" % n)
            for s in self._idle:
                s._free()                    # while _h is set: _RawSession._free frees only then
            self._idle = []
            h, self._h = self._h, None
            self._lib.tern_model_free(h)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
            return
        try:                                 # an exception is leaving the block: it is the one to see
            self.close()
        except Error:
            pass                             # (the model is freed once its generations end: __del__)

    def __del__(self):
        try:
            if self._h is not None and not len(self._sessions) and not len(self._uses):
                self.close()
        except Exception:
            pass

    def _handle(self):
        if self._h is None:
            raise Error(_lib.TERN_E_ARG, "the model is closed")
        return self._h

    def _enter(self, use):
        """Count use (a _Use) as a call running on the model, so close() refuses until _leave(use),
        and return the native handle. Raises Error "the model is closed" after close(). Callers:
        `use = _Use()`, then `try: h = self._enter(use) ... finally: self._leave(use)`."""
        with self._idle_lock:
            h = self._handle()
            self._uses.add(use)
        return h

    def _leave(self, use):
        self._uses.discard(use)

    # ---- tokens ----------------------------------------------------------------------------------

    def tokenize(self, text, special=False, bos=None):
        """Token ids of text (str as UTF-8, or bytes). special: control-token text
        (<|im_start|>) becomes control tokens. bos: prepend BOS (None: when the vocabulary asks
        for it, as `tern tokenize`)."""
        b = _text("text", text)
        if not isinstance(special, bool):
            raise TypeError("special must be a bool, got %s" % type(special).__name__)
        if bos is not None and not isinstance(bos, bool):
            raise TypeError("bos must be None or a bool, got %s" % type(bos).__name__)
        return self._tokenize(b, special, self.add_bos if bos is None else bos)

    def _tokenize(self, b, special, bos):
        use = _Use()
        try:
            h = self._enter(use)
            n = ctypes.c_int(0)
            err = _lib.tern_err()
            cap = len(b) + 2
            while True:
                out = (ctypes.c_int32 * cap)()
                rc = self._lib.tern_tokenize(h, b, len(b), bos, special, out, cap, ctypes.byref(n), ctypes.byref(err))
                if rc == 0:
                    return list(out[:n.value])
                if rc != _lib.TERN_E_RANGE or n.value <= cap:
                    _raise(err)
                cap = n.value
        finally:
            self._leave(use)

    def token_piece(self, id, special=True):
        """The bytes of one token (special: control tokens give their text)."""
        _int("id", id)
        if not 0 <= id < self.n_vocab:
            raise Error(_lib.TERN_E_RANGE, "token_piece: id %d: expected 0..%d" % (id, self.n_vocab - 1))
        use = _Use()
        try:
            h = self._enter(use)
            buf = ctypes.create_string_buffer(256)
            n = self._lib.tern_token_piece(h, id, special, buf, 256)
            if n > 256:
                buf = ctypes.create_string_buffer(n)
                n = self._lib.tern_token_piece(h, id, special, buf, n)
            return buf.raw[:n]
        finally:
            self._leave(use)

    def is_eog(self, id):
        """Whether id ends a generation (EOS, <|im_end|>, ...). An id outside 0..n_vocab-1 raises
        Error (TERN_E_RANGE), as token_piece does."""
        _int("id", id)
        if not 0 <= id < self.n_vocab:
            raise Error(_lib.TERN_E_RANGE, "is_eog: id %d: expected 0..%d" % (id, self.n_vocab - 1))
        use = _Use()
        try:
            return bool(self._lib.tern_token_is_eog(self._enter(use), id))
        finally:
            self._leave(use)

    def detokenize(self, ids, special=False):
        """The text of ids: control tokens give no text (special=True: their text, as `tern tokenize
        --detokenize --parse-special`), a leading BOS drops the SentencePiece space of the next
        piece, bytes that are not valid UTF-8 become U+FFFD (`tern tokenize --detokenize`). An id
        outside 0..n_vocab-1 raises Error (TERN_E_RANGE)."""
        ids = _ids("ids", ids)
        if not isinstance(special, bool):
            raise TypeError("special must be a bool, got %s" % type(special).__name__)
        use = _Use()
        try:
            self._enter(use)
            d = _Detok(self, special)
            return "".join(d.put(t, i) for i, t in enumerate(ids)) + d.flush()
        finally:
            self._leave(use)

    # ---- generation ------------------------------------------------------------------------------

    def _acquire_session(self, use):
        """Count use as a running call (see _enter) and give it, as use.s, a reset session of the
        pool (a new one when all are in use); returns use.s. _release_session(use) undoes it."""
        with self._idle_lock:
            self._enter(use)
            if self._idle:
                use.s = self._idle.pop()
        if use.s is None:
            use.s = _RawSession(self, self.ctx, None)
        use.s.reset()
        return use.s

    def _release_session(self, use):
        """Return use.s (reset) to the pool and stop counting use. Safe to call after any part of
        _acquire_session ran, and robust to an exception (Ctrl-C) at any point of either: a session
        that misses the pool is freed by its __del__, and use leaves _uses (a WeakSet) once the
        caller's frame lets go of it, so close() is never refused for good."""
        s, use.s = use.s, None
        try:
            if s is not None:
                s.reset()
                with self._idle_lock:
                    self._idle.append(s)
        finally:
            self._leave(use)

    def generate(self, prompt, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,
                 repeat_penalty=1.0, repeat_last_n=64, seed=None, stop=None, speculative=False, special=False,
                 ignore_eos=False, logit_bias=None):
        """Generate a continuation of prompt (raw text, no chat template, as `tern run`) and return
        it. Same parameters as stream(); the text is the concatenation of stream()'s pieces."""
        return "".join(self.stream(prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                   min_p=min_p, repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                                   seed=seed, stop=stop, speculative=speculative, special=special,
                                   ignore_eos=ignore_eos, logit_bias=logit_bias))

    def stream(self, prompt, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,
               repeat_penalty=1.0, repeat_last_n=64, seed=None, stop=None, speculative=False, special=False,
               ignore_eos=False, logit_bias=None):
        """Yield the generated text in pieces as tokens arrive. The prompt is tokenised as `tern run`
        does (BOS when the vocabulary asks for it or the prompt is empty; special: parse
        control-token text). Sampling as llama.cpp (tern.h): temperature 0 is greedy; seed None
        draws one. Stops at an end-of-generation token (unless ignore_eos), after max_tokens
        tokens (-1: no limit), when the context is full, or before the first occurrence of any
        stop string (not included). speculative: True or a dict (draft_max, ngram_min,
        ngram_max, adaptive) for prompt-lookup speculation: with temperature 0 the same text,
        fewer forward passes on repetitive text. logit_bias: {token_id: bias} added to those
        tokens' logits before sampling (False or -inf bans a token; ids outside the vocabulary
        raise Error). One C call per token, so Ctrl-C (KeyboardInterrupt) stops between tokens;
        the model stays usable. Logits that are not finite (a model with damaged NaN/Inf weights)
        raise Error (TERN_E_FORMAT) naming the position; nothing is sampled from them."""
        b = _text("prompt", prompt)
        if not isinstance(special, bool):
            raise TypeError("special must be a bool, got %s" % type(special).__name__)
        smp = _Sampling(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop,
                        speculative, ignore_eos, logit_bias)
        ids = self._tokenize(b, special, self.add_bos or len(b) == 0)
        if not ids:
            raise Error(_lib.TERN_E_ARG, "empty prompt and the model has no BOS token: give a prompt")
        return self._stream_ids(ids, smp)

    def _stream_ids(self, ids, smp):
        """Generator over the text pieces of a generation from prompt ids (checked before the
        first next(): errors in the prompt raise at the call)."""
        if len(ids) >= self.ctx:
            raise Error(_lib.TERN_E_RANGE, "prompt has %d tokens, context is %d (ctx)" % (len(ids), self.ctx))
        for i, t in enumerate(ids):
            if not 0 <= t < self.n_vocab:
                raise Error(_lib.TERN_E_RANGE, "prompt token %d at index %d: expected 0..%d" % (t, i, self.n_vocab - 1))
        if sum(1 for k, b in zip(smp.bias_ids, smp.bias) if b == float("-inf") and k < self.n_vocab) == self.n_vocab:
            raise ValueError("logit_bias bans every token of the model (%d); leave at least one token allowed" % self.n_vocab)
        return _StopFilter(self._gen_tokens(ids, smp), smp.stop).run()

    def _gen_tokens(self, ids, smp):
        """Yield the text of each generated token (tern_gen, the loop of tern run, token by token)."""
        lib = self._lib
        sampler = ctypes.c_void_p()
        spec = ctypes.c_void_p()
        gen = ctypes.c_void_p()
        err = _lib.tern_err()
        use = _Use()
        try:
            s = self._acquire_session(use)   # first: the model stays open until the release
            h = self._h
            p = smp.params
            if smp.repeat_last_n < 0:                    # llama.cpp's -1: the whole context
                p.repeat_last_n = s.n_ctx
            else:
                p.repeat_last_n = smp.repeat_last_n
            if lib.tern_sampler_init(ctypes.byref(sampler), h, ctypes.byref(p), ctypes.byref(err)):
                _raise(err)
            if smp.bias_ids and lib.tern_sampler_set_logit_bias(sampler, _int32_array(smp.bias_ids),
                                                                (ctypes.c_float * len(smp.bias))(*smp.bias),
                                                                len(smp.bias), ctypes.byref(err)):
                _raise(err)
            if smp.spec is not None and lib.tern_spec_init(ctypes.byref(spec), h, ctypes.byref(smp.spec), ctypes.byref(err)):
                _raise(err)
            # the library's generation loop (tern_gen: the stop rules of tern run), read token by
            # token through tern_gen_tokens: no callback, so Ctrl-C stops between steps
            if lib.tern_gen_init(ctypes.byref(gen), h, ctypes.byref(err)):
                _raise(err)
            gp = _lib.tern_gen_params()
            lib.tern_gen_params_default(ctypes.byref(gp))
            gp.n_predict = smp.max_tokens
            gp.ignore_eos = smp.ignore_eos
            lib.tern_gen_begin(gen, s.h, sampler, spec, ctypes.byref(gp))
            logits = lib.tern_gen_prompt(gen, _int32_array(ids), len(ids), ctypes.byref(err))
            if not logits:
                _raise(err)
            d = _Detok(self)
            toks = ctypes.POINTER(ctypes.c_int32)()
            stop = lib.tern_gen_sample(gen, logits)
            while True:
                for j in range(lib.tern_gen_tokens(gen, ctypes.byref(toks))):
                    yield d.put(toks[j])
                if stop == _lib.TERN_STOP_LOGITS:
                    _raise_bad_logits(lib, gen)
                if stop != _lib.TERN_STOP_NONE:
                    break
                stop = lib.tern_gen_step(gen, None, None, ctypes.byref(err))
                if stop == _lib.TERN_STOP_ERROR:
                    _raise(err)
            lib.tern_gen_end(gen, ctypes.byref(err))
            tail = d.flush()
            if tail:
                yield tail
        finally:
            lib.tern_gen_free(gen)
            lib.tern_spec_free(spec)
            lib.tern_sampler_free(sampler)
            self._release_session(use)

    # ---- chat ------------------------------------------------------------------------------------

    def _check_chat(self, template, thinking, add_generation_prompt):
        if template is not None and not isinstance(template, str):
            raise TypeError("template must be None or a str, got %s" % type(template).__name__)
        if thinking is not None and not isinstance(thinking, bool):
            raise TypeError("thinking must be None or a bool, got %s" % type(thinking).__name__)
        if not isinstance(add_generation_prompt, bool):
            raise TypeError("add_generation_prompt must be a bool, got %s" % type(add_generation_prompt).__name__)
        return None if template is None else _utf8("template", template), True if thinking is None else thinking

    def apply_chat_template(self, messages, add_generation_prompt=True, thinking=None, template=None):
        """The prompt text the model's chat template makes of messages ([{'role', 'content'}]).
        template: None (the model's tokenizer.chat_template; ChatML without one) or "chatml",
        "qwen3", "qwen35". thinking: None (the template's default: thinking on) or a bool; False
        pre-fills the empty think block where the template does so."""
        tmpl, think = self._check_chat(template, thinking, add_generation_prompt)
        arr, keep = _chat_msgs(messages)
        err = _lib.tern_err()
        n = ctypes.c_size_t(0)
        cap = 4096
        use = _Use()
        try:
            h = self._enter(use)
            while True:
                buf = ctypes.create_string_buffer(cap)
                rc = self._lib.tern_chat_apply(h, tmpl, arr, len(messages), add_generation_prompt, think, buf, cap,
                                               ctypes.byref(n), ctypes.byref(err))
                if rc == 0:
                    return buf.raw[:n.value].decode("utf-8", "replace")
                if rc != _lib.TERN_E_RANGE or n.value + 1 <= cap:
                    _raise_chat(err)
                cap = n.value + 1
        finally:
            self._leave(use)

    def chat_tokens(self, messages, add_generation_prompt=True, thinking=None, template=None):
        """The prompt ids of messages (tern_chat_tokenize: control text parsed only in the
        template's scaffolding, message contents tokenised as plain text)."""
        tmpl, think = self._check_chat(template, thinking, add_generation_prompt)
        arr, keep = _chat_msgs(messages)
        err = _lib.tern_err()
        n = ctypes.c_int(0)
        cap = 256
        use = _Use()
        try:
            h = self._enter(use)
            while True:
                out = (ctypes.c_int32 * cap)()
                rc = self._lib.tern_chat_tokenize(h, tmpl, arr, len(messages), add_generation_prompt, think, True, out,
                                                  cap, ctypes.byref(n), ctypes.byref(err))
                if rc == 0:
                    return list(out[:n.value])
                if rc != _lib.TERN_E_RANGE or n.value <= cap:
                    _raise_chat(err)
                cap = n.value
        finally:
            self._leave(use)

    def chat(self, messages, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0,
             repeat_last_n=64, seed=None, stop=None, speculative=False, thinking=None, template=None, stream=False,
             logit_bias=None):
        """The assistant's reply to messages ([{'role': 'system'|'user'|'assistant'|'tool',
        'content': str}]) rendered with the model's chat template (see apply_chat_template) and
        generated as stream() does, ending at the template's end-of-turn token. Returns the text,
        or with stream=True an iterator of its pieces. The reply includes any <think> block the
        model writes. Takes generate's sampling parameters (max_tokens .. speculative, logit_bias)
        but not special (message contents are never parsed as control text) nor ignore_eos (the
        reply ends at the end of the turn)."""
        if not isinstance(stream, bool):
            raise TypeError("stream must be a bool, got %s" % type(stream).__name__)
        if isinstance(messages, (list, tuple)) and not messages:   # as the server's 400 for "messages": []
            raise ValueError("messages is empty: expected at least one message to reply to")
        smp = _Sampling(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop,
                        speculative, False, logit_bias)
        it = self._stream_ids(self.chat_tokens(messages, True, thinking, template), smp)
        return it if stream else "".join(it)

    # ---- sessions and scoring --------------------------------------------------------------------

    def session(self, ctx=None, batch=None):
        """A new Session of this model (see Session)."""
        return Session(self, ctx=ctx, batch=batch)

    def perplexity(self, text, ctx=512, chunks=None):
        """Perplexity of text by `tern perplexity -f`'s rules (llama-perplexity's): one trailing
        newline dropped, the text tokenised whole (BOS when the vocabulary adds it), cut into
        chunks of ctx tokens (4..2**24; BOS replaces each chunk's first token when the vocabulary
        adds it), the second half of each chunk scored. chunks: at most that many (None: all).
        Returns exp(mean -log p). Cost: the forward passes plus O(n_vocab) Python work per scored
        token. Raises Error (TERN_E_ARG) for a text shorter than one chunk, and Error (TERN_E_FORMAT)
        for logits that are not finite, naming the chunk, the position and the first such logit."""
        b = _text("text", text)
        c = _int("ctx", ctx, 4, 1 << 24)
        chunks = _int("chunks", chunks, 1, None, none_ok=True)
        _warn_ctx(c, self.n_ctx_train, "predictions past position %d of each chunk may degrade")
        if b.endswith(b"\n"):
            b = b[:-1]
        ids = self._tokenize(b, False, self.add_bos)
        n_chunk = len(ids) // c
        if chunks is not None:
            n_chunk = min(n_chunk, chunks)
        if n_chunk < 1:
            if not b:
                what = "empty (%d token%s%s)" % (len(ids), "" if len(ids) == 1 else "s",
                                                  ": the BOS only" if self.add_bos and ids else "")
            else:
                what = "too short: %d token%s" % (len(ids), "" if len(ids) == 1 else "s")
            raise Error(_lib.TERN_E_ARG, "perplexity: the text is %s, expected at least %d (one chunk of ctx %d)"
                        % (what, c, c))
        V = self.n_vocab
        first = c // 2
        use = _Use()
        try:
            self._enter(use)
            s = use.s = _RawSession(self, c, min(512, c))
            buf = (ctypes.c_float * ((c - first) * V))()
            rows = memoryview(buf).cast("B").cast("f")
            nll, count = 0.0, 0
            for ic in range(n_chunk):
                chunk = ids[ic * c:(ic + 1) * c]
                if self.add_bos and self.bos >= 0:
                    chunk[0] = self.bos
                s.reset()
                s.eval(chunk[:first])
                s.eval_all(chunk[first:], buf)
                for j in range(first, c - 1):
                    row = rows[(j - first) * V:(j - first + 1) * V]
                    mx = max(row)
                    if not math.isfinite(mx) or any(not math.isfinite(x) for x in row):
                        _raise_bad_row("perplexity: the logits at chunk %d, position %d (token %d of the text)"
                                       % (ic + 1, j, ic * c + j), row)
                    # tools/perplexity.c's arithmetic, in its order: d = l - max as a float (the
                    # double difference of two floats rounded once to float is the float
                    # subtraction: 53 >= 2*24 + 2 bits), the C library's expf(d), summed in
                    # double by index
                    d = array.array("f", [x - mx for x in row])
                    sm = 0.0
                    for e in map(_expf, d):
                        sm += e
                    nll += -(d[ids[ic * c + j + 1]] - math.log(sm))
                    count += 1
            return math.exp(nll / count)
        finally:
            if use.s is not None:
                use.s._free()
            self._leave(use)


class _Use:
    """One call running on a model's native handle (a generation, perplexity, tokenize, ...),
    counted in Model._uses from Model._enter to Model._leave; s: the _RawSession it runs on, if
    any. _uses is a WeakSet, so the count follows the live _Use objects: an exception (Ctrl-C)
    landing between _enter and _leave cannot leave a call counted once its frame is gone."""

    __slots__ = ("s", "__weakref__")

    def __init__(self):
        self.s = None


class _Detok:
    """tern_detok over one sequence: put(id) returns the text it completes."""

    def __init__(self, model, special=False):
        self.m = model
        self.special = special
        self.d = _lib.tern_detok()
        model._lib.tern_detok_init(ctypes.byref(self.d))
        self.buf = ctypes.create_string_buffer(1024)
        self.one = ctypes.create_string_buffer(1)

    def put(self, t, index=None):
        lib, h = self.m._lib, self.m._handle()
        if not 0 <= t < self.m.n_vocab:
            where = "" if index is None else " at index %d" % index
            raise Error(_lib.TERN_E_RANGE, "detokenize: id %d%s: expected 0..%d" % (t, where, self.m.n_vocab - 1))
        need = 3 * (lib.tern_token_piece(h, t, False, self.one, 0) + 3)   # tern_detok_put's bound
        if need > len(self.buf):
            self.buf = ctypes.create_string_buffer(need)
        n = lib.tern_detok_put(h, ctypes.byref(self.d), t, self.buf, len(self.buf))
        if n < 0:
            raise Error(n, "detokenize: id %d: %s" % (t, lib.tern_strerror(n).decode()))
        text = self.buf.raw[:n].decode("utf-8", "replace")
        if self.special and lib.tern_token_piece(h, t, False, self.one, 0) == 0:
            ctl = self.m.token_piece(t, True)          # a control token's text, after the bytes held before it
            if ctl:
                text += self.flush() + ctl.decode("utf-8", "replace")
        return text

    def flush(self):
        n = self.m._lib.tern_detok_flush(ctypes.byref(self.d), self.buf, len(self.buf))
        return self.buf.raw[:max(n, 0)].decode("utf-8", "replace")


class _StopFilter:
    """Text pieces up to the first occurrence of any stop string. A suffix of the text that could
    be the start of a stop string is held back until the next piece decides it, so no piece
    yielded ever holds part of a stop string."""

    def __init__(self, pieces, stops):
        self.pieces, self.stops = pieces, stops

    def run(self):
        pending = ""
        try:
            for p in self.pieces:
                if not self.stops:
                    if p:
                        yield p
                    continue
                pending += p
                cut = min((i for i in (pending.find(s) for s in self.stops) if i >= 0), default=-1)
                if cut >= 0:
                    if cut:
                        yield pending[:cut]
                    return
                hold = 0
                for s in self.stops:   # the longest suffix of pending that is a proper prefix of s
                    for k in range(min(len(s) - 1, len(pending)), hold, -1):
                        if pending.endswith(s[:k]):
                            hold = k
                            break
                if len(pending) > hold:
                    yield pending[:len(pending) - hold]
                    pending = pending[len(pending) - hold:]
            if pending:
                yield pending
        finally:
            self.pieces.close()


class _RawSession(_NoCopy):
    """A tern_session without the public checks (used by Model and Session)."""

    _no_copy_hint = "make another session"

    def __init__(self, model, ctx, batch):
        self.m = model
        self.h = None
        lib = model._lib
        o = _lib.tern_session_opts()
        lib.tern_session_opts_default(ctypes.byref(o))
        o.n_ctx = ctx
        if batch is not None:
            o.n_batch = batch
        h = ctypes.c_void_p()
        err = _lib.tern_err()
        if lib.tern_session_init(ctypes.byref(h), model._handle(), ctypes.byref(o), ctypes.byref(err)):
            _raise(err)
        self.h = h
        self.n_ctx = lib.tern_session_n_ctx(h)
        self.logits_ptr = None
        self.no_logits = "the session started"   # what left logits_ptr None, for Session.logits' error

    @property
    def pos(self):
        return self.m._lib.tern_session_pos(self.h)

    def eval(self, ids):
        err = _lib.tern_err()
        arr = _int32_array(ids)
        p = self.m._lib.tern_session_eval(self.h, arr, len(ids), ctypes.byref(err))
        if not p:
            _raise(err)
        self.logits_ptr = p
        return p

    def eval_all(self, ids, out):
        err = _lib.tern_err()
        self.logits_ptr = None                        # the session's own logits are not valid after it
        self.no_logits = "eval_all()"
        if self.m._lib.tern_session_eval_all(self.h, _int32_array(ids), len(ids), out, ctypes.byref(err)):
            _raise(err)

    def reset(self):
        self.m._lib.tern_session_reset(self.h)
        self.logits_ptr = None
        self.no_logits = "reset()"

    def _free(self):
        """Free the native session, under the model's lock and only while the model is open
        (tern_session_free reads the model): close() frees pooled sessions first and refuses
        while one is in use, so only a session the garbage collector finalises after its model
        is left unfreed (leaked rather than freed against a freed model)."""
        m = self.m
        with m._idle_lock:
            h, self.h = self.h, None
            if h is not None and m._h is not None:
                m._lib.tern_session_free(h)

    def __del__(self):
        try:
            self._free()
        except Exception:
            pass


class Session(_NoCopy):
    """One sequence over a model, evaluated incrementally: KV cache and state allocated at
    creation (ctx tokens: None = the model's ctx; batch: most tokens per forward pass, None =
    512). Not shared between threads: calls from two threads at once are serialised by a lock
    (use one Session per thread; sessions of one model run in parallel)."""

    _no_copy_hint = "make another with model.session() and eval the same tokens"

    def __init__(self, model, ctx=None, batch=None):
        if not isinstance(model, Model):
            raise TypeError("model must be a tern.Model, got %s" % type(model).__name__)
        ctx = _int("ctx", ctx, 1, 1 << 24, none_ok=True)
        batch = _int("batch", batch, 1, 1 << 16, none_ok=True)
        if ctx is not None:
            _warn_ctx(ctx, model.n_ctx_train)
        self.model = model
        self._lock = threading.Lock()
        self._s = None
        with model._idle_lock:                # counted before the model can be closed
            model._handle()
            model._sessions.add(self)
        try:
            self._s = _RawSession(model, ctx or model.ctx, batch)
        except BaseException:
            model._sessions.discard(self)
            raise

    @property
    def n_ctx(self):
        """The context in tokens (the most the sequence holds)."""
        with self._lock:
            return self._live().n_ctx

    @property
    def pos(self):
        """Tokens in the sequence so far (the position of the next one)."""
        with self._lock:
            return self._live().pos

    def _live(self):
        if self._s is None or self._s.h is None:
            raise Error(_lib.TERN_E_ARG, "the session is closed")
        return self._s

    def eval(self, tokens):
        """Append tokens (a non-empty sequence of ids) and compute the logits of the last one.
        Raises Error (TERN_E_RANGE: an id outside the vocabulary or pos + len > n_ctx; nothing is
        appended)."""
        ids = _ids("tokens", tokens)
        if not ids:
            raise ValueError("tokens is empty: eval needs at least one token")
        with self._lock:
            self._live().eval(ids)

    def logits(self):
        """The logits after the last eval: an array('f') of n_vocab floats (a copy: it stays valid
        after the next eval). Raises Error before the first eval."""
        with self._lock:
            s = self._live()
            if s.logits_ptr is None:
                raise Error(_lib.TERN_E_ARG, "Session.logits: no eval since %s: expected eval() first (a new session, "
                            "reset() and truncate() hold no logits)" % s.no_logits)
            a = array.array("f", bytes(self.model.n_vocab * 4))
            ctypes.memmove(a.buffer_info()[0], s.logits_ptr, self.model.n_vocab * 4)
            return a

    def truncate(self, pos):
        """Forget every token from pos on (0 <= pos <= self.pos; see tern_session_truncate)."""
        _int("pos", pos, 0, None)
        with self._lock:
            s = self._live()
            err = _lib.tern_err()
            if self.model._lib.tern_session_truncate(s.h, pos, ctypes.byref(err)):
                _raise(err)
            s.logits_ptr = None                       # the last kept token's logits are not stored
            s.no_logits = "truncate(%d)" % pos

    def reset(self):
        """Back to an empty sequence."""
        with self._lock:
            self._live().reset()

    def close(self):
        with self._lock:
            if self._s is not None:
                self._s._free()
                self._s = None
        self.model._sessions.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
