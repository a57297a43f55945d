"""ctypes declarations of include/tern.h and how libtern.so is found.

Only the standard library: the structs below mirror tern.h field by field (same order, same C
types), and every function gets argtypes/restype so that a wrong Python value fails in ctypes
instead of reaching C. The library is opened with ctypes.CDLL, so every call releases the GIL
while the engine runs (ctypes.PyDLL would hold it).
"""

import ctypes
import ctypes.util
import os

c_int, c_int32, c_int64, c_uint64 = ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
c_bool, c_float, c_char_p, c_size_t, c_void_p = ctypes.c_bool, ctypes.c_float, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p
P = ctypes.POINTER

TERN_OK = 0
ERROR_NAMES = {0: "TERN_OK", -1: "TERN_E_IO", -2: "TERN_E_FORMAT", -3: "TERN_E_UNSUPPORTED",
               -4: "TERN_E_NOMEM", -5: "TERN_E_ARG", -6: "TERN_E_RANGE"}
TERN_E_FORMAT, TERN_E_ARG, TERN_E_RANGE = -2, -5, -6
TERN_SEED_RANDOM = 2**64 - 1
TERN_SPEC_DRAFT_LIMIT = 14
NUMERICS = {"fast": 0, "ggml": 1, "f32": 2}
PTQ1_0 = {"auto": 0, "transcode": 1, "direct": 2}


class tern_err(ctypes.Structure):
    _fields_ = [("code", c_int), ("msg", ctypes.c_char * 1024)]   # tern.h's tern_err


class tern_model_opts(ctypes.Structure):
    _fields_ = [("n_threads", c_int), ("use_mmap", c_bool), ("numerics", c_int), ("progress", c_bool),
                ("mem_available", c_uint64), ("ptq1_0", c_int)]


class tern_model_info(ctypes.Structure):
    _fields_ = [("arch", c_char_p), ("name", c_char_p), ("n_vocab", c_int32), ("n_ctx_train", c_int32),
                ("n_embd", c_int32), ("n_layer", c_int32), ("n_head", c_int32), ("n_head_kv", c_int32),
                ("bos", c_int32), ("eos", c_int32), ("add_bos", c_bool), ("weight_bytes", c_uint64),
                ("bytes_per_token", c_uint64), ("isa", c_char_p), ("n_threads", c_int),
                ("has_chat_template", c_bool)]


class tern_session_opts(ctypes.Structure):
    _fields_ = [("n_ctx", c_int), ("n_batch", c_int), ("kv_f32", c_bool), ("n_checkpoints", c_int)]


class tern_sampler_params(ctypes.Structure):
    _fields_ = [("temp", c_float), ("top_k", c_int32), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("repeat_last_n", c_int32), ("seed", c_uint64)]


class tern_detok(ctypes.Structure):
    _fields_ = [("pend", ctypes.c_char * 8), ("n_pend", c_int), ("n_out", c_int)]


class tern_chat_msg(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class tern_spec_params(ctypes.Structure):
    _fields_ = [("draft_max", c_int), ("ngram_min", c_int), ("ngram_max", c_int), ("adaptive", c_bool),
                ("ignore_eos", c_bool)]


class tern_spec_stats(ctypes.Structure):
    _fields_ = [("n_steps", c_int64), ("n_drafted", c_int64), ("n_accepted", c_int64), ("n_tokens", c_int64)]


class tern_gen_params(ctypes.Structure):
    _fields_ = [("n_predict", c_int), ("ignore_eos", c_bool), ("split_think", c_bool), ("eval_last", c_bool),
                ("think_budget", c_int), ("forced", c_void_p), ("n_forced", c_int),
                ("on_token", c_void_p), ("user", c_void_p)]


TERN_STOP_NONE, TERN_STOP_ERROR, TERN_STOP_LOGITS = 0, 5, 6


# name: (restype, argtypes); handles (tern_model *, tern_session *, ...) are opaque void pointers
_PROTOS = {
    "tern_strerror": (c_char_p, [c_int]),
    "tern_model_opts_default": (None, [P(tern_model_opts)]),
    "tern_model_load": (c_int, [P(c_void_p), c_char_p, P(tern_model_opts), P(tern_err)]),
    "tern_model_free": (None, [c_void_p]),
    "tern_set_isa": (c_int, [c_char_p, P(tern_err)]),
    "tern_model_get_info": (None, [c_void_p, P(tern_model_info)]),
    "tern_tokenize": (c_int, [c_void_p, c_char_p, c_size_t, c_bool, c_bool, P(c_int32), c_int, P(c_int), P(tern_err)]),
    "tern_token_piece": (c_int, [c_void_p, c_int32, c_bool, ctypes.c_char_p, c_int]),
    "tern_token_is_eog": (c_bool, [c_void_p, c_int32]),
    "tern_detok_init": (None, [P(tern_detok)]),
    "tern_detok_put": (c_int, [c_void_p, P(tern_detok), c_int32, ctypes.c_char_p, c_int]),
    "tern_detok_flush": (c_int, [P(tern_detok), ctypes.c_char_p, c_int]),
    "tern_session_opts_default": (None, [P(tern_session_opts)]),
    "tern_session_init": (c_int, [P(c_void_p), c_void_p, P(tern_session_opts), P(tern_err)]),
    "tern_session_free": (None, [c_void_p]),
    "tern_session_n_ctx": (c_int, [c_void_p]),
    "tern_session_n_batch": (c_int, [c_void_p]),
    "tern_session_pos": (c_int, [c_void_p]),
    "tern_session_eval": (P(c_float), [c_void_p, P(c_int32), c_int, P(tern_err)]),
    "tern_session_eval_all": (c_int, [c_void_p, P(c_int32), c_int, P(c_float), P(tern_err)]),
    "tern_session_truncate": (c_int, [c_void_p, c_int, P(tern_err)]),
    "tern_session_reset": (None, [c_void_p]),
    "tern_sampler_params_default": (None, [P(tern_sampler_params)]),
    "tern_sampler_init": (c_int, [P(c_void_p), c_void_p, P(tern_sampler_params), P(tern_err)]),
    "tern_sampler_free": (None, [c_void_p]),
    "tern_sampler_sample": (c_int32, [c_void_p, P(c_float)]),
    "tern_sampler_accept": (None, [c_void_p, c_int32]),
    "tern_sampler_seed": (c_uint64, [c_void_p]),
    "tern_sampler_set_logit_bias": (c_int, [c_void_p, P(c_int32), P(c_float), c_int, P(tern_err)]),
    "tern_chat_apply": (c_int, [c_void_p, c_char_p, P(tern_chat_msg), c_int, c_bool, c_bool, ctypes.c_char_p,
                                c_size_t, P(c_size_t), P(tern_err)]),
    "tern_chat_tokenize": (c_int, [c_void_p, c_char_p, P(tern_chat_msg), c_int, c_bool, c_bool, c_bool, P(c_int32),
                                   c_int, P(c_int), P(tern_err)]),
    "tern_spec_params_default": (None, [P(tern_spec_params)]),
    "tern_spec_init": (c_int, [P(c_void_p), c_void_p, P(tern_spec_params), P(tern_err)]),
    "tern_spec_free": (None, [c_void_p]),
    "tern_spec_add": (c_int, [c_void_p, P(c_int32), c_int, P(tern_err)]),
    "tern_spec_get_stats": (None, [c_void_p, P(tern_spec_stats)]),
    "tern_spec_step": (c_int, [c_void_p, c_void_p, c_void_p, c_int32, c_int, P(c_int32), P(c_int), P(tern_err)]),
    "tern_gen_params_default": (None, [P(tern_gen_params)]),
    "tern_gen_init": (c_int, [P(c_void_p), c_void_p, P(tern_err)]),
    "tern_gen_free": (None, [c_void_p]),
    "tern_gen_begin": (None, [c_void_p, c_void_p, c_void_p, c_void_p, P(tern_gen_params)]),
    "tern_gen_prompt": (P(c_float), [c_void_p, P(c_int32), c_int, P(tern_err)]),
    "tern_gen_sample": (c_int, [c_void_p, P(c_float)]),
    "tern_gen_step": (c_int, [c_void_p, c_void_p, c_void_p, P(tern_err)]),
    "tern_gen_end": (c_int, [c_void_p, P(tern_err)]),
    "tern_gen_tokens": (c_int, [c_void_p, P(P(c_int32))]),
    "tern_gen_logits_error": (c_int, [c_void_p, P(tern_err)]),
}


def _candidates():
    """Where libtern.so is looked for, in order: $TERN_LIB; this checkout's build/rel (the package
    lives in python/tern, two folders below the checkout root; only when that root holds
    include/tern.h, so an installed package names no such path); an installed one
    (ctypes.util.find_library, which finds `make install`'s PREFIX/lib/libtern.so when that folder
    is in the linker's search path or ldconfig's cache)."""
    env = os.environ.get("TERN_LIB")
    if env:
        return [("TERN_LIB", env)]
    out = []
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.exists(os.path.join(root, "include", "tern.h")):   # a checkout, not a pip-installed copy
        out.append(("checkout", os.path.join(root, "build", "rel", "libtern.so")))
    found = ctypes.util.find_library("tern")
    if found:
        out.append(("installed", found))
    for prefix in ("/usr/local/lib", "/usr/lib"):
        out.append(("installed", os.path.join(prefix, "libtern.so")))
    return out


def load():
    """Open libtern.so (see _candidates) and declare its functions. Raises OSError naming every
    place tried when none opens."""
    tried = []
    for where, path in _candidates():
        if where != "TERN_LIB" and os.sep in path and not os.path.exists(path):
            tried.append("%s: %s (no such file)" % (where, path))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s (%s)" % (where, path, e))
            if where == "TERN_LIB":
                break
            continue
        for name, (res, args) in _PROTOS.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        return lib, path
    raise OSError("tern: cannot load libtern.so; tried " + "; ".join(tried) +
                  ". Build it with `make lib` in the checkout, set TERN_LIB=/path/to/libtern.so, or `make install`")
