/* reply.h: turns a stream of generated text into what an OpenAI client sees: reasoning (inside
 * <think>...</think>) apart from content, stop strings found across token boundaries with the
 * text that could start one held back (never emitted), and tool calls (<tool_call> blocks,
 * Qwen3.5 <function=NAME><parameter=P> markup or Qwen3 JSON) parsed at the end.
 * Pure string processing: no model, no threads. */
#ifndef TERN_SERVER_REPLY_H
#define TERN_SERVER_REPLY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;
/* Append n bytes (keeps a NUL after them); false on allocation failure. */
bool sbuf_add(sbuf *b, const char *s, size_t n);
void sbuf_free(sbuf *b);

/* One add's worth of text (one generated token's text): where it ends in its channel, and the
 * generated-token count when it was added (for per-token stream chunks and their logprobs). */
typedef struct reply_piece {
    size_t end;
    int tok_end;
    bool think;
} reply_piece;

typedef struct srv_reply {
    /* configuration (borrowed) */
    char *const *stop;      /* stop strings (non-empty), matched in the content */
    int n_stop;
    bool tools;             /* the request has tools: content ends at "<tool_call>" */
    /* state */
    sbuf content, reasoning;
    size_t content_sent, reasoning_sent;   /* bytes already handed out by reply_take */
    size_t content_end;     /* content visible to the client ends here (stop or tool call) */
    bool stopped;           /* a stop string matched: generation must end */
    bool tool_started;      /* "<tool_call>" seen: later text is tool markup */
    size_t tool_pos;        /* start of the tool markup in content */
    reply_piece *pieces;    /* every add, in order */
    int n_pieces, cap_pieces, piece_next;   /* piece_next: the first piece not wholly handed out */
} srv_reply;

void reply_init(srv_reply *r, char *const *stop, int n_stop, bool tools);
void reply_free(srv_reply *r);
/* Append generated text, to reasoning (think) or content. Returns false on allocation failure.
 * After it, r->stopped tells whether a stop string has matched (content is cut before it). */
bool reply_add(srv_reply *r, bool think, const char *text, size_t n);
/* Same, recording tok_end (the number of generated tokens this text completes) with the piece. */
bool reply_add_tok(srv_reply *r, bool think, const char *text, size_t n, int tok_end);
/* The text that may be sent now (nothing that could still turn out to start a stop string or a
 * tool call): pointers into the reply, valid until the next reply_add; advances the sent marks.
 * final: generation has ended, release what was held back (unless it is a stop or a tool call). */
void reply_take(srv_reply *r, bool final, const char **content, size_t *n_content, const char **reasoning,
                size_t *n_reasoning);

/* The next piece that may be sent now, one add (one token's text) at a time, in the order they
 * were added: the same hold-back rules as reply_take (a content piece is cut where held-back
 * text begins; its rest comes later, or never if it is part of a stop string or tool markup).
 * Returns false when nothing more may be sent yet. *tok_end: the piece's generated-token count.
 * Shares the sent marks with reply_take: use one or the other for a reply. */
bool reply_next(srv_reply *r, bool final, bool *think, const char **text, size_t *n, int *tok_end);

/* The number of generated tokens whose text the client gets: after a stop string, the tokens up
 * to the last one whose content text begins before the cut (its text may be cut), so that
 * per-token data (logprobs) agrees with the returned text; INT_MAX while no stop string matched. */
int reply_tok_kept(const srv_reply *r);

/* Tool calls found in the content's tool markup, as a JSON array text in OpenAI's format
 * ([{"id","type":"function","function":{"name","arguments"}}], arguments a JSON string), or
 * NULL if there is none. id_prefix makes the call ids. Caller frees. */
char *reply_tool_calls_json(const srv_reply *r, const char *id_prefix);

#endif /* TERN_SERVER_REPLY_H */
