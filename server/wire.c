/* wire.c: Anthropic's Messages API and OpenAI's Responses API over chat completions (see wire.h).
 * Shapes follow the two providers' API references: Messages (request fields, content blocks
 * text / tool_use / tool_result / thinking, stop_reason, the message_start ... message_stop
 * events) and Responses (input items message / function_call / function_call_output, output
 * items, the response.* events with sequence numbers). */
#include "wire.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool bad(srv_error *e, const char *param, const char *fmt, const char *a) {
    return srv_fail(e, 400, "invalid_request_error", param, fmt, a ? a : "");
}

/* Copies field `from` of src to `to` in dst when present (the chat parser checks its value). */
static void copy_field(cJSON *dst, const cJSON *src, const char *from, const char *to) {
    const cJSON *f = api_field(src, from);
    if (f) cJSON_AddItemToObject(dst, to, cJSON_Duplicate(f, true));
}

/* copy_field for each {from, to} of a {NULL, NULL}-ended list. */
static void copy_fields(cJSON *dst, const cJSON *src, const char *const (*names)[2]) {
    for (; names[0][0]; names++) copy_field(dst, src, names[0][0], names[0][1]);
}

/* The text of a content given as a string or an array of text parts whose type is one of
 * types[] (NULL-terminated); NULL with e set for any other part. */
static char *text_of(const cJSON *c, const char *param, const char *const *types, srv_error *e) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) {
        char g[32];
        srv_fail(e, 400, "invalid_request_error", param, "'%s' must be a string or an array of text blocks, got %s", param,
                 api_got(c, g));
        return NULL;
    }
    sbuf b = {0};
    int k = 0;
    for (const cJSON *p = c->child; p; p = p->next, k++) {
        const cJSON *type = api_field(p, "type"), *text = api_field(p, "text");
        bool ok = cJSON_IsString(type) && cJSON_IsString(text);
        for (int t = 0; ok && types[t]; t++)
            if (!strcmp(type->valuestring, types[t])) goto text_ok;
        ok = false;
    text_ok:
        if (!ok) {
            char g[32], got[64];
            if (!cJSON_IsObject(p)) snprintf(got, sizeof got, "%s", api_got(p, g));
            else if (!cJSON_IsString(type)) snprintf(got, sizeof got, "type %s", type ? api_got(type, g) : "nothing");
            else {
                bool known = false;                   /* a type of types[]: then the text is what is wrong */
                for (int t = 0; types[t] && !known; t++) known = !strcmp(type->valuestring, types[t]);
                if (!known) snprintf(got, sizeof got, "type '%.32s'", type->valuestring);
                else snprintf(got, sizeof got, "type '%.32s' with 'text' %s", type->valuestring, text ? api_got(text, g) : "missing");
            }
            sbuf_free(&b);
            srv_fail(e, 400, "invalid_request_error", param, "'%s[%d]' must be a text block of type '%s', got %s", param, k,
                     types[0], got);
            return NULL;
        }
        sbuf_add(&b, text->valuestring, strlen(text->valuestring));
    }
    if (!b.p) return strdup("");
    return b.p;
}

static cJSON *chat_msg(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

/* A request's tools (NULL: none) as chat tools in chat. Each is {"name", "description",
 * schema_key: the JSON schema}; type: the "type" each must have ("function"), or NULL for
 * Anthropic's custom tools (no type, or "custom"): any other type is a built-in tool, refused. */
static bool tools_to_chat(const cJSON *tools, const char *schema_key, const char *type, cJSON *chat, srv_error *e) {
    if (!tools) return true;
    if (!cJSON_IsArray(tools)) return bad(e, "tools", "'tools' must be an array of tool definitions%s", NULL);
    cJSON *ct = cJSON_AddArrayToObject(chat, "tools");
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        char tp[48];
        snprintf(tp, sizeof tp, "tools[%d]", k);
        const cJSON *ty = api_field(t, "type");
        const bool type_ok = type ? cJSON_IsString(ty) && !strcmp(ty->valuestring, type)
                                  : !ty || (cJSON_IsString(ty) && !strcmp(ty->valuestring, "custom"));
        if (!type_ok || !cJSON_IsString(api_field(t, "name")))
            return bad(e, tp, "'%s' must be a function tool with a string 'name' (built-in tools are not supported)", tp);
        cJSON *c = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "type", "function");
        copy_field(fn, t, "name", "name");
        copy_field(fn, t, "description", "description");
        copy_field(fn, t, schema_key, "parameters");
        cJSON_AddItemToObject(c, "function", fn);
        cJSON_AddItemToArray(ct, c);
    }
    return true;
}

/* ---- Anthropic Messages -> chat ------------------------------------------------------------ */

static const char *const anth_fields[] = {"model",  "messages",    "system",   "max_tokens", "temperature",
                                          "top_p",  "top_k",       "stop_sequences", "stream", "tools",
                                          "tool_choice", "metadata", "thinking", "service_tier", NULL};
static const char *const anth_text[] = {"text", NULL};

/* What a content block anth_message refuses is, for its message: "type 'image'", "type 'tool_use'
 * in a user message", "type 'text' without a string 'text'", "a number". */
static void anth_block_got(const cJSON *b, bool user, char got[96]) {
    char g[32];
    const cJSON *type = api_field(b, "type");
    if (!cJSON_IsObject(b)) {
        snprintf(got, 96, "%s", api_got(b, g));
        return;
    }
    if (!cJSON_IsString(type)) {
        snprintf(got, 96, "type %s", type ? api_got(type, g) : "nothing");
        return;
    }
    const char *t = type->valuestring, *why = "";
    if (!strcmp(t, "text")) why = " without a string 'text'";
    else if (!strcmp(t, "tool_use")) why = user ? " in a user message" : " without a string 'id' and 'name'";
    else if (!strcmp(t, "tool_result")) why = !user ? " in an assistant message" : " without a string 'tool_use_id'";
    else if (!strcmp(t, "thinking") || !strcmp(t, "redacted_thinking")) why = " in a user message";
    snprintf(got, 96, "type '%.32s'%s", t, why);
}

/* Whether the chat messages so far (msgs) end in an assistant turn whose tool_calls include id,
 * followed only by tool results: a tool result must answer a call of the turn before it, as the
 * chat parser requires (which would name the chat request's messages, not the client's). */
static bool answers_a_call(const cJSON *msgs, const char *id) {
    const cJSON *m = msgs->child ? msgs->child->prev : NULL;   /* cJSON: the first item's prev is the last */
    for (; m; m = m == msgs->child ? NULL : m->prev) {
        const cJSON *role = cJSON_GetObjectItem(m, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "tool")) continue;
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant")) return false;
        const cJSON *calls = cJSON_GetObjectItem(m, "tool_calls");
        for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
            const cJSON *cid = cJSON_GetObjectItem(c, "id");
            if (cJSON_IsString(cid) && !strcmp(cid->valuestring, id)) return true;
        }
        return false;
    }
    return false;
}

/* One Messages message into chat messages: a user's tool_result blocks become tool messages
 * (before its text), an assistant's tool_use blocks its tool_calls; thinking blocks of earlier
 * replies are dropped (the templates keep no reasoning of past turns). */
static bool anth_message(const cJSON *m, int i, cJSON *out, srv_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].role", i);
    if (!cJSON_IsObject(m)) {
        char g[32];
        snprintf(param, sizeof param, "messages[%d]", i);
        return srv_fail(e, 400, "invalid_request_error", param, "'%s' must be an object {\"role\", \"content\"}, got %s",
                        param, api_got(m, g));
    }
    const cJSON *role = api_field(m, "role"), *content = api_field(m, "content");
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))) {
        char g[32];
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "system"))   /* the Messages API's own place for it */
            return srv_fail(e, 400, "invalid_request_error", param, "'%s' must be \"user\" or \"assistant\", got "
                            "\"system\": the Messages API takes the system prompt in the top-level 'system' field", param);
        if (cJSON_IsString(role))
            return srv_fail(e, 400, "invalid_request_error", param, "'%s' must be \"user\" or \"assistant\", got \"%.32s\"",
                            param, role->valuestring);
        const cJSON *raw = cJSON_GetObjectItemCaseSensitive(m, "role");   /* null as well as absent */
        return srv_fail(e, 400, "invalid_request_error", param, "'%s' must be \"user\" or \"assistant\", got %s", param,
                        raw ? api_got(raw, g) : "nothing");
    }
    const bool user = !strcmp(role->valuestring, "user");
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(content)) {
        cJSON_AddItemToArray(out, chat_msg(role->valuestring, content->valuestring));
        return true;
    }
    if (!cJSON_IsArray(content) || !content->child) {   /* [] as well: Anthropic refuses a message with no content */
        char g[32];
        const cJSON *raw = cJSON_GetObjectItemCaseSensitive(m, "content");   /* null as well as absent */
        return srv_fail(e, 400, "invalid_request_error", param,
                        "'%s' must be a string or a non-empty array of content blocks, got %s", param,
                        cJSON_IsArray(content) ? "an empty array" : raw ? api_got(raw, g) : "nothing");
    }
    sbuf text = {0};
    cJSON *calls = cJSON_CreateArray();
    int k = 0;
    for (const cJSON *b = content->child; b; b = b->next, k++) {
        char bp[96];
        snprintf(bp, sizeof bp, "messages[%d].content[%d]", i, k);
        const cJSON *type = api_field(b, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        if (!strcmp(t, "text") && cJSON_IsString(api_field(b, "text"))) {
            const char *s = api_field(b, "text")->valuestring;
            sbuf_add(&text, s, strlen(s));
        } else if (!strcmp(t, "tool_use") && !user && cJSON_IsString(api_field(b, "id")) && cJSON_IsString(api_field(b, "name"))) {
            const cJSON *input = api_field(b, "input");
            if (input && !cJSON_IsObject(input)) {    /* the call's arguments: an object, as Anthropic's API has it */
                char g[32], ip[112];
                snprintf(ip, sizeof ip, "%s.input", bp);
                srv_fail(e, 400, "invalid_request_error", ip, "'%s' must be an object (the tool's arguments), got %s", ip,
                         api_got(input, g));
                goto fail;
            }
            cJSON *c = cJSON_CreateObject(), *fn = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "id", api_field(b, "id")->valuestring);
            cJSON_AddStringToObject(c, "type", "function");
            cJSON_AddStringToObject(fn, "name", api_field(b, "name")->valuestring);
            char *args = input ? cJSON_PrintUnformatted(input) : strdup("{}");
            cJSON_AddStringToObject(fn, "arguments", args ? args : "{}");
            free(args);
            cJSON_AddItemToObject(c, "function", fn);
            cJSON_AddItemToArray(calls, c);
        } else if (!strcmp(t, "tool_result") && user && cJSON_IsString(api_field(b, "tool_use_id"))) {
            const char *use_id = api_field(b, "tool_use_id")->valuestring;
            if (!answers_a_call(out, use_id)) {       /* as Anthropic's API: it answers the previous message's tool_use */
                char ip[112];
                snprintf(ip, sizeof ip, "%s.tool_use_id", bp);
                srv_fail(e, 400, "invalid_request_error", ip,
                         "'%s' is '%.64s', expected the id of a tool_use block in the previous (assistant) message", ip, use_id);
                goto fail;
            }
            const cJSON *rc = api_field(b, "content");
            char *r = rc ? text_of(rc, bp, anth_text, e) : strdup("");
            if (!r) goto fail;
            cJSON *tm = chat_msg("tool", r);
            cJSON_AddStringToObject(tm, "tool_call_id", api_field(b, "tool_use_id")->valuestring);
            cJSON_AddItemToArray(out, tm);
            free(r);
        } else if ((!strcmp(t, "thinking") || !strcmp(t, "redacted_thinking")) && !user) {
            continue;
        } else {
            char got[96];
            anth_block_got(b, user, got);
            srv_fail(e, 400, "invalid_request_error", bp, "'%s' must be a text block, a tool_use block (assistant) or a "
                     "tool_result block (user); images and documents are not supported; got %s", bp, got);
            goto fail;
        }
    }
    if (user && text.n == 0 && cJSON_GetArraySize(out) > 0 && !strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(out,
        cJSON_GetArraySize(out) - 1), "role")->valuestring, "tool")) {
        cJSON_Delete(calls);                          /* only tool results: no empty user turn after them */
        sbuf_free(&text);
        return true;
    }
    cJSON *msg = chat_msg(role->valuestring, text.p ? text.p : "");
    if (cJSON_GetArraySize(calls) > 0) cJSON_AddItemToObject(msg, "tool_calls", calls);
    else cJSON_Delete(calls);
    cJSON_AddItemToArray(out, msg);
    sbuf_free(&text);
    return true;
fail:
    cJSON_Delete(calls);
    sbuf_free(&text);
    return false;
}

static cJSON *anth_to_chat(const cJSON *root, srv_error *e) {
    for (const cJSON *f = root->child; f; f = f->next) {
        bool known = false;
        for (int i = 0; anth_fields[i] && !known; i++) known = !strcmp(f->string, anth_fields[i]);
        if (!known) {
            bad(e, f->string, "'%s': unknown field (the Messages API has no such field)", f->string);
            return NULL;
        }
    }
    const cJSON *mt = api_field(root, "max_tokens");
    if (!mt) {
        bad(e, "max_tokens", "'max_tokens' is required%s", NULL);
        return NULL;
    }
    if (cJSON_IsNumber(mt) && mt->valuedouble < 1) {   /* Anthropic's range starts at 1: no -1 (until the context is full) */
        char g[64];
        srv_fail(e, 400, "invalid_request_error", "max_tokens", "'max_tokens' must be an integer of at least 1, got %s",
                 api_got(mt, g));
        return NULL;
    }
    const cJSON *ss = api_field(root, "stop_sequences");
    if (ss && !cJSON_IsArray(ss)) {
        bad(e, "stop_sequences", "'stop_sequences' must be an array of strings%s", NULL);
        return NULL;
    }
    static const char *const same[][2] = {{"model", "model"}, {"max_tokens", "max_tokens"}, {"temperature", "temperature"},
                                          {"top_p", "top_p"}, {"top_k", "top_k"}, {"stop_sequences", "stop"},
                                          {"stream", "stream"}, {NULL, NULL}};
    cJSON *chat = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(chat, "messages");
    copy_fields(chat, root, same);
    const cJSON *sys = api_field(root, "system");
    if (sys) {
        char *s = text_of(sys, "system", anth_text, e);
        if (!s) goto fail;
        cJSON_AddItemToArray(msgs, chat_msg("system", s));
        free(s);
    }
    const cJSON *ms = api_field(root, "messages");
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) == 0) {
        char g[32];
        if (!ms) bad(e, "messages", "'messages' is required: a non-empty array of {\"role\", \"content\"}%s", NULL);
        else bad(e, "messages", "'messages' must be a non-empty array of {\"role\", \"content\"}, got %s",
                 cJSON_IsArray(ms) ? "an empty array" : api_got(ms, g));
        goto fail;
    }
    int i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++)
        if (!anth_message(m, i, msgs, e)) goto fail;
    if (!tools_to_chat(api_field(root, "tools"), "input_schema", NULL, chat, e)) goto fail;
    const cJSON *tc = api_field(root, "tool_choice");
    if (tc) {
        char g[32];
        if (!cJSON_IsObject(tc)) {                    /* Anthropic's is an object, not OpenAI's string */
            bad(e, "tool_choice", "'tool_choice' must be an object {\"type\": \"auto\"} or {\"type\": \"none\"}, got %s",
                api_got(tc, g));
            goto fail;
        }
        const cJSON *type = api_field(tc, "type");
        if (!cJSON_IsString(type)) {
            const cJSON *raw = cJSON_GetObjectItemCaseSensitive(tc, "type");   /* null as well as absent */
            bad(e, "tool_choice", "'tool_choice.type' must be \"auto\" or \"none\", got %s", raw ? api_got(raw, g) : "nothing");
            goto fail;
        }
        const char *t = type->valuestring;
        if (strcmp(t, "auto") && strcmp(t, "none") && strcmp(t, "any") && strcmp(t, "tool")) {
            bad(e, "tool_choice", "'tool_choice.type' must be \"auto\" or \"none\" (Anthropic's \"any\" and \"tool\" are not "
                                  "supported here), got '%.32s'", t);
            goto fail;
        }
        if (strcmp(t, "auto") && strcmp(t, "none")) {
            bad(e, "tool_choice", "'tool_choice' {\"type\": \"%.32s\"} is not supported (a tool call cannot be forced); "
                                  "send {\"type\": \"auto\"} or {\"type\": \"none\"}", t);
            goto fail;
        }
        cJSON_AddStringToObject(chat, "tool_choice", t);
    }
    const cJSON *th = api_field(root, "thinking");
    if (th) {
        char g[32];
        if (!cJSON_IsObject(th)) {
            bad(e, "thinking", "'thinking' must be an object {\"type\": \"enabled\" or \"disabled\", \"budget_tokens\"}, "
                "got %s", api_got(th, g));
            goto fail;
        }
        const cJSON *type = api_field(th, "type");
        if (!cJSON_IsString(type)) {
            const cJSON *raw = cJSON_GetObjectItemCaseSensitive(th, "type");   /* null as well as absent */
            bad(e, "thinking", "'thinking.type' must be \"enabled\" or \"disabled\", got %s", raw ? api_got(raw, g) : "nothing");
            goto fail;
        }
        const char *t = type->valuestring;
        if (strcmp(t, "enabled") && strcmp(t, "disabled")) {
            bad(e, "thinking", "'thinking.type' must be \"enabled\" or \"disabled\", got '%.32s'", t);
            goto fail;
        }
        /* as Anthropic's API: thinking enabled names its budget, which is part of max_tokens and so
         * must be less */
        const cJSON *budget = api_field(th, "budget_tokens"), *max = api_field(root, "max_tokens");
        if (!strcmp(t, "enabled") && !budget) {
            const cJSON *raw = cJSON_GetObjectItemCaseSensitive(th, "budget_tokens");   /* null as well as absent */
            bad(e, "thinking", "'thinking.budget_tokens' is required when 'thinking.type' is \"enabled\" (the thinking's "
                "token budget, less than 'max_tokens'), got %s", raw ? api_got(raw, g) : "nothing");
            goto fail;
        }
        if (!strcmp(t, "enabled") && cJSON_IsNumber(budget) && cJSON_IsNumber(max) && budget->valuedouble >= max->valuedouble) {
            char gb[32], gm[32];
            srv_fail(e, 400, "invalid_request_error", "thinking", "'thinking.budget_tokens' (%s) must be less than 'max_tokens' (%s)",
                     api_got(budget, gb), api_got(max, gm));
            goto fail;
        }
        cJSON *kw = cJSON_AddObjectToObject(chat, "chat_template_kwargs");
        cJSON_AddBoolToObject(kw, "enable_thinking", !strcmp(t, "enabled"));
        copy_field(chat, th, "budget_tokens", "reasoning_budget");   /* the think block's token budget */
    }
    return chat;
fail:
    cJSON_Delete(chat);
    return NULL;
}

/* ---- Responses -> chat --------------------------------------------------------------------- */

static const char *const resp_text[] = {"input_text", "output_text", "text", NULL};

static cJSON *last_assistant(cJSON *msgs) {
    cJSON *m = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *r = m ? cJSON_GetObjectItem(m, "role") : NULL;
    return r && !strcmp(r->valuestring, "assistant") ? m : NULL;
}

/* The first of a Responses item's required string fields (a NULL-ended list) that is missing or
 * not a string, as a 400 naming it and what came ('input[2].arguments' (function_call) must be a
 * string (the call's arguments as a JSON text), got 5); true when they are all strings. */
static bool resp_strings(const cJSON *it, const char *param, const char *type, const char *const *names, srv_error *e) {
    for (int k = 0; names[k]; k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, names[k]);
        if (cJSON_IsString(f)) continue;
        char g[32];
        const char *what = !strcmp(names[k], "arguments") ? " (the call's arguments as a JSON text)" : "";
        return srv_fail(e, 400, "invalid_request_error", param, "'%s.%s' (%s) must be a string%s, got %s", param, names[k],
                        type, what, f ? api_got(f, g) : "nothing");
    }
    return true;
}

static bool resp_item(const cJSON *it, int i, cJSON *msgs, srv_error *e) {
    char param[64];
    snprintf(param, sizeof param, "input[%d]", i);
    const cJSON *type = api_field(it, "type"), *role = api_field(it, "role");
    const char *t = cJSON_IsString(type) ? type->valuestring : "message";
    if (!strcmp(t, "message")) {
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "system") && strcmp(r, "developer")) {
            char g[32], got[64];
            const cJSON *raw = cJSON_GetObjectItemCaseSensitive(it, "role");   /* null as well as absent */
            if (cJSON_IsString(raw)) snprintf(got, sizeof got, "'%.40s'", raw->valuestring);
            else snprintf(got, sizeof got, "%s", raw ? api_got(raw, g) : "nothing");
            return srv_fail(e, 400, "invalid_request_error", param,
                            "'%s.role' must be \"user\", \"assistant\", \"system\" or \"developer\", got %s", param, got);
        }
        char cp[80];
        snprintf(cp, sizeof cp, "input[%d].content", i);
        char *text = text_of(api_field(it, "content"), cp, resp_text, e);
        if (!text) return false;
        cJSON_AddItemToArray(msgs, chat_msg(strcmp(r, "developer") ? r : "system", text));
        free(text);
        return true;
    }
    if (!strcmp(t, "function_call")) {
        static const char *const need[] = {"call_id", "name", "arguments", NULL};
        if (!resp_strings(it, param, "function_call", need, e)) return false;
        cJSON *a = last_assistant(msgs);
        if (!a) {
            a = chat_msg("assistant", "");
            cJSON_AddItemToArray(msgs, a);
        }
        cJSON *calls = cJSON_GetObjectItem(a, "tool_calls");
        if (!calls) calls = cJSON_AddArrayToObject(a, "tool_calls");
        cJSON *c = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        copy_field(c, it, "call_id", "id");
        cJSON_AddStringToObject(c, "type", "function");
        copy_field(fn, it, "name", "name");
        copy_field(fn, it, "arguments", "arguments");
        cJSON_AddItemToObject(c, "function", fn);
        cJSON_AddItemToArray(calls, c);
        return true;
    }
    if (!strcmp(t, "function_call_output")) {
        static const char *const need[] = {"call_id", "output", NULL};
        if (!resp_strings(it, param, "function_call_output", need, e)) return false;
        const char *call_id = api_field(it, "call_id")->valuestring;
        if (!answers_a_call(msgs, call_id)) {
            char cp[80];
            snprintf(cp, sizeof cp, "%s.call_id", param);
            return srv_fail(e, 400, "invalid_request_error", cp,
                            "'%s' is '%.64s', expected the call_id of a function_call item before it (with only other "
                            "outputs between)", cp, call_id);
        }
        cJSON *m = chat_msg("tool", api_field(it, "output")->valuestring);
        copy_field(m, it, "call_id", "tool_call_id");
        cJSON_AddItemToArray(msgs, m);
        return true;
    }
    if (!strcmp(t, "reasoning")) return true;          /* earlier reasoning: the templates drop it */
    char msg[256];
    snprintf(msg, sizeof msg, "'%s': item type '%.40s' is not supported (message, function_call, function_call_output)",
             param, t);
    return bad(e, param, "%s", msg);
}

static cJSON *resp_to_chat(const cJSON *root, srv_error *e) {
    if (api_field(root, "previous_response_id")) {
        bad(e, "previous_response_id", "'previous_response_id' is not supported: responses are not stored; send the "
                                       "conversation in 'input'%s", NULL);
        return NULL;
    }
    if (cJSON_IsTrue(api_field(root, "background"))) {
        bad(e, "background", "'background' true is not supported%s", NULL);
        return NULL;
    }
    const cJSON *fmt = api_field(api_field(root, "text"), "format");
    if (fmt && !(cJSON_IsString(api_field(fmt, "type")) && !strcmp(api_field(fmt, "type")->valuestring, "text"))) {
        bad(e, "text.format", "'text.format' other than {\"type\": \"text\"} is not supported%s", NULL);
        return NULL;
    }
    static const char *const same[][2] = {{"model", "model"}, {"max_output_tokens", "max_tokens"},
                                          {"temperature", "temperature"}, {"top_p", "top_p"}, {"stream", "stream"},
                                          {NULL, NULL}};
    cJSON *chat = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(chat, "messages");
    copy_fields(chat, root, same);
    const cJSON *ins = api_field(root, "instructions");
    if (ins) {
        if (!cJSON_IsString(ins)) { bad(e, "instructions", "'instructions' must be a string%s", NULL); goto fail; }
        cJSON_AddItemToArray(msgs, chat_msg("system", ins->valuestring));
    }
    const cJSON *in = api_field(root, "input");
    if (cJSON_IsString(in)) cJSON_AddItemToArray(msgs, chat_msg("user", in->valuestring));
    else if (cJSON_IsArray(in) && cJSON_GetArraySize(in) > 0) {
        int i = 0;
        for (const cJSON *it = in->child; it; it = it->next, i++) {
            if (!cJSON_IsObject(it)) { bad(e, "input", "'input' items must be objects%s", NULL); goto fail; }
            if (!resp_item(it, i, msgs, e)) goto fail;
        }
    } else if (!in) {
        bad(e, "input", "'input' is required: a string or a non-empty array of items%s", NULL);
        goto fail;
    } else {   /* given, but not a string nor a non-empty array */
        char g[32];
        bad(e, "input", "'input' must be a string or a non-empty array of items, got %s",
            cJSON_IsArray(in) ? "an empty array" : api_got(in, g));
        goto fail;
    }
    if (!tools_to_chat(api_field(root, "tools"), "parameters", "function", chat, e)) goto fail;
    copy_field(chat, root, "tool_choice", "tool_choice");   /* "auto" / "none"; the chat parser refuses the rest */
    return chat;
fail:
    cJSON_Delete(chat);
    return NULL;
}

char *wire_to_chat(srv_wire w, const char *body, size_t len, srv_error *e) {
    cJSON *root = api_parse_body(body, len, e);
    if (!root) return NULL;
    cJSON *chat = w == WIRE_ANTHROPIC ? anth_to_chat(root, e) : resp_to_chat(root, e);
    cJSON_Delete(root);
    if (!chat) return NULL;
    char *t = api_print_free(chat);
    if (!t) srv_fail(e, 500, "server_error", NULL, "out of memory");
    return t;
}

/* The chat fields a Messages or Responses request becomes, under the names its client sent: an
 * error of the translated request names the chat field, and is shown under the client's. */
static const struct { srv_wire w; const char *chat, *client; } wire_names[] = {
    {WIRE_ANTHROPIC, "stop", "stop_sequences"},
    {WIRE_ANTHROPIC, "reasoning_budget", "thinking.budget_tokens"},
    {WIRE_RESPONSES, "max_tokens", "max_output_tokens"},
};

/* e with its param, and each quoted mention of it in the message, under the client's name when
 * the param is a wire_names chat field or an element or member of one ("stop[2]"). */
static srv_error client_names(srv_wire w, const srv_error *e) {
    srv_error r = *e;
    for (size_t i = 0; i < sizeof wire_names / sizeof wire_names[0]; i++) {
        const size_t n = strlen(wire_names[i].chat);
        if (wire_names[i].w != w || strncmp(e->param, wire_names[i].chat, n) ||
            (e->param[n] && e->param[n] != '[' && e->param[n] != '.'))
            continue;
        char param[sizeof e->param], from[sizeof e->param + 2], to[sizeof e->param + 2];
        snprintf(param, sizeof param, "%s%s", wire_names[i].client, e->param + n);
        snprintf(from, sizeof from, "'%s'", e->param);
        snprintf(to, sizeof to, "'%s'", param);
        sbuf m = {0};
        const char *p = e->message;
        bool ok = true;
        for (const char *at; ok && (at = strstr(p, from)); p = at + strlen(from))
            ok = sbuf_add(&m, p, (size_t)(at - p)) && sbuf_add(&m, to, strlen(to));
        ok = ok && sbuf_add(&m, p, strlen(p));
        if (ok) {                                     /* srv_fail cuts it to the message's size */
            srv_fail(&r, e->status, e->type, param, "%s", m.p);
            r.code = e->code;
        }
        sbuf_free(&m);
        break;
    }
    return r;
}

char *wire_error_json(srv_wire w, const srv_error *e) {
    const srv_error r = client_names(w, e);
    e = &r;
    if (w != WIRE_ANTHROPIC) return api_error_json(e);
    static const struct { int status; const char *type; } map[] = {
        {400, "invalid_request_error"}, {401, "authentication_error"}, {404, "not_found_error"},
        {413, "request_too_large"}, {429, "rate_limit_error"}, {503, "overloaded_error"}, {500, "api_error"}};
    const char *type = "invalid_request_error";
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].status == e->status) type = map[i].type;
    if (e->status >= 500 && e->status != 503) type = "api_error";
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(root, "type", "error");
    cJSON_AddStringToObject(err, "type", type);
    cJSON_AddStringToObject(err, "message", e->message);
    return api_print_free(root);
}

/* ---- responses ----------------------------------------------------------------------------- */

/* The part of a job id after its first '-' ("chatcmpl-6b0f...": "6b0f..."). */
static const char *id_tail(const char *id) {
    const char *d = strchr(id, '-');
    return d ? d + 1 : id;
}

static void add_text(cJSON *o, const char *name, const char *t, size_t n) {
    char *s = api_utf8_dup(t ? t : "", t ? n : 0);
    cJSON_AddStringToObject(o, name, s ? s : "");
    free(s);
}

/* A tool call's arguments as a JSON object; NULL when they are not one. */
static cJSON *call_input(const cJSON *call);

/* Tool calls whose arguments are a JSON object: the Messages API's tool_use blocks. */
static int anth_n_tool_use(const wire_reply *r) {
    cJSON *calls = r->tool_calls_json ? cJSON_Parse(r->tool_calls_json) : NULL;
    int n = 0;
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        cJSON *in = call_input(c);
        n += in != NULL;
        cJSON_Delete(in);
    }
    cJSON_Delete(calls);
    return n;
}

/* A call whose arguments are not a JSON object cannot be a tool_use block: it is given as text,
 * {"name": ..., "arguments": ...} as the model wrote them, so nothing is dropped. */
static char *call_as_text(const cJSON *call) {
    const cJSON *fn = cJSON_GetObjectItem(call, "function");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "name", cJSON_Duplicate(cJSON_GetObjectItem(fn, "name"), true));
    cJSON_AddItemToObject(o, "arguments", cJSON_Duplicate(cJSON_GetObjectItem(fn, "arguments"), true));
    return api_print_free(o);
}

static const char *anth_stop_reason(const wire_reply *r) {
    if (anth_n_tool_use(r) > 0) return "tool_use";
    if (!strcmp(r->finish, "length")) return "max_tokens";
    if (r->stopped) return "stop_sequence";
    return "end_turn";
}

static cJSON *call_input(const cJSON *call) {
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "function"), "arguments");
    cJSON *in = cJSON_IsString(a) ? cJSON_Parse(a->valuestring) : NULL;
    if (in && !cJSON_IsObject(in)) { cJSON_Delete(in); in = NULL; }
    return in;
}

static cJSON *anth_usage(const srv_usage *u) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "input_tokens", u->prompt_tokens - u->cached_tokens);
    cJSON_AddNumberToObject(o, "cache_read_input_tokens", u->cached_tokens);
    cJSON_AddNumberToObject(o, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(o, "output_tokens", u->completion_tokens);
    return o;
}

static cJSON *resp_usage(const srv_usage *u) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "input_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "input_tokens_details"), "cached_tokens", u->cached_tokens);
    cJSON_AddNumberToObject(o, "output_tokens", u->completion_tokens);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "output_tokens_details"), "reasoning_tokens", 0);
    cJSON_AddNumberToObject(o, "total_tokens", u->prompt_tokens + u->completion_tokens);
    return o;
}

static cJSON *resp_message_item(const char *tail, const char *text, size_t n, bool done, bool cut) {
    cJSON *it = cJSON_CreateObject();
    char id[96];
    snprintf(id, sizeof id, "msg_%s", tail);
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "status", !done ? "in_progress" : cut ? "incomplete" : "completed");
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (done) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "output_text");
        add_text(p, "text", text, n);
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddItemToArray(content, p);
    }
    return it;
}

static cJSON *resp_reasoning_item(const char *tail, const char *text, size_t n) {
    cJSON *it = cJSON_CreateObject();
    char id[96];
    snprintf(id, sizeof id, "rs_%s", tail);
    cJSON_AddStringToObject(it, "type", "reasoning");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddArrayToObject(it, "summary");
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "reasoning_text");
    add_text(p, "text", text, n);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(it, "content"), p);
    return it;
}

static cJSON *resp_call_item(const cJSON *call, bool done) {
    cJSON *it = cJSON_CreateObject();
    const cJSON *cid = cJSON_GetObjectItem(call, "id"), *fn = cJSON_GetObjectItem(call, "function");
    char id[96];
    snprintf(id, sizeof id, "fc_%s", cJSON_IsString(cid) ? cid->valuestring : "");
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "call_id", cJSON_IsString(cid) ? cid->valuestring : "");
    cJSON_AddItemToObject(it, "name", cJSON_Duplicate(cJSON_GetObjectItem(fn, "name"), true));
    if (done) cJSON_AddItemToObject(it, "arguments", cJSON_Duplicate(cJSON_GetObjectItem(fn, "arguments"), true));
    else cJSON_AddStringToObject(it, "arguments", "");
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    return it;
}

/* The Responses object; output NULL: empty (the in-progress snapshot of response.created). */
static cJSON *resp_object(const char *tail, long created, const char *model, const char *status, cJSON *output,
                          const srv_usage *u, bool length) {
    cJSON *o = cJSON_CreateObject();
    char id[96];
    snprintf(id, sizeof id, "resp_%s", tail);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddItemToObject(o, "output", output ? output : cJSON_CreateArray());
    cJSON_AddBoolToObject(o, "parallel_tool_calls", true);
    cJSON_AddStringToObject(o, "tool_choice", "auto");
    cJSON_AddArrayToObject(o, "tools");
    cJSON_AddNullToObject(o, "error");
    if (length) cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    if (u) cJSON_AddItemToObject(o, "usage", resp_usage(u));
    else cJSON_AddNullToObject(o, "usage");
    return o;
}

/* The finished reply's output items: reasoning, message, function calls. */
static cJSON *resp_output(const char *tail, const wire_reply *r) {
    cJSON *out = cJSON_CreateArray();
    if (r->n_reasoning) cJSON_AddItemToArray(out, resp_reasoning_item(tail, r->reasoning, r->n_reasoning));
    cJSON *calls = r->tool_calls_json ? cJSON_Parse(r->tool_calls_json) : NULL;
    if (r->n_content || !calls)   /* a reply cut by max_output_tokens: the message is incomplete too */
        cJSON_AddItemToArray(out, resp_message_item(tail, r->content, r->n_content, true, !strcmp(r->finish, "length")));
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) cJSON_AddItemToArray(out, resp_call_item(c, true));
    cJSON_Delete(calls);
    return out;
}

char *wire_response(srv_wire w, const char *id, long created, const char *model, const wire_reply *r) {
    const char *tail = id_tail(id);
    if (w == WIRE_RESPONSES) {
        const bool length = !strcmp(r->finish, "length");
        return api_print_free(resp_object(tail, created, model, length ? "incomplete" : "completed", resp_output(tail, r),
                                      &r->usage, length));
    }
    cJSON *o = cJSON_CreateObject();
    char mid[96];
    snprintf(mid, sizeof mid, "msg_%s", tail);
    cJSON_AddStringToObject(o, "id", mid);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", model);
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    if (r->n_reasoning) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        add_text(b, "thinking", r->reasoning, r->n_reasoning);
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(content, b);
    }
    cJSON *calls = r->tool_calls_json ? cJSON_Parse(r->tool_calls_json) : NULL;
    if (r->n_content || !calls) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        add_text(b, "text", r->content, r->n_content);
        cJSON_AddItemToArray(content, b);
    }
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        cJSON *b = cJSON_CreateObject(), *in = call_input(c);
        if (!in) {
            char *t = call_as_text(c);
            cJSON_AddStringToObject(b, "type", "text");
            cJSON_AddStringToObject(b, "text", t ? t : "");
            free(t);
            cJSON_AddItemToArray(content, b);
            continue;
        }
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddItemToObject(b, "id", cJSON_Duplicate(cJSON_GetObjectItem(c, "id"), true));
        cJSON_AddItemToObject(b, "name", cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "name"), true));
        cJSON_AddItemToObject(b, "input", in);
        cJSON_AddItemToArray(content, b);
    }
    cJSON_Delete(calls);
    cJSON_AddStringToObject(o, "stop_reason", anth_stop_reason(r));
    cJSON_AddNullToObject(o, "stop_sequence");
    cJSON_AddItemToObject(o, "usage", anth_usage(&r->usage));
    return api_print_free(o);
}

/* ---- streams ------------------------------------------------------------------------------- */

/* "event: NAME\ndata: JSON\n\n"; Responses events get their sequence_number. Frees o. */
static void emit(wire_stream *ws, sbuf *out, const char *name, cJSON *o) {
    cJSON_AddStringToObject(o, "type", name);
    if (ws->w == WIRE_RESPONSES) cJSON_AddNumberToObject(o, "sequence_number", ws->seq++);
    char *t = api_print_free(o);
    if (!t) return;
    sbuf_add(out, "event: ", 7);
    sbuf_add(out, name, strlen(name));
    sbuf_add(out, "\ndata: ", 7);
    sbuf_add(out, t, strlen(t));
    sbuf_add(out, "\n\n", 2);
    free(t);
}

void wire_stream_start(wire_stream *ws, srv_wire w, const char *id, long created, const char *model, int n_prompt,
                       sbuf *out) {
    memset(ws, 0, sizeof *ws);
    ws->w = w;
    snprintf(ws->id, sizeof ws->id, "%s", id_tail(id));
    snprintf(ws->model, sizeof ws->model, "%s", model);
    ws->created = created;
    ws->n_prompt = n_prompt;
    ws->block = -1;
    ws->msg_index = -1;
    if (w == WIRE_ANTHROPIC) {
        cJSON *o = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(o, "message");
        char mid[96];
        snprintf(mid, sizeof mid, "msg_%s", ws->id);
        cJSON_AddStringToObject(m, "id", mid);
        cJSON_AddStringToObject(m, "type", "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "model", model);
        cJSON_AddArrayToObject(m, "content");
        cJSON_AddNullToObject(m, "stop_reason");
        cJSON_AddNullToObject(m, "stop_sequence");
        const srv_usage u = {n_prompt, 0, 0};
        cJSON_AddItemToObject(m, "usage", anth_usage(&u));
        emit(ws, out, "message_start", o);
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "response", resp_object(ws->id, created, model, "in_progress", NULL, NULL, false));
        emit(ws, out, "response.created", o);
        o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "response", resp_object(ws->id, created, model, "in_progress", NULL, NULL, false));
        emit(ws, out, "response.in_progress", o);
    }
}

static void anth_block_stop(wire_stream *ws, sbuf *out) {
    if (ws->block < 0) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", ws->block);
    emit(ws, out, "content_block_stop", o);
    ws->block = -1;
}

static void anth_block_start(wire_stream *ws, sbuf *out, bool think) {
    anth_block_stop(ws, out);
    ws->block = ws->n_blocks++;
    ws->open_think = think;
    cJSON *o = cJSON_CreateObject(), *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", ws->block);
    cJSON_AddStringToObject(b, "type", think ? "thinking" : "text");
    if (think) {
        cJSON_AddStringToObject(b, "thinking", "");
        cJSON_AddStringToObject(b, "signature", "");
    } else
        cJSON_AddStringToObject(b, "text", "");
    cJSON_AddItemToObject(o, "content_block", b);
    emit(ws, out, "content_block_start", o);
}

/* Responses: the reasoning streamed so far as one output item, added and done at once. */
static void resp_emit_reasoning(wire_stream *ws, sbuf *out) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "output_index", ws->n_blocks);
    cJSON *it = resp_reasoning_item(ws->id, ws->think.p, ws->think.n);
    cJSON_AddItemToObject(o, "item", cJSON_Duplicate(it, true));
    emit(ws, out, "response.output_item.added", o);
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "output_index", ws->n_blocks++);
    cJSON_AddItemToObject(o, "item", it);
    emit(ws, out, "response.output_item.done", o);
}

/* Responses: the reasoning item (whole, when the answer begins) and the message item's opening. */
static void resp_open_message(wire_stream *ws, sbuf *out) {
    if (ws->msg_open) return;
    if (ws->think.n) resp_emit_reasoning(ws, out);
    ws->msg_index = ws->n_blocks++;
    ws->msg_open = true;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "output_index", ws->msg_index);
    cJSON_AddItemToObject(o, "item", resp_message_item(ws->id, NULL, 0, false, false));
    emit(ws, out, "response.output_item.added", o);
    o = cJSON_CreateObject();
    char iid[96];
    snprintf(iid, sizeof iid, "msg_%s", ws->id);
    cJSON_AddStringToObject(o, "item_id", iid);
    cJSON_AddNumberToObject(o, "output_index", ws->msg_index);
    cJSON_AddNumberToObject(o, "content_index", 0);
    cJSON *p = cJSON_AddObjectToObject(o, "part");
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", "");
    cJSON_AddArrayToObject(p, "annotations");
    emit(ws, out, "response.content_part.added", o);
}

void wire_stream_text(wire_stream *ws, bool think, const char *t, size_t n, sbuf *out) {
    if (n == 0) return;
    sbuf_add(think ? &ws->think : &ws->text, t, n);
    if (ws->w == WIRE_ANTHROPIC) {
        if (ws->block < 0 || ws->open_think != think) anth_block_start(ws, out, think);
        cJSON *o = cJSON_CreateObject(), *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", ws->block);
        cJSON_AddStringToObject(d, "type", think ? "thinking_delta" : "text_delta");
        add_text(d, think ? "thinking" : "text", t, n);
        cJSON_AddItemToObject(o, "delta", d);
        emit(ws, out, "content_block_delta", o);
        return;
    }
    if (think) return;                                /* the reasoning item goes out whole */
    resp_open_message(ws, out);
    cJSON *o = cJSON_CreateObject();
    char iid[96];
    snprintf(iid, sizeof iid, "msg_%s", ws->id);
    cJSON_AddStringToObject(o, "item_id", iid);
    cJSON_AddNumberToObject(o, "output_index", ws->msg_index);
    cJSON_AddNumberToObject(o, "content_index", 0);
    add_text(o, "delta", t, n);
    emit(ws, out, "response.output_text.delta", o);
}

void wire_stream_end(wire_stream *ws, const wire_reply *r, sbuf *out) {
    cJSON *calls = r->tool_calls_json ? cJSON_Parse(r->tool_calls_json) : NULL;
    if (ws->w == WIRE_ANTHROPIC) {
        if (ws->n_blocks == 0 && !calls) anth_block_start(ws, out, false);   /* a reply has at least one block */
        anth_block_stop(ws, out);
        for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
            cJSON *in = call_input(c);
            if (!in) {                                /* as text, in a text block of its own */
                char *t = call_as_text(c);
                anth_block_start(ws, out, false);
                cJSON *o = cJSON_CreateObject(), *d = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "index", ws->block);
                cJSON_AddStringToObject(d, "type", "text_delta");
                cJSON_AddStringToObject(d, "text", t ? t : "");
                free(t);
                cJSON_AddItemToObject(o, "delta", d);
                emit(ws, out, "content_block_delta", o);
                anth_block_stop(ws, out);
                continue;
            }
            const int idx = ws->n_blocks++;
            cJSON *o = cJSON_CreateObject(), *b = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "index", idx);
            cJSON_AddStringToObject(b, "type", "tool_use");
            cJSON_AddItemToObject(b, "id", cJSON_Duplicate(cJSON_GetObjectItem(c, "id"), true));
            cJSON_AddItemToObject(b, "name", cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "name"), true));
            cJSON_AddItemToObject(b, "input", cJSON_CreateObject());
            cJSON_AddItemToObject(o, "content_block", b);
            emit(ws, out, "content_block_start", o);
            char *js = api_print_free(in);
            o = cJSON_CreateObject();
            cJSON *d = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "index", idx);
            cJSON_AddStringToObject(d, "type", "input_json_delta");
            cJSON_AddStringToObject(d, "partial_json", js ? js : "{}");
            free(js);
            cJSON_AddItemToObject(o, "delta", d);
            emit(ws, out, "content_block_delta", o);
            o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "index", idx);
            emit(ws, out, "content_block_stop", o);
        }
        cJSON *o = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "stop_reason", anth_stop_reason(r));
        cJSON_AddNullToObject(d, "stop_sequence");
        /* the usage of message_delta: the output count (the input was message_start's) */
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "usage"), "output_tokens", r->usage.completion_tokens);
        emit(ws, out, "message_delta", o);
        emit(ws, out, "message_stop", cJSON_CreateObject());
        cJSON_Delete(calls);
        return;
    }
    if (ws->text.n || !calls) {                       /* close the message item */
        resp_open_message(ws, out);
        char iid[96];
        snprintf(iid, sizeof iid, "msg_%s", ws->id);
        const char *txt = r->content ? r->content : "";
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "item_id", iid);
        cJSON_AddNumberToObject(o, "output_index", ws->msg_index);
        cJSON_AddNumberToObject(o, "content_index", 0);
        add_text(o, "text", txt, r->n_content);
        emit(ws, out, "response.output_text.done", o);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "item_id", iid);
        cJSON_AddNumberToObject(o, "output_index", ws->msg_index);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON *p = cJSON_AddObjectToObject(o, "part");
        cJSON_AddStringToObject(p, "type", "output_text");
        add_text(p, "text", txt, r->n_content);
        cJSON_AddArrayToObject(p, "annotations");
        emit(ws, out, "response.content_part.done", o);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "output_index", ws->msg_index);
        cJSON_AddItemToObject(o, "item", resp_message_item(ws->id, txt, r->n_content, true, !strcmp(r->finish, "length")));
        emit(ws, out, "response.output_item.done", o);
    } else if (ws->think.n)                           /* reasoning then calls only: the reasoning item */
        resp_emit_reasoning(ws, out);
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const int idx = ws->n_blocks++;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "output_index", idx);
        cJSON_AddItemToObject(o, "item", resp_call_item(c, false));
        emit(ws, out, "response.output_item.added", o);
        cJSON *done = resp_call_item(c, true);
        const char *args = cJSON_GetObjectItem(done, "arguments") ? cJSON_GetObjectItem(done, "arguments")->valuestring : "";
        o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "item_id", cJSON_Duplicate(cJSON_GetObjectItem(done, "id"), true));
        cJSON_AddNumberToObject(o, "output_index", idx);
        cJSON_AddStringToObject(o, "delta", args ? args : "");
        emit(ws, out, "response.function_call_arguments.delta", o);
        o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "item_id", cJSON_Duplicate(cJSON_GetObjectItem(done, "id"), true));
        cJSON_AddNumberToObject(o, "output_index", idx);
        cJSON_AddStringToObject(o, "arguments", args ? args : "");
        emit(ws, out, "response.function_call_arguments.done", o);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "output_index", idx);
        cJSON_AddItemToObject(o, "item", done);
        emit(ws, out, "response.output_item.done", o);
    }
    cJSON_Delete(calls);
    const bool length = !strcmp(r->finish, "length");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "response", resp_object(ws->id, ws->created, ws->model, length ? "incomplete" : "completed",
                                                     resp_output(ws->id, r), &r->usage, length));
    emit(ws, out, length ? "response.incomplete" : "response.completed", o);
}

void wire_stream_error(wire_stream *ws, const srv_error *e, sbuf *out) {
    if (ws->w == WIRE_ANTHROPIC) {
        char *t = wire_error_json(WIRE_ANTHROPIC, e);
        if (!t) return;
        sbuf_add(out, "event: error\ndata: ", 19);
        sbuf_add(out, t, strlen(t));
        sbuf_add(out, "\n\n", 2);
        free(t);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", e->type ? e->type : "server_error");
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddNullToObject(o, "param");
    emit(ws, out, "error", o);
}

void wire_stream_free(wire_stream *ws) {
    sbuf_free(&ws->text);
    sbuf_free(&ws->think);
}
