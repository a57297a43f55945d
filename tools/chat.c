/* chat.c: `tern chat`: interactive multi-turn chat on a terminal.
 *
 * The conversation lives in one session: each turn evaluates only its new tokens (the closing of
 * the previous reply, the user's message in the template's scaffolding, the generation prompt);
 * the reply is generated in place, so the KV cache holds it exactly as generated. Control tokens
 * are parsed only in the template's scaffolding (tern_chat_tokenize). Ctrl-C stops the current reply
 * and keeps the session; /clear starts over; /exit or Ctrl-D quits. When the context is full the
 * reply stops with a message and the next message asks for /clear instead of crashing.
 * Thinking (<think>...</think>) is hidden by default and shown dimmed with --show-think. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "spec_opts.h"
#include "tokenizer/tok.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupt;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupt = 1;
#ifdef _WIN32
    signal(SIGINT, on_sigint);   /* the Windows CRT resets the handler to SIG_DFL at each delivery */
#endif
}

#ifdef _WIN32
/* The Windows CRT has no getline: the same contract over fgets (the line with its '\n' in a
 * growing *line, its length; -1 at end of file or on an error, as fgets says). */
static ssize_t chat_getline(char **line, size_t *cap, FILE *f) {
    size_t n = 0;
    for (;;) {
        if (!*line || *cap - n < 2) {
            const size_t nc = *cap ? 2 * *cap : 256;
            char *nl = realloc(*line, nc);
            if (!nl) return -1;
            *line = nl;
            *cap = nc;
        }
        if (!fgets(*line + n, (int)(*cap - n > 1u << 30 ? 1u << 30 : *cap - n), f)) return n ? (ssize_t)n : -1;
        n += strlen(*line + n);
        if (n && (*line)[n - 1] == '\n') return (ssize_t)n;
    }
}
#define getline chat_getline
#endif

typedef struct chat_opts {
    opts_common oc;         /* -m, -c, -t, -b, --numerics, --mmap, ... (model_opts.h) */
    const char *system, *tmpl;
    bool think, show_think;
    int n_predict;
    opts_sampling sp;       /* --temp ... -l (model_opts.h) */
    spec_opts spec;         /* --spec lookup --draft-max N */
} chat_opts;

typedef struct chat {
    chat_opts o;
    tern_model *m;
    tern_session *s;
    tern_sampler *smp;
    tern_spec *spec;        /* speculative decoding (--spec lookup) or NULL; its history = the session's tokens */
    tern_gen *gen;          /* the reply loop */
    bool need_close;        /* the previous reply is not closed yet (its end-of-turn text is due) */
    bool color;             /* stdout is a terminal: ANSI dim for thinking */
    bool bad_logits;        /* a reply met non-finite logits (damaged weights): chat ends, exit 1 */
    int turn;
    int n_sent, n_unanswered; /* messages sent to the model, and those of them that got no reply (refused, or an error) */
    char *sys_fixed;        /* -sys with its invalid UTF-8 replaced by U+FFFD (o.system points here), or NULL */
} chat;

enum { CHAT_SYSTEM = 1, CHAT_NO_THINK, CHAT_SHOW_THINK, CHAT_TEMPLATE, CHAT_N_PREDICT };
static const opt_def chat_defs[] = {
    {CHAT_SYSTEM, "-sys, --system, --system-prompt", OPT_TEXT, "TEXT", 0, 0, NULL, "system prompt (\"\": none)"},
    {CHAT_NO_THINK, "--no-think", OPT_FLAG, NULL, 0, 0, NULL, "pre-fill the empty think block (thinking off)"},
    {CHAT_SHOW_THINK, "--show-think", OPT_FLAG, NULL, 0, 0, NULL, "show the thinking text (dimmed); hidden by default"},
    {CHAT_TEMPLATE, "--chat-template", OPT_TEXT, "NAME", 0, 0, NULL, "chatml | qwen3 | qwen35 (default: the model's, else chatml)"},
    {CHAT_N_PREDICT, "-n, --n-predict", OPT_INT, "N", -1, 1 << 24, NULL, "max tokens per reply (default 1024; -1: until the end of turn or the context)"},
};

static void usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern chat -m MODEL [options]\n");
    opts_help(f, t, n_t);
    fprintf(f, "in the chat: /help lists the commands, /clear starts a new conversation, /exit, /quit or /bye (or Ctrl-D)\n"
               "quits, Ctrl-C stops a reply, //text sends a message that starts with /\n");
}

/* ---- argument parsing -------------------------------------------------------------------------- */

static int parse_args(chat_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->think = true;
    o->n_predict = 1024;   /* a model that never ends its turn cannot fill the context with one reply */
    opts_sampling_default(&o->sp);
    spec_opts_default(&o->spec);
    opts_common *oc = &o->oc;
    opts_common_default(oc);
    const opt_table tabs[] = {opts_tab_model, OPT_TABLE(chat_defs), opts_tab_ctx, opts_tab_threads, opts_tab_load,
                              opts_tab_sampling, spec_opts_tab};
    const int n_tabs = (int)(sizeof tabs / sizeof tabs[0]);
    for (int i = 1; i < argc; i++) {
        opt_val v;
        const int id = opts_next("chat", tabs, n_tabs, argc, argv, &i, &v);
        if (id == OPT_HELP) { usage(stdout, tabs, n_tabs); return 1; }
        if (id == OPT_ERR) return 2;
        if (id == OPT_POSITIONAL) return opts_unexpected("chat", v.str);
        if (opts_apply_common(oc, id, &v) || opts_apply_sampling(&o->sp, id, &v) || spec_opts_apply(&o->spec, id, &v))
            continue;
        switch (id) {
        case CHAT_SYSTEM: o->system = *v.str ? v.str : NULL; break;   /* "" is none, as llama.cpp's -sys "" */
        case CHAT_NO_THINK: o->think = false; break;
        case CHAT_SHOW_THINK: o->show_think = true; break;
        case CHAT_TEMPLATE: o->tmpl = v.str; break;
        case CHAT_N_PREDICT: o->n_predict = (int)v.i; break;
        default: break;
        }
    }
    if (!oc->model) {
        fprintf(stderr, "tern chat: -m MODEL is required; see tern chat --help\n");
        return 2;
    }
    if (!o->think && o->show_think) {
        fprintf(stderr, "tern chat: --show-think with --no-think: thinking is off, so there is nothing to show; "
                        "give one of them\n");
        return 2;
    }
    if (spec_opts_check(&o->spec) || !opts_sampling_check(&o->sp)) return 2;
    if (opts_check_chat_template("chat", o->tmpl)) return 2;
    return 0;
}

/* ---- one turn ---------------------------------------------------------------------------------- */

static void dim(const chat *c, bool on) {
    if (c->color) fputs(on ? "\x1b[2m" : "\x1b[0m", stdout);
}

/* A growable array of token ids. */
typedef struct chat_ids {
    int32_t *ids;
    int n, cap;
} chat_ids;

static void ids_free(chat_ids *p) {
    free(p->ids);
    *p = (chat_ids){0};
}

/* Fill err with code and a message; returns code. */
static int chat_fail(tern_err *err, int code, const char *msg) {
    err->code = code;
    snprintf(err->msg, sizeof err->msg, "chat: %s", msg);
    return code;
}

static int ids_reserve(chat_ids *p, int extra, tern_err *err) {
    if (extra < 0 || p->n > (1 << 28) - extra) return chat_fail(err, TERN_E_RANGE, "too many tokens");
    if (p->n + extra <= p->cap) return TERN_OK;
    const int cap = p->n + extra + 256;
    int32_t *q = realloc(p->ids, (size_t)cap * sizeof *q);
    if (!q) return chat_fail(err, TERN_E_NOMEM, "out of memory");
    p->ids = q;
    p->cap = cap;
    return TERN_OK;
}

/* Append the ids of msgs in the chat template (tern_chat_tokenize: control tokens parsed only in
 * the scaffolding). */
static int chat_append(const chat *c, const tern_chat_msg *msgs, int n, bool gen, bool bos, chat_ids *out,
                       tern_err *err) {
    int need = 0;
    int rc = tern_chat_tokenize(c->m, c->o.tmpl, msgs, n, gen, c->o.think, bos, NULL, 0, &need, err);
    if (rc != TERN_OK && rc != TERN_E_RANGE) return rc;
    *err = (tern_err){0};
    if ((rc = ids_reserve(out, need, err)) != TERN_OK) return rc;
    rc = tern_chat_tokenize(c->m, c->o.tmpl, msgs, n, gen, c->o.think, bos, out->ids + out->n, need, &need, err);
    if (rc == TERN_OK) out->n += need;
    return rc;
}

/* Append the ids of the text the template puts after an assistant message's content to close
 * the turn (ChatML: "<|im_end|>\n"): the reply was generated in place, so the next turn starts
 * with its closing. That text is scaffolding only: control tokens parsed. */
static int chat_close_reply(const chat *c, chat_ids *out, tern_err *err) {
    static const char mark[] = "TERNCLOSEMARKER7f3aZ";
    const tern_chat_msg msgs[2] = {{"user", "hi"}, {"assistant", mark}};
    char buf[1024];
    size_t len = 0;
    int rc = tern_chat_apply(c->m, c->o.tmpl, msgs, 2, false, true, buf, sizeof buf, &len, err);
    if (rc != TERN_OK) return rc;
    const char *hit = strstr(buf, mark);
    if (!hit) return chat_fail(err, TERN_E_FORMAT, "the chat template dropped the assistant message");
    const char *tail = hit + sizeof mark - 1;
    const size_t n_tail = len - (size_t)(tail - buf);
    if ((rc = ids_reserve(out, (int)n_tail + 8, err)) != TERN_OK) return rc;
    int n = 0;
    rc = tern_tokenize(c->m, tail, n_tail, false, true, out->ids + out->n, (int)n_tail + 8, &n, err);
    if (rc == TERN_OK) out->n += n;
    return rc;
}

/* Token ids of the user's message for this turn, appended to ids: as the first turn (fresh) the
 * whole prompt (system, user, generation prompt); later the closing of the previous reply and the
 * new user turn only. */
static int build_turn(chat *c, const char *user, bool fresh, chat_ids *ids, tern_err *err) {
    tern_chat_msg msgs[2];
    int n = 0;
    if (c->o.system) msgs[n++] = (tern_chat_msg){"system", c->o.system};
    msgs[n++] = (tern_chat_msg){"user", user};
    if (fresh) return chat_append(c, msgs, n, true, true, ids, err);

    int rc = TERN_OK;
    if (c->need_close && (rc = chat_close_reply(c, ids, err)) != TERN_OK) return rc;
    if (!c->o.system) return chat_append(c, msgs, n, true, false, ids, err);
    /* with a system prompt: the user turn is what [system, user] adds to [system] */
    chat_ids base = {0}, both = {0};
    rc = chat_append(c, msgs, 1, false, false, &base, err);
    if (rc == TERN_OK) rc = chat_append(c, msgs, 2, true, false, &both, err);
    if (rc == TERN_OK) {
        const bool prefix = base.n <= both.n && memcmp(base.ids, both.ids, (size_t)base.n * sizeof *base.ids) == 0;
        if (!prefix)
            rc = chat_fail(err, TERN_E_UNSUPPORTED, "this template renders the system turn differently when a user turn follows");
        else if ((rc = ids_reserve(ids, both.n - base.n, err)) == TERN_OK) {
            memcpy(ids->ids + ids->n, both.ids + base.n, (size_t)(both.n - base.n) * sizeof *ids->ids);
            ids->n += both.n - base.n;
        }
    }
    ids_free(&base);
    ids_free(&both);
    return rc;
}

static void put_text(chat *c, bool in_think, const char *buf, int n, bool *shown_marker) {
    if (n <= 0) return;
    if (!in_think) { fwrite(buf, 1, (size_t)n, stdout); return; }
    if (c->o.show_think) {
        dim(c, true);
        fwrite(buf, 1, (size_t)n, stdout);
        dim(c, false);
    } else if (!*shown_marker) {
        dim(c, true);
        fputs("[thinking...]", stdout);
        dim(c, false);
        *shown_marker = true;
    }
}

typedef struct chat_reply {
    chat *c;
    bool shown_marker;      /* "[thinking...]" is on the screen */
} chat_reply;

/* Show one event of the reply (tern_gen's on_token): think tags switch the display mode; Ctrl-C
 * stops the reply (the token just shown stays in the conversation: eval_last). */
static int show_token(void *user, const tern_gen_token *t) {
    chat_reply *r = user;
    chat *c = r->c;
    put_text(c, t->in_think, t->text, t->n_text, &r->shown_marker);
    if (t->think < 0 && t->in_think && !c->o.show_think && r->shown_marker && c->color)
        fputs("\r\x1b[K", stdout);                   /* erase the [thinking...] marker */
    else if (t->think < 0 && t->in_think && c->o.show_think)
        fputs("\n", stdout);
    if (t->id >= 0) opts_flush_stdout();
    return g_interrupt != 0;
}

/* The session could be in any state after a failed forward: start the conversation over. */
static void chat_drop(chat *c) {
    tern_session_reset(c->s);
    tern_spec_reset(c->spec);
    c->need_close = false;
}

static void run_turn(chat *c, const char *user) {
    tern_err err = {0};
    chat_ids ids = {0};
    c->turn++;
    c->n_sent++;
    c->n_unanswered++;                                 /* until a reply is written */
    if (build_turn(c, user, tern_session_pos(c->s) == 0, &ids, &err) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        ids_free(&ids);
        return;
    }
    const int n_ctx = tern_session_n_ctx(c->s), pos0 = tern_session_pos(c->s);
    /* A refused message is no turn: the next one gets this turn's number. A message that does not
     * fit even in an empty context (its tokens as the first turn, system prompt included, plus one
     * for the reply) is too long for -c, and /clear would not help: say so with both numbers. */
    int need = ids.n + 1;
    if (pos0 > 0) {                                   /* ids holds the previous reply's close, no system turn */
        chat_ids first = {0};
        tern_err e2 = {0};
        if (build_turn(c, user, true, &first, &e2) == TERN_OK) need = first.n + 1;
        ids_free(&first);
    }
    if (need > n_ctx) {
        char advice[192];                             /* -c takes at most 2^24 (model_opts.c) */
        tern_model_info mi;
        tern_model_get_info(c->m, &mi);
        if (need <= (1 << 24) && mi.n_ctx_train > 0 && need > mi.n_ctx_train)
            snprintf(advice, sizeof advice, "start tern chat with -c %d or more (past the model's trained context of %d "
                     "tokens, where text may degrade), or ", need, mi.n_ctx_train);
        else if (need <= (1 << 24)) snprintf(advice, sizeof advice, "start tern chat with -c %d or more, or ", need);
        else snprintf(advice, sizeof advice, "more than the largest -c (%d): ", 1 << 24);
        fprintf(stderr, "\n[this message is too long for the context (-c %d): it needs %d tokens (%s in the chat "
                        "template, plus one for the reply); %ssend a shorter message.]\n", n_ctx, need,
                c->o.system ? "the system prompt and the message" : "the message", advice);
        ids_free(&ids);
        c->turn--;
        return;
    }
    if (pos0 + ids.n + 1 > n_ctx) {
        fprintf(stderr, "\n[context full: %d of %d tokens used and this message needs %d more. "
                        "Type /clear to start a new conversation.]\n", pos0, n_ctx, ids.n + 1);
        ids_free(&ids);
        c->turn--;
        return;
    }
    /* g_interrupt is not cleared here: the loop clears it before reading the line, so a Ctrl-C
     * typed after Enter (while the message is tokenized or its prompt evaluated) stops the reply
     * at its first token instead of being lost */
    chat_reply r = {.c = c};
    tern_gen_params gp;
    tern_gen_params_default(&gp);
    gp.n_predict = c->o.n_predict;
    gp.split_think = true;
    gp.eval_last = true;
    gp.on_token = show_token;
    gp.user = &r;
    tern_gen_begin(c->gen, c->s, c->smp, c->spec, &gp);
    const float *logits = tern_gen_prompt(c->gen, ids.ids, ids.n, &err);
    ids_free(&ids);
    if (!logits) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        /* nothing was appended on a range error; anything else leaves an unknown state */
        if (err.code != TERN_E_RANGE) chat_drop(c);
        return;
    }
    tern_spec_reset_stats(c->spec);
    c->need_close = true;
    const tern_stop stop = tern_gen_run(c->gen, logits, &err);
    printf("\n");
    opts_flush_stdout();
    if (stop == TERN_STOP_ERROR) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        chat_drop(c);
    } else {
        c->n_unanswered--;
    }
    /* a note on how the reply ended goes to stderr (stdout holds only the replies and the answers
     * to /commands: a piped transcript stays clean) */
    const char *why = stop == TERN_STOP_CALLER ? "stopped"
                    : stop == TERN_STOP_CTX    ? "context full: type /clear to start a new conversation"
                                               : NULL;
    if (why) fprintf(stderr, "%s[%s]%s\n", c->color ? "\x1b[2m" : "", why, c->color ? "\x1b[0m" : "");
    tern_gen_stats st;
    tern_gen_get_stats(c->gen, &st);
    tern_model_info mi;
    tern_model_get_info(c->m, &mi);
    c->bad_logits = opts_warn_bad_logits("chat", c->gen, "chat ends with status 1");
    const double t_gen = st.t_gen_s;
    fprintf(stderr, "%s[turn %d: %d new prompt token%s in %.3f s (%.1f t/s), time to first token %.3f s, "
                    "%d token%s at %.1f t/s, context %d/%d]%s\n",
            c->color ? "\x1b[2m" : "", c->turn, st.n_prompt, st.n_prompt == 1 ? "" : "s", st.t_prompt_s,
            st.t_prompt_s > 0 ? st.n_prompt / st.t_prompt_s : 0.0, st.t_first_s, st.n_gen, st.n_gen == 1 ? "" : "s",
            st.n_gen > 1 && t_gen > 0 ? (st.n_gen - 1) / t_gen : 0.0, tern_session_pos(c->s), n_ctx,
            c->color ? "\x1b[0m" : "");
    if (c->spec) {
        tern_spec_stats sst;
        tern_spec_get_stats(c->spec, &sst);
        if (c->color) fputs("\x1b[2m", stderr);
        spec_opts_print_stats(stderr, &sst, 0);
        if (c->color) fputs("\x1b[0m", stderr);
    }
}

/* The bytes of s[0..n) that belong to no valid UTF-8 sequence: those tok_utf8_repair replaces. */
static size_t utf8_bad_bytes(const char *s, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        i += tern_utf8_valid_len(s + i, n - i);       /* the valid run, then one bad byte */
        if (i < n) bad++, i++;
    }
    return bad;
}

int cmd_chat(int argc, char **argv) {
    chat c;
    memset(&c, 0, sizeof c);
    int rc = parse_args(&c.o, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    if (c.o.system) {   /* as a typed message: invalid bytes become U+FFFD, with a note */
        const size_t n = strlen(c.o.system), ok = tern_utf8_valid_len(c.o.system, n);
        if (ok != n) {
            const size_t bad = utf8_bad_bytes(c.o.system, n);
            fprintf(stderr, "tern chat: the system prompt (-sys) is not valid UTF-8 (first bad byte 0x%02x at offset %zu "
                            "of %zu); %zu of its %zu bytes %s replaced by U+FFFD\n",
                    (unsigned)(unsigned char)c.o.system[ok], ok, n, bad, n, bad == 1 ? "was" : "were");
            if (!(c.sys_fixed = malloc(3 * n + 1))) {
                fprintf(stderr, "tern chat: out of memory\n");
                return 1;
            }
            tok_utf8_repair(c.o.system, n, c.sys_fixed);
            c.o.system = c.sys_fixed;
        }
    }

    tern_err err = {0};
    if (opts_load(&c.o.oc, &c.m, &c.s, &err) != TERN_OK) goto fail;
    if (opts_bias_check(&c.o.sp, c.m, &err) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        tern_session_free(c.s);
        tern_model_free(c.m);
        free(c.sys_fixed);
        return 2;   /* a usage error found after the load */
    }
    if (opts_sampler_init(&c.o.sp, c.m, c.s, &c.smp, &err) != TERN_OK) goto fail;
    if (c.o.spec.on && tern_spec_init(&c.spec, c.m, &c.o.spec.p, &err) != TERN_OK) goto fail;
    if (tern_gen_init(&c.gen, c.m, &err) != TERN_OK) goto fail;
    opts_note_chat_template("chat", c.m, c.o.tmpl);
    {   /* fail early on an unknown template name, before the user types anything */
        tern_chat_msg probe = {"user", "hi"};
        chat_ids p = {0};
        rc = chat_append(&c, &probe, 1, true, true, &p, &err);
        ids_free(&p);
        if (rc != TERN_OK) goto fail;
    }
    c.color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    const bool interactive = isatty(STDIN_FILENO);

#ifdef _WIN32
    signal(SIGINT, on_sigint);                            /* Ctrl-C: the console's CTRL_C_EVENT */
#else
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;                                      /* no SA_RESTART: interrupt getline */
    sigaction(SIGINT, &sa, NULL);
#endif

    tern_model_info info;
    tern_model_get_info(c.m, &info);
    const char *name = info.name && *info.name ? info.name : c.o.oc.model;
    const bool show_arch = info.arch && *info.arch && strcmp(name, info.arch) != 0;   /* not "llama (llama)" */
    fprintf(stderr, "tern chat: %s%s%s%s, %s, %d thread%s, context %d, seed %llu. /clear new conversation, /exit "
                    "quits, Ctrl-C stops a reply.\n",
            name, show_arch ? " (" : "", show_arch ? info.arch : "", show_arch ? ")" : "", info.isa, info.n_threads,
            info.n_threads == 1 ? "" : "s", tern_session_n_ctx(c.s), (unsigned long long)tern_sampler_seed(c.smp));

    char *line = NULL;
    size_t line_cap = 0;
    long line_no = 0;                                     /* of stdin, for the notes */
    for (;;) {
        if (interactive) {
            fputs(c.color ? "\x1b[1m> \x1b[0m" : "> ", stdout);
            opts_flush_stdout();
        }
        g_interrupt = 0;
        errno = 0;
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n < 0) {
            if (errno == EINTR || g_interrupt) {          /* Ctrl-C at the prompt */
                clearerr(stdin);
                fputs("\n(/exit or Ctrl-D to quit)\n", stdout);
                continue;
            }
            if (interactive) fputs("\n", stdout);
            break;                                         /* EOF */
        }
        line_no++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        ssize_t blank = 0;                                 /* an empty or all-blank line is no message */
        while (blank < n && (line[blank] == ' ' || line[blank] == '\t')) blank++;
        if (blank == n) continue;
        const size_t nul = strlen(line), ok = tern_utf8_valid_len(line, (size_t)n);
        if (nul != (size_t)n || ok != (size_t)n) {
            /* not UTF-8 text (or a NUL byte): sent with U+FFFD for each invalid sequence */
            const size_t bad = nul < ok ? nul : ok;
            const unsigned first = (unsigned)(unsigned char)line[bad];
            for (ssize_t k = 0; k < n; k++)
                if (!line[k]) line[k] = (char)0xFF;               /* a NUL byte is no text either */
            const size_t n_bad = utf8_bad_bytes(line, (size_t)n);
            if (bad == nul)   /* U+0000 is valid UTF-8, but a C string (and the tokenizer) ends at it */
                fprintf(stderr, "tern chat: your message (line %ld of stdin) has a NUL byte at offset %zu of %zd (no text "
                        "holds one: it would end the message there); %zu of its %zd bytes %s replaced by U+FFFD (NUL and "
                        "invalid bytes)\n", line_no, bad, n, n_bad, n, n_bad == 1 ? "was" : "were");
            else
                fprintf(stderr, "tern chat: your message (line %ld of stdin) is not valid UTF-8 (first bad byte 0x%02x at "
                        "offset %zu of %zd); %zu of its %zd bytes %s replaced by U+FFFD\n", line_no, first, bad, n, n_bad, n,
                        n_bad == 1 ? "was" : "were");
            char *fixed = malloc(3 * (size_t)n + 1);
            if (!fixed) { fprintf(stderr, "tern chat: out of memory\n"); continue; }
            tok_utf8_repair(line, (size_t)n, fixed);
            free(line);
            line = fixed;
            line_cap = 3 * (size_t)n + 1;
        }
        if (line[0] == '/' && line[1] != '/') {   /* a command: "/exit " is /exit (trailing blanks are no argument) */
            size_t ln = strlen(line);
            while (ln > 1 && (line[ln - 1] == ' ' || line[ln - 1] == '\t')) line[--ln] = '\0';
        }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit") || !strcmp(line, "/bye")) break;   /* /bye: Ollama's */
        if (!strcmp(line, "/clear")) {
            tern_session_reset(c.s);
            tern_spec_reset(c.spec);
            tern_sampler_reset(c.smp);
            c.need_close = false;
            c.turn = 0;
            printf("[new conversation]\n");
            continue;
        }
        if (!strcmp(line, "/help")) {
            printf("/help lists these commands, /clear starts a new conversation, /exit, /quit or /bye (or Ctrl-D) quits, "
                   "Ctrl-C stops a reply; start a message with // to send a text that begins with /\n");
            continue;
        }
        if (line[0] == '/' && line[1] == '/') {           /* escaped: the text "/..." */
            run_turn(&c, line + 1);
            continue;
        }
        if (line[0] == '/' && isalpha((unsigned char)line[1])) {   /* a command we do not know: never sent */
            /* the word as typed, its first 64 bytes (a UTF-8 character is never cut: the line is
             * valid UTF-8 by now), control bytes as \xNN so that none reaches the terminal */
            size_t w = strcspn(line, " \t");
            if (w > 64) {
                w = 64;
                while (w > 0 && ((unsigned char)line[w] & 0xc0) == 0x80) w--;
            }
            fputs("unknown command ", stdout);
            for (size_t k = 0; k < w; k++) {
                const unsigned char b = (unsigned char)line[k];
                if (b < 0x20 || b == 0x7f) printf("\\x%02x", b);
                else putchar(b);
            }
            fputs("; try /help\n", stdout);
            continue;
        }
        run_turn(&c, line);
        if (c.bad_logits) break;
    }
    free(line);
    tern_sampler_free(c.smp);
    tern_spec_free(c.spec);
    tern_gen_free(c.gen);
    tern_session_free(c.s);
    tern_model_free(c.m);
    free(c.sys_fixed);
    /* From a pipe or a file, a message without a reply fails the run, as a script expects; on a
     * terminal the user saw each note and went on. */
    if (!interactive && c.n_unanswered && !c.bad_logits)
        fprintf(stderr, "tern chat: %d of %d message%s got no reply (the notes above say why); exit status 1\n",
                c.n_unanswered, c.n_sent, c.n_sent == 1 ? "" : "s");
    return c.bad_logits || (!interactive && c.n_unanswered) ? 1 : 0;
fail:
    fprintf(stderr, "tern chat: %s\n", err.msg);
    tern_sampler_free(c.smp);
    tern_spec_free(c.spec);
    tern_gen_free(c.gen);
    tern_session_free(c.s);
    tern_model_free(c.m);
    free(c.sys_fixed);
    return 1;
}
