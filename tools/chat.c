/* chat.c: `tern chat`: interactive multi-turn chat on a terminal (issue 6).
 *
 * The conversation lives in one session: each turn evaluates only its new tokens (the closing of
 * the previous reply, the user's message in the template's scaffolding, the generation prompt);
 * the reply is generated in place, so the KV cache holds it exactly as generated. Control tokens
 * are parsed only in the template's scaffolding (server/prompt.c). Ctrl-C stops the current reply
 * and keeps the session; /clear starts over; /exit or Ctrl-D quits. When the context is full the
 * reply stops with a message and the next message asks for /clear instead of crashing.
 * Thinking (<think>...</think>) is hidden by default and shown dimmed with --show-think. */
#include "cli.h"
#include "tern.h"
#include "model_opts.h"
#include "spec_opts.h"
#include "tokenizer/tok.h"
#include "../server/prompt.h"
#include "../server/util.h"

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
    tern_sampler_params sp;
    spec_opts spec;         /* --spec lookup --draft-max N */
} chat_opts;

typedef struct chat {
    chat_opts o;
    tern_model *m;
    tern_session *s;
    tern_sampler *smp;
    tern_spec *spec;        /* speculative decoding (--spec lookup) or NULL; its history = the session's tokens */
    int32_t think_open, think_close;
    bool need_close;        /* the previous reply is not closed yet (its end-of-turn text is due) */
    bool color;             /* stdout is a terminal: ANSI dim for thinking */
    int turn;
} chat;

enum { CHAT_SYSTEM = 1, CHAT_NO_THINK, CHAT_SHOW_THINK, CHAT_TEMPLATE, CHAT_N_PREDICT };
static const opt_def chat_defs[] = {
    {CHAT_SYSTEM, "-sys, --system, --system-prompt", OPT_TEXT, "TEXT", 0, 0, NULL, "system prompt"},
    {CHAT_NO_THINK, "--no-think", OPT_FLAG, NULL, 0, 0, NULL, "pre-fill the empty think block (thinking off)"},
    {CHAT_SHOW_THINK, "--show-think", OPT_FLAG, NULL, 0, 0, NULL, "show the thinking text (dimmed); hidden by default"},
    {CHAT_TEMPLATE, "--chat-template", OPT_TEXT, "NAME", 0, 0, NULL, "chatml | qwen3 | qwen35 (default: the model's, else chatml)"},
    {CHAT_N_PREDICT, "-n, --n-predict", OPT_INT, "N", -1, 1 << 24, NULL, "max tokens per reply (default 1024; -1: until the end of turn or the context)"},
};

static void usage(FILE *f, const opt_table *t, int n_t) {
    fprintf(f, "usage: tern chat -m MODEL [options]\n");
    opts_help(f, t, n_t);
    fprintf(f, "in the chat: /help lists the commands, /clear starts a new conversation, /exit (or Ctrl-D) quits,\n"
               "Ctrl-C stops a reply, //text sends a message that starts with /\n");
}

/* ---- argument parsing -------------------------------------------------------------------------- */

static int parse_args(chat_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->think = true;
    o->n_predict = 1024;   /* a model that never ends its turn cannot fill the context with one reply */
    tern_sampler_params_default(&o->sp);
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
        case CHAT_SYSTEM: o->system = v.str; break;
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
    if (spec_opts_check(&o->spec)) return 2;
    if (opts_check_chat_template("chat", o->tmpl)) return 2;
    return 0;
}

/* ---- one turn ---------------------------------------------------------------------------------- */

static void dim(const chat *c, bool on) {
    if (c->color) fputs(on ? "\x1b[2m" : "\x1b[0m", stdout);
}

/* Token ids of the user's message for this turn, appended to ids: on an empty session the whole
 * prompt (system, user, generation prompt); later the closing of the previous reply and the new
 * user turn only. */
static int build_turn(chat *c, const char *user, prompt_ids *ids, tern_err *err) {
    const bool fresh = tern_session_pos(c->s) == 0;
    tern_chat_msg msgs[2];
    int n = 0;
    if (c->o.system) msgs[n++] = (tern_chat_msg){"system", c->o.system};
    msgs[n++] = (tern_chat_msg){"user", user};
    if (fresh) return prompt_chat_append(c->m, c->o.tmpl, msgs, n, true, c->o.think, true, ids, NULL, err);

    int rc = TERN_OK;
    if (c->need_close && (rc = prompt_chat_close_assistant(c->m, c->o.tmpl, ids, err)) != TERN_OK) return rc;
    if (!c->o.system) return prompt_chat_append(c->m, c->o.tmpl, msgs, n, true, c->o.think, false, ids, NULL, err);
    /* with a system prompt: the user turn is what [system, user] adds to [system] */
    prompt_ids base = {0}, both = {0};
    rc = prompt_chat_append(c->m, c->o.tmpl, msgs, 1, false, c->o.think, false, &base, NULL, err);
    if (rc == TERN_OK) rc = prompt_chat_append(c->m, c->o.tmpl, msgs, 2, true, c->o.think, false, &both, NULL, err);
    if (rc == TERN_OK) {
        bool prefix = base.n <= both.n && memcmp(base.ids, both.ids, (size_t)base.n * sizeof *base.ids) == 0;
        if (!prefix) rc = srv_err_set(err, TERN_E_UNSUPPORTED, "chat: this template renders the system turn differently when a user turn follows");
        else rc = prompt_ids_push(ids, both.ids + base.n, both.n - base.n);
    }
    prompt_ids_free(&base);
    prompt_ids_free(&both);
    return rc;
}

/* Whether the text generated next is inside a think block: the last think tag among ids. */
static bool ends_in_think(const chat *c, const prompt_ids *ids) {
    for (int i = ids->n - 1; i >= 0; i--) {
        if (ids->ids[i] == c->think_close) return false;
        if (ids->ids[i] == c->think_open) return true;
    }
    return false;
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

/* Show one generated token (not an end-of-generation one): think tags switch the display mode. */
static void show_token(chat *c, int32_t tok, tern_detok *dt, bool *in_think, bool *shown_marker) {
    char buf[256];
    if (tok == c->think_open || tok == c->think_close) {
        int k = tern_detok_flush(dt, buf, sizeof buf);
        put_text(c, *in_think, buf, k, shown_marker);
        if (tok == c->think_close && *in_think && !c->o.show_think && *shown_marker && c->color)
            fputs("\r\x1b[K", stdout);                /* erase the [thinking...] marker */
        else if (tok == c->think_close && *in_think && c->o.show_think)
            fputs("\n", stdout);
        *in_think = tok == c->think_open;
    } else {
        int k = tern_detok_put(c->m, dt, tok, buf, sizeof buf);
        put_text(c, *in_think, buf, k, shown_marker);
    }
    opts_flush_stdout();
}

/* The reply with speculative decoding (--spec): the same stops as the plain loop in run_turn -
 * end of generation (not evaluated), -n (the last token evaluated), Ctrl-C (evaluated), full
 * context (not evaluated) - with tokens coming from tern_spec_step. Returns the reason shown, or
 * NULL. */
static const char *spec_reply(chat *c, const float *logits, tern_detok *dt, bool *in_think, bool *shown_marker,
                              double t0, double *t_first, int *n_gen) {
    tern_err err = {0};
    const int n_ctx = tern_session_n_ctx(c->s);
    if (c->o.n_predict == 0) return NULL;
    int32_t last = tern_sampler_sample(c->smp, logits);
    tern_sampler_accept(c->smp, last);
    *t_first = srv_now() - t0;
    *n_gen = 1;
    const char *why = NULL;
    bool eval_last = false;
    for (;;) {
        if (tern_token_is_eog(c->m, last)) break;
        show_token(c, last, dt, in_think, shown_marker);
        if (g_interrupt) { why = "stopped"; eval_last = true; break; }
        if (c->o.n_predict >= 0 && *n_gen >= c->o.n_predict) { eval_last = true; break; }
        if (tern_session_pos(c->s) + 1 > n_ctx) { why = "context full: type /clear to start a new conversation"; break; }
        int32_t out[TERN_SPEC_DRAFT_LIMIT + 1];
        int n_max = TERN_SPEC_DRAFT_LIMIT + 1, k = 0;
        if (c->o.n_predict >= 0 && c->o.n_predict - *n_gen < n_max) n_max = c->o.n_predict - *n_gen;
        if (tern_spec_step(c->spec, c->s, c->smp, last, n_max, out, &k, &err) != TERN_OK) break;
        for (int i = 0; i + 1 < k; i++) show_token(c, out[i], dt, in_think, shown_marker);   /* EOG only last */
        *n_gen += k;
        last = out[k - 1];
    }
    if (eval_last && !err.code) {
        if (tern_session_eval(c->s, &last, 1, &err)) tern_spec_add(c->spec, &last, 1, &err);
    }
    if (err.code) {
        fprintf(stderr, "\ntern chat: %s\n", err.msg);
        tern_session_reset(c->s);
        tern_spec_reset(c->spec);
        c->need_close = false;
    }
    return why;
}

static void run_turn(chat *c, const char *user) {
    tern_err err = {0};
    prompt_ids ids = {0};
    c->turn++;
    if (build_turn(c, user, &ids, &err) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        prompt_ids_free(&ids);
        return;
    }
    const int n_ctx = tern_session_n_ctx(c->s), pos0 = tern_session_pos(c->s);
    /* A refused message is no turn: the next one gets this turn's number. A message that does not
     * fit even in an empty context (ids.n: its tokens in the template, plus one for the reply) is
     * too long for -c, and /clear would not help: say so with both numbers. */
    if (ids.n + 1 > n_ctx) {
        fprintf(stderr, "\n[this message is too long for the context (-c %d): it needs %d tokens (%s in the chat "
                        "template, plus one for the reply); start tern chat with -c %d or more, or send a shorter "
                        "message.]\n", n_ctx, ids.n + 1,
                pos0 == 0 && c->o.system ? "the system prompt and the message" : "the message", ids.n + 1);
        prompt_ids_free(&ids);
        c->turn--;
        return;
    }
    if (pos0 + ids.n + 1 > n_ctx) {
        fprintf(stderr, "\n[context full: %d of %d tokens used and this message needs %d more. "
                        "Type /clear to start a new conversation.]\n", pos0, n_ctx, ids.n + 1);
        prompt_ids_free(&ids);
        c->turn--;
        return;
    }
    g_interrupt = 0;
    const double t0 = srv_now();
    const float *logits = tern_session_eval(c->s, ids.ids, ids.n, &err);
    if (!logits) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        /* nothing was appended on a range error; anything else leaves an unknown state */
        if (err.code != TERN_E_RANGE) {
            tern_session_reset(c->s);
            tern_spec_reset(c->spec);
            c->need_close = false;
        }
        prompt_ids_free(&ids);
        return;
    }
    const double t_prompt = srv_now() - t0;
    for (int i = 0; i < ids.n; i++) tern_sampler_accept(c->smp, ids.ids[i]);
    if (c->spec && tern_spec_add(c->spec, ids.ids, ids.n, &err) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", err.msg);
        tern_session_reset(c->s);
        tern_spec_reset(c->spec);
        c->need_close = false;
        prompt_ids_free(&ids);
        return;
    }
    tern_spec_reset_stats(c->spec);
    c->need_close = true;
    bool in_think = ends_in_think(c, &ids), shown_marker = false;
    const int n_prompt = ids.n;
    prompt_ids_free(&ids);

    tern_detok dt;
    tern_detok_init(&dt);
    char buf[256];
    double t_first = 0;
    int n_gen = 0;
    const char *why = NULL;
    if (c->spec) why = spec_reply(c, logits, &dt, &in_think, &shown_marker, t0, &t_first, &n_gen);
    for (; !c->spec;) {
        if (g_interrupt) { why = "stopped"; break; }
        if (c->o.n_predict >= 0 && n_gen >= c->o.n_predict) break;
        const int32_t tok = tern_sampler_sample(c->smp, logits);
        if (n_gen == 0) t_first = srv_now() - t0;
        n_gen++;
        if (tern_token_is_eog(c->m, tok)) break;
        show_token(c, tok, &dt, &in_think, &shown_marker);
        if (tern_session_pos(c->s) + 1 > n_ctx) { why = "context full: type /clear to start a new conversation"; break; }
        logits = tern_session_eval(c->s, &tok, 1, &err);
        if (!logits) {
            fprintf(stderr, "\ntern chat: %s\n", err.msg);
            tern_session_reset(c->s);
            c->need_close = false;
            break;
        }
        tern_sampler_accept(c->smp, tok);
    }
    int k = tern_detok_flush(&dt, buf, sizeof buf);
    put_text(c, in_think, buf, k, &shown_marker);
    printf("\n");
    opts_flush_stdout();
    /* a note on how the reply ended goes to stderr (stdout holds only the replies and the answers
     * to /commands: a piped transcript stays clean) */
    if (why) fprintf(stderr, "%s[%s]%s\n", c->color ? "\x1b[2m" : "", why, c->color ? "\x1b[0m" : "");
    const double t_all = srv_now() - t0;
    const double t_gen = t_all - t_first;
    fprintf(stderr, "%s[turn %d: %d new prompt tokens in %.3f s (%.1f t/s), time to first token %.3f s, "
                    "%d tokens at %.1f t/s, context %d/%d]%s\n",
            c->color ? "\x1b[2m" : "", c->turn, n_prompt, t_prompt, t_prompt > 0 ? n_prompt / t_prompt : 0.0,
            t_first, n_gen, n_gen > 1 && t_gen > 0 ? (n_gen - 1) / t_gen : 0.0,
            tern_session_pos(c->s), n_ctx, c->color ? "\x1b[0m" : "");
    if (c->spec) {
        tern_spec_stats st;
        tern_spec_get_stats(c->spec, &st);
        if (c->color) fputs("\x1b[2m", stderr);
        spec_opts_print_stats(stderr, &st, 0);
        if (c->color) fputs("\x1b[0m", stderr);
    }
}

int cmd_chat(int argc, char **argv) {
    chat c;
    memset(&c, 0, sizeof c);
    int rc = parse_args(&c.o, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;

    tern_err err = {0};
    if (opts_load(&c.o.oc, &c.m, &c.s, &err) != TERN_OK) goto fail;
    if (c.o.sp.repeat_last_n < 0) c.o.sp.repeat_last_n = tern_session_n_ctx(c.s);
    if (tern_sampler_init(&c.smp, c.m, &c.o.sp, &err) != TERN_OK) goto fail;
    if (c.o.spec.on && tern_spec_init(&c.spec, c.m, &c.o.spec.p, &err) != TERN_OK) goto fail;
    opts_note_chat_template("chat", c.m, c.o.tmpl);
    {   /* fail early on an unknown template name, before the user types anything */
        tern_chat_msg probe = {"user", "hi"};
        prompt_ids p = {0};
        rc = prompt_chat_append(c.m, c.o.tmpl, &probe, 1, true, c.o.think, true, &p, NULL, &err);
        prompt_ids_free(&p);
        if (rc != TERN_OK) goto fail;
    }
    c.think_open = prompt_special_id(c.m, "<think>");
    c.think_close = prompt_special_id(c.m, "</think>");
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
    fprintf(stderr, "tern chat: %s (%s), context %d, seed %llu. /clear new conversation, /exit quits, "
                    "Ctrl-C stops a reply.\n",
            info.name && *info.name ? info.name : c.o.oc.model, info.arch, tern_session_n_ctx(c.s),
            (unsigned long long)tern_sampler_seed(c.smp));

    char *line = NULL;
    size_t line_cap = 0;
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
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        const size_t nul = strlen(line), ok = tok_utf8_valid_len(line, (size_t)n);
        if (nul != (size_t)n || ok != (size_t)n) {
            /* not UTF-8 text (or a NUL byte): sent with U+FFFD for each invalid sequence */
            const size_t bad = nul < ok ? nul : ok;
            if (bad == nul)   /* U+0000 is valid UTF-8, but a C string (and the tokenizer) ends at it */
                fprintf(stderr, "tern chat: your message has a NUL byte at offset %zu (no text holds one: it would end the "
                        "message there); it was replaced by U+FFFD, as any invalid bytes\n", bad);
            else
                fprintf(stderr, "tern chat: your message is not valid UTF-8 (first bad byte 0x%02x at offset %zu); "
                        "invalid bytes were replaced by U+FFFD\n", (unsigned)(unsigned char)line[bad], bad);
            for (ssize_t k = 0; k < n; k++)
                if (!line[k]) line[k] = (char)0xFF;               /* a NUL byte is no text either */
            char *fixed = malloc(3 * (size_t)n + 1);
            if (!fixed) { fprintf(stderr, "tern chat: out of memory\n"); continue; }
            tok_utf8_repair(line, (size_t)n, fixed);
            free(line);
            line = fixed;
            line_cap = 3 * (size_t)n + 1;
        }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
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
            printf("/help lists these commands, /clear starts a new conversation, /exit or /quit (or Ctrl-D) quits, "
                   "Ctrl-C stops a reply; start a message with // to send a text that begins with /\n");
            continue;
        }
        if (line[0] == '/' && line[1] == '/') {           /* escaped: the text "/..." */
            run_turn(&c, line + 1);
            continue;
        }
        if (line[0] == '/' && isalpha((unsigned char)line[1])) {   /* a command we do not know: never sent */
            const size_t w = strcspn(line, " \t");
            printf("unknown command %.*s; try /help\n", (int)(w > 64 ? 64 : w), line);
            continue;
        }
        run_turn(&c, line);
    }
    free(line);
    tern_sampler_free(c.smp);
    tern_spec_free(c.spec);
    tern_session_free(c.s);
    tern_model_free(c.m);
    return 0;
fail:
    fprintf(stderr, "tern chat: %s\n", err.msg);
    tern_sampler_free(c.smp);
    tern_spec_free(c.spec);
    tern_session_free(c.s);
    tern_model_free(c.m);
    return 1;
}
