/* pretok.c: the qwen2 and qwen35 pre-tokenisers as a hand-written splitter (no regex library).
 * Source of truth: ../shared/spec/ternary-gguf.md section 7. The qwen2 pattern is
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ?[^\s\p{L}\p{N}]+[\r\n]*
 *   | \s*[\r\n]+ | \s+(?!\S) | \s+
 * and qwen35 differs only in the letter run ([\p{L}\p{M}]+) and the punctuation run
 * ([^\s\p{L}\p{M}\p{N}]). Regex alternation takes the first alternative that matches at the
 * current position; each branch below reproduces one alternative with its backtracking worked
 * out by hand (noted per branch). Categories come from utf8proc; \s is Unicode White_Space.
 * Every code point is visited a bounded number of times: linear time, no recursion.
 * Invalid UTF-8 bytes are classified as U+FFFD (a symbol) one byte at a time, and words keep the
 * original bytes, so any byte string splits and round-trips. */
#include "tokenizer/tok_impl.h"

#include <stdlib.h>
#include <utf8proc.h>

enum { F_L = 1, F_N = 2, F_M = 4, F_S = 8, F_NL = 16 };

static uint8_t cp_flags(uint32_t cp) {
    if (cp < 0x80) {                                            /* fast path */
        if ((cp | 32) >= 'a' && (cp | 32) <= 'z') return F_L;
        if (cp >= '0' && cp <= '9') return F_N;
        if (cp == '\n' || cp == '\r') return F_S | F_NL;
        if (cp == ' ' || (cp >= 9 && cp <= 13)) return F_S;
        return 0;
    }
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return F_S;                                             /* White_Space beyond ASCII */
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: return F_L;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: return F_N;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: return F_M;
    default: return 0;
    }
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

bool tok_pretok_split(int pre, const char *s, size_t n, tok_word_fn fn, void *ctx) {
    if (n == 0) return true;
    /* code points with their byte offsets and class flags: cps[i] starts at byte off[i] */
    uint32_t *cps = malloc(n * sizeof *cps);
    size_t *off = malloc((n + 1) * sizeof *off);
    uint8_t *fl = malloc(n);
    if (!cps || !off || !fl) { free(cps); free(off); free(fl); return false; }
    size_t m = 0;
    for (size_t b = 0; b < n;) {
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)s + b, n - b, &cp);
        cps[m] = cp;
        off[m] = b;
        fl[m] = cp_flags(cp);
        m++;
        b += (size_t)l;
    }
    off[m] = n;
    tok_work += m;

    const uint8_t run_letter = pre == TOK_PRE_QWEN35 ? (F_L | F_M) : F_L;     /* letter run class */
    const uint8_t punct_excl = pre == TOK_PRE_QWEN35 ? (F_S | F_L | F_M | F_N) : (F_S | F_L | F_N);
#define IS_LET(j) ((j) < m && (fl[j] & run_letter))
#define IS_PUNCT(j) ((j) < m && !(fl[j] & punct_excl))
#define EMIT(a, b) fn(ctx, off[a], off[b])

    size_t i = 0;
    while (i < m) {
        const uint32_t c = cps[i];
        const uint8_t f = fl[i];
        /* 1. contractions, ASCII case-insensitive, in the pattern's order ('s 't 're 've 'm 'll 'd) */
        if (c == '\'' && i + 1 < m) {
            uint32_t c1 = ascii_lower(cps[i + 1]), c2 = i + 2 < m ? ascii_lower(cps[i + 2]) : 0;
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') { EMIT(i, i + 2); i += 2; continue; }
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) { EMIT(i, i + 3); i += 3; continue; }
        }
        /* 2. [^\r\n\p{L}\p{N}]?<letter run>: the optional prefix is taken when the next code point
         *    starts a run; otherwise the run must start here */
        {
            size_t j = i;
            bool prefix_ok = !(f & (F_NL | F_L | F_N));
            if (prefix_ok && IS_LET(i + 1)) j = i + 1;
            if (j > i || IS_LET(i)) {
                while (IS_LET(j)) j++;
                EMIT(i, j);
                i = j;
                continue;
            }
        }
        /* 3. \p{N}: one digit */
        if (f & F_N) { EMIT(i, i + 1); i++; continue; }
        /* 4. ' '?<punct>+[\r\n]*: a leading space only when punctuation follows it */
        {
            size_t j = i;
            if (c == ' ' && IS_PUNCT(i + 1)) j = i + 1;
            if (IS_PUNCT(j)) {
                while (IS_PUNCT(j)) j++;
                while (j < m && (fl[j] & F_NL)) j++;
                EMIT(i, j);
                i = j;
                continue;
            }
        }
        /* 5-7. whitespace run [i, e): \s*[\r\n]+ ends at the run's last newline; else \s+(?!\S)
         *      leaves the last space to the next word when a non-space follows; else \s+ */
        if (f & F_S) {
            size_t e = i, last_nl = (size_t)-1;
            while (e < m && (fl[e] & F_S)) { if (fl[e] & F_NL) last_nl = e; e++; }
            size_t end;
            if (last_nl != (size_t)-1) end = last_nl + 1;
            else if (e - i >= 2 && e < m) end = e - 1;
            else end = e;
            EMIT(i, end);
            i = end;
            continue;
        }
        /* unreachable for well-formed flags (every class is covered above); keep the split total */
        EMIT(i, i + 1);
        i++;
    }
#undef IS_LET
#undef IS_PUNCT
#undef EMIT
    free(cps); free(off); free(fl);
    return true;
}
