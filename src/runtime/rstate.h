/* rstate.h: recurrent state of one sequence (Gated DeltaNet conv + delta-rule state of every
 * recurrent layer) with rollback to any position inside a window. Layer 4 (runtime): it owns the
 * memory and the bookkeeping; the math that re-applies logged tokens is the model's (a callback),
 * so this file knows nothing of GDN.
 *
 * Rollback design (needed by speculative decoding; DESIGN.md: never copy the whole state per
 * token). Besides the current state (S, conv) the sequence keeps a BASE copy of the state at
 * base_pos and a LOG of the per-token inputs of the recurrence since base_pos (for GDN: the raw
 * qkv row before the conv, and the two gates: n_ch + 2 Hv floats per layer per token, 41 KB per
 * layer for the 27B, about 2 MB per token for its 48 layers, against 151 MB of state).
 *   - decode/verify: a small batch appends its inputs to the log (no state copy);
 *   - when a batch does not fit in the log, the oldest tokens are re-applied to the base in one
 *     pass, keeping the last window/2 tokens before the batch (amortised: one read+write of the
 *     base per >= window/2 tokens);
 *   - rollback to p (base_pos <= p <= pos): base -> current (one copy, made by the replay
 *     callback layer by layer as it re-applies the logged tokens base_pos .. p-1: the
 *     token-by-token math, so the result has the bits a sequence that never went past p has);
 *   - a large batch (prefill chunk) is not logged: after it the current state is copied to the
 *     base (one copy per batch) and the window restarts there.
 * Memory: 2 x (state + conv) + window x n_layer x n_in floats. Position 0 is always restorable
 * (zero state). */
#ifndef TERN_RUNTIME_RSTATE_H
#define TERN_RUNTIME_RSTATE_H

#include "core/core.h"

#include <stdbool.h>
#include <stdint.h>

/* Re-apply n logged tokens of layer il to (S, conv) of that layer. in: token i's inputs at
 * in + i * n_in. Must use the same math as the forward's token-by-token path. S_from, conv_from:
 * NULL (apply in place), or the state to start from (a rollback's base), which the callback
 * copies into (S, conv) first; it may copy piece by piece as it replays, so each piece is still
 * in cache when its tokens are applied. With S_from, n may be 0: the copy alone. */
typedef void (*rstate_replay_fn)(void *ctx, int il, float *S, float *conv, const float *S_from, const float *conv_from,
                                 const float *in, int n);

typedef struct rstate {
    int n_layer;           /* recurrent layers (index il: 0 .. n_layer-1, the model's numbering) */
    int64_t n_state;       /* floats of one layer's recurrent state */
    int64_t n_conv;        /* floats of one layer's conv state */
    int64_t n_in;          /* floats of one token's logged inputs for one layer */
    int window;            /* tokens the log holds */
    float *S, *conv;       /* current state: n_layer x n_state, n_layer x n_conv (64-byte aligned) */
    float *S_base, *conv_base;   /* the state at base_pos */
    float *log;            /* ring of window entries, each n_layer x n_in */
    int pos;               /* tokens applied to the current state */
    int base_pos;          /* position of the base state; log holds tokens base_pos .. pos-1 */
    int log_head;          /* ring slot of token base_pos */
    bool logging;          /* the batch in progress is logged */
    int batch_n;           /* tokens in the batch in progress */
    rstate_replay_fn replay;
    void *replay_ctx;
    int n_snap;            /* rstate_snap_init: whole-state copies kept at chosen positions */
    float *snap_S, *snap_conv;   /* n_snap x (n_layer x n_state), n_snap x (n_layer x n_conv) */
    int *snap_pos;         /* the position of each copy; -1: empty */
    int snap_next;         /* the copy rstate_snap_take overwrites next (oldest first) */
} rstate;

/* Allocate everything (zeroed state at position 0). window >= 1. Errors: TERN_E_ARG,
 * TERN_E_NOMEM (message gives the bytes). *out owned by the caller (rstate_free). */
int rstate_init(rstate **out, int n_layer, int64_t n_state, int64_t n_conv, int64_t n_in, int window,
                rstate_replay_fn replay, void *replay_ctx, tern_err *err);
void rstate_free(rstate *rs);
/* Bytes allocated (for the memory check and reports). */
uint64_t rstate_bytes(int n_layer, int64_t n_state, int64_t n_conv, int64_t n_in, int window);
/* Back to an empty sequence: zero state, position 0, empty log. */
void rstate_reset(rstate *rs);

/* Current state of layer il. */
static inline float *rstate_S(rstate *rs, int il) { return rs->S + (int64_t)il * rs->n_state; }
static inline float *rstate_conv(rstate *rs, int il) { return rs->conv + (int64_t)il * rs->n_conv; }

/* Guarantee (speculative verification): after a logged batch of n <= window/2 tokens that began
 * at position p, every position from p - min(window/2, p - base_pos) to p + n is restorable; so
 * a verify of up to window/2 tokens fed in several consecutive batches stays restorable from
 * its start on. */
/* Start a batch of n tokens. log: whether it may be logged (the caller passes false for batches
 * its forward computes with a different rounding than the token path, e.g. chunked). Batches
 * larger than the window are never logged. Makes room in the log (re-applying old entries to
 * the base) as needed. */
void rstate_begin(rstate *rs, int n, bool log);
/* Where the forward writes the inputs of batch token i for layer il (n_in floats), or NULL when
 * this batch is not logged. */
float *rstate_log_slot(rstate *rs, int il, int i);
/* Finish the batch started by rstate_begin: pos += n (and snapshot the base if not logged). */
void rstate_end(rstate *rs);

/* Room for n whole-state copies (rstate_snap_take), 0: none. A prefill chunk cannot be rolled
 * into (it is not logged), so a position inside an earlier prompt is restorable only where a copy
 * was taken: the server takes one after each prompt chunk, so a later request that shares a long
 * prefix resumes from the last copy inside it. Errors: TERN_E_NOMEM (the bytes named). */
int rstate_snap_init(rstate *rs, int n, tern_err *err);
/* Bytes n copies take. */
uint64_t rstate_snap_bytes(int n_layer, int64_t n_state, int64_t n_conv, int n);
/* Copy the current state (at pos) over the oldest copy; nothing without room (n 0). */
void rstate_snap_take(rstate *rs);

/* Whether position p can be restored (p == 0, base_pos <= p <= pos, or a copy at p). */
bool rstate_can_restore(const rstate *rs, int p);
/* The largest position <= p that can be restored (0 at least). */
int rstate_restorable(const rstate *rs, int p);
/* Restore the state at position p (see the design above). TERN_E_RANGE if it cannot. */
int rstate_rollback(rstate *rs, int p, tern_err *err);

#endif /* TERN_RUNTIME_RSTATE_H */
