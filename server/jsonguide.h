/* jsonguide.h: response_format {"type": "json_object"}: the reply must be one JSON object (RFC
 * 8259), optionally surrounded by whitespace. A run of whitespace outside strings is bounded
 * (JSON_GUIDE_WS_RUN: room for a newline and 4-space indentation per open container), so a model
 * that favours blanks cannot fill max_tokens with them before the object starts or after it ends. A json_guide follows the bytes generated so far as
 * a pushdown automaton and answers whether more bytes keep the text a prefix of such a reply; the
 * scheduler masks every token whose bytes would not (and end-of-generation tokens until the
 * object is complete, and every other token after it). Pure byte logic: no model, no threads. */
#ifndef TERN_SERVER_JSONGUIDE_H
#define TERN_SERVER_JSONGUIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { JSON_GUIDE_DEPTH = 64 };   /* nesting deeper than this is refused (the reply stays valid) */
/* The longest run of whitespace bytes outside strings at nesting depth d. */
#define JSON_GUIDE_WS_RUN(d) (8 + 4 * (d))

typedef struct json_guide {
    uint8_t stack[JSON_GUIDE_DEPTH];   /* '{' or '[' per open container */
    int depth;
    uint8_t mode;           /* what the next byte may be (jsonguide.c) */
    uint8_t sub;            /* inside a number, a literal or a \u escape: the position */
    bool in_key;            /* the string being written is an object key */
    const char *lit;        /* the literal being written ("true", "false", "null") */
    int n_ws;               /* whitespace bytes in a row outside strings */
} json_guide;

void json_guide_init(json_guide *g);
/* Feed n bytes; false when the text with them is not a prefix of one JSON object (g is then
 * undefined: feed a copy to test). */
bool json_guide_feed(json_guide *g, const char *s, size_t n);
/* Nothing but whitespace has been fed. */
bool json_guide_empty(const json_guide *g);
/* The object is complete (only whitespace may follow). */
bool json_guide_done(const json_guide *g);

#endif /* TERN_SERVER_JSONGUIDE_H */
