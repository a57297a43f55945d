/* jsonguide.c: a prefix checker for one JSON object (see jsonguide.h). Grammar: RFC 8259 with
 * the top-level value an object; whitespace is space, tab, LF, CR; strings take any byte >= 0x20
 * except '"' and '\' raw (UTF-8 passes through: the detokeniser repairs what it must), and the
 * escapes \" \\ \/ \b \f \n \r \t and \u with four hex digits. */
#include "jsonguide.h"

#include <string.h>

enum {
    M_START,        /* before the object: whitespace or '{' */
    M_VALUE,        /* a value */
    M_VALUE_OR_END, /* after '[': a value or ']' */
    M_KEY_OR_END,   /* after '{': a key or '}' */
    M_KEY,          /* after ',' in an object: a key */
    M_COLON,        /* after a key */
    M_AFTER,        /* after a value in a container: ',' or its closer */
    M_STR,          /* in a string */
    M_ESC,          /* after '\' in a string */
    M_HEX,          /* in a \u escape: sub of its four hex digits read */
    M_NUM,          /* in a number: sub its state (num_step) */
    M_LIT,          /* in true / false / null: sub bytes of lit written */
    M_DONE,         /* the object is complete */
};

static bool ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool digit(char c) { return c >= '0' && c <= '9'; }

static void json_guide_value_end(json_guide *g) { g->mode = g->depth == 0 ? M_DONE : M_AFTER; }

void json_guide_init(json_guide *g) {
    memset(g, 0, sizeof *g);
    g->mode = M_START;
}

bool json_guide_done(const json_guide *g) { return g->mode == M_DONE; }

bool json_guide_empty(const json_guide *g) { return g->mode == M_START; }

/* Number states: 0 after '-', 1 "0", 2 integer digits, 3 after '.', 4 fraction digits, 5 after
 * 'e', 6 after its sign, 7 exponent digits. Returns the next state, or -1 when c does not
 * continue the number (the caller ends it there if the state accepts: 1, 2, 4, 7). */
static int num_step(int st, char c) {
    switch (st) {
    case 0: return c == '0' ? 1 : digit(c) ? 2 : -1;
    case 1: return c == '.' ? 3 : (c == 'e' || c == 'E') ? 5 : -1;
    case 2: return digit(c) ? 2 : c == '.' ? 3 : (c == 'e' || c == 'E') ? 5 : -1;
    case 3: return digit(c) ? 4 : -1;
    case 4: return digit(c) ? 4 : (c == 'e' || c == 'E') ? 5 : -1;
    case 5: return (c == '+' || c == '-') ? 6 : digit(c) ? 7 : -1;
    case 6: case 7: return digit(c) ? 7 : -1;
    default: return -1;
    }
}

/* The first byte of a value. */
static bool value_start(json_guide *g, char c) {
    if (c == '{' || c == '[') {
        if (g->depth == JSON_GUIDE_DEPTH) return false;
        g->stack[g->depth++] = (uint8_t)c;
        g->mode = c == '{' ? M_KEY_OR_END : M_VALUE_OR_END;
        return true;
    }
    if (c == '"') { g->mode = M_STR; g->in_key = false; return true; }
    if (c == '-' || digit(c)) { g->mode = M_NUM; g->sub = (uint8_t)(c == '-' ? 0 : c == '0' ? 1 : 2); return true; }
    g->lit = c == 't' ? "true" : c == 'f' ? "false" : c == 'n' ? "null" : NULL;
    if (!g->lit) return false;
    g->mode = M_LIT;
    g->sub = 1;
    return true;
}

static bool close_container(json_guide *g, char c) {
    if (g->depth == 0 || g->stack[g->depth - 1] != (c == '}' ? '{' : '[')) return false;
    g->depth--;
    json_guide_value_end(g);
    return true;
}

static bool step(json_guide *g, char c) {
    switch (g->mode) {
    case M_START:
        if (ws(c)) return true;
        return c == '{' && value_start(g, c);
    case M_VALUE:
        return ws(c) || value_start(g, c);
    case M_VALUE_OR_END:
        if (ws(c)) return true;
        return c == ']' ? close_container(g, c) : value_start(g, c);
    case M_KEY_OR_END:
    case M_KEY:
        if (ws(c)) return true;
        if (c == '}' && g->mode == M_KEY_OR_END) return close_container(g, c);
        if (c != '"') return false;
        g->mode = M_STR;
        g->in_key = true;
        return true;
    case M_COLON:
        if (ws(c)) return true;
        if (c != ':') return false;
        g->mode = M_VALUE;
        return true;
    case M_AFTER:
        if (ws(c)) return true;
        if (c == ',') {
            g->mode = g->stack[g->depth - 1] == '{' ? M_KEY : M_VALUE;
            return true;
        }
        return (c == '}' || c == ']') && close_container(g, c);
    case M_STR:
        if (c == '"') {
            if (g->in_key) g->mode = M_COLON;
            else json_guide_value_end(g);
            return true;
        }
        if (c == '\\') { g->mode = M_ESC; return true; }
        return (unsigned char)c >= 0x20;
    case M_ESC:
        if (c == 'u') { g->mode = M_HEX; g->sub = 0; return true; }
        if (!strchr("\"\\/bfnrt", c) || c == '\0') return false;
        g->mode = M_STR;
        return true;
    case M_HEX:
        if (!(digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
        if (++g->sub == 4) g->mode = M_STR;
        return true;
    case M_NUM: {
        const int next = num_step(g->sub, c);
        if (next >= 0) { g->sub = (uint8_t)next; return true; }
        if (!(g->sub == 1 || g->sub == 2 || g->sub == 4 || g->sub == 7)) return false;
        json_guide_value_end(g);                      /* the number ended: c is the next thing */
        return step(g, c);
    }
    case M_LIT:
        if (c != g->lit[g->sub]) return false;
        if (g->lit[++g->sub] == '\0') json_guide_value_end(g);
        return true;
    case M_DONE:
        return ws(c);
    default:
        return false;
    }
}

bool json_guide_feed(json_guide *g, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const bool in_str = g->mode == M_STR || g->mode == M_ESC || g->mode == M_HEX;
        if (!in_str && ws(s[i])) {
            if (++g->n_ws > JSON_GUIDE_WS_RUN(g->depth)) return false;
        } else {
            g->n_ws = 0;
        }
        if (!step(g, s[i])) return false;
    }
    return true;
}
