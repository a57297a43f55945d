/* wire.h: two more API formats over the chat completion machinery: Anthropic's Messages API
 * (POST /v1/messages) and OpenAI's Responses API (POST /v1/responses). A request in either format
 * is translated into the equivalent chat completion body, which api_parse_request then validates
 * like any chat request; the reply (content, reasoning, tool calls, finish reason, usage) is
 * rendered back in the format's own shape, whole or as its stream of server-sent events.
 * Pure JSON work: no model, no threads. */
#ifndef TERN_SERVER_WIRE_H
#define TERN_SERVER_WIRE_H

#include "api.h"
#include "reply.h"

typedef enum { WIRE_OPENAI = 0, WIRE_ANTHROPIC = 1, WIRE_RESPONSES = 2 } srv_wire;

/* The chat completion body (malloc'd JSON text) equivalent to a Messages or Responses request,
 * or NULL with e set (400 naming the field by the format's own names). Refused: content other
 * than text, tool use and tool results (images, documents), a tool_use input that is not an
 * object, a forced tool choice, response formats other than text, previous_response_id (nothing
 * is stored), and unknown top-level fields of a Messages request (as Anthropic's API refuses
 * them). */
char *wire_to_chat(srv_wire w, const char *body, size_t len, srv_error *e);
/* An error body in the format's shape (Anthropic: {"type":"error","error":{"type","message"}};
 * Responses: OpenAI's error object). An error of the translated chat request that names a chat
 * field the client did not send (Messages: stop, reasoning_budget; Responses: max_tokens) names
 * the client's field instead (stop_sequences, thinking.budget_tokens; max_output_tokens). */
char *wire_error_json(srv_wire w, const srv_error *e);

/* What a finished reply holds, for wire_response and wire_stream_end. */
typedef struct wire_reply {
    const char *content;    /* without the tool markup */
    size_t n_content;
    const char *reasoning;
    size_t n_reasoning;
    const char *tool_calls_json;   /* reply_tool_calls_json's array, or NULL */
    const char *finish;     /* "stop", "length", "tool_calls", "cancelled", "error" */
    bool stopped;           /* a stop string ended it */
    srv_usage usage;
} wire_reply;
/* The whole response (malloc'd JSON text). id: the job's id (its suffix names the message). */
char *wire_response(srv_wire w, const char *id, long created, const char *model, const wire_reply *r);

/* A streamed reply in the format's events ("event: NAME\ndata: JSON\n\n"), appended to out. */
typedef struct wire_stream {
    srv_wire w;
    char id[64], model[256];
    long created;
    int n_prompt;
    int seq;                /* Responses: sequence_number of the next event */
    int block;              /* Messages: index of the open content block (-1: none) */
    bool open_think;        /* the open block is a thinking block (else text) */
    int n_blocks;           /* Messages: blocks started; Responses: output items started */
    bool msg_open;          /* Responses: the message item is open */
    int msg_index;          /* its output_index */
    sbuf text, think;       /* everything streamed so far, for the closing events */
} wire_stream;
void wire_stream_start(wire_stream *ws, srv_wire w, const char *id, long created, const char *model, int n_prompt,
                       sbuf *out);
void wire_stream_text(wire_stream *ws, bool think, const char *t, size_t n, sbuf *out);
void wire_stream_end(wire_stream *ws, const wire_reply *r, sbuf *out);
/* An error after the stream began (the Messages "error" event; Responses "error"). */
void wire_stream_error(wire_stream *ws, const srv_error *e, sbuf *out);
void wire_stream_free(wire_stream *ws);

#endif /* TERN_SERVER_WIRE_H */
