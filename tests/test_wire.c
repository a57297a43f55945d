/* test_wire.c: server/wire.c, the Messages and Responses formats: requests translated into chat
 * requests (roles, tool use and tool results, fields), refusals, whole responses with tool calls
 * (one whose arguments are not a JSON object kept as text), and the event streams (names, order,
 * indexes, sequence numbers), each checked against structures written out here from the two APIs'
 * references. */
#include "test.h"
#include "../server/wire.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *to_chat(srv_wire w, const char *body) {
    srv_error e;
    char *t = wire_to_chat(w, body, strlen(body), &e);
    if (!t) fail_msg("refused: %s (%s)", e.message, e.param);
    cJSON *j = cJSON_Parse(t);
    free(t);
    assert_non_null(j);
    return j;
}

static void refused(srv_wire w, const char *body, const char *param) {
    srv_error e;
    char *t = wire_to_chat(w, body, strlen(body), &e);
    if (t) fail_msg("accepted: %s -> %s", body, t);
    assert_int_equal(e.status, 400);
    if (strcmp(e.param, param)) fail_msg("%s: param '%s', expected '%s' (%s)", body, e.param, param, e.message);
}

/* refused, with exactly this message */
static void refused_msg(srv_wire w, const char *body, const char *param, const char *msg) {
    srv_error e;
    char *t = wire_to_chat(w, body, strlen(body), &e);
    if (t) fail_msg("accepted: %s -> %s", body, t);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, param);
    assert_string_equal(e.message, msg);
}

/* The error message a Messages client reads for body: the translation's refusal, else the chat
 * parser's refusal of the chat request it became, each through wire_error_json. */
static char *anth_error(const char *body) {
    srv_error e;
    char *chat = wire_to_chat(WIRE_ANTHROPIC, body, strlen(body), &e);
    if (chat) {
        srv_request r;
        const bool ok = api_parse_request(SRV_CHAT, chat, strlen(chat), &r, &e);
        if (ok) {
            api_request_free(&r);
            fail_msg("accepted: %s -> %s", body, chat);
        }
        free(chat);
    }
    assert_int_equal(e.status, 400);
    char *t = wire_error_json(WIRE_ANTHROPIC, &e);
    cJSON *j = cJSON_Parse(t);
    free(t);
    const cJSON *err = cJSON_GetObjectItem(j, "error"), *msg = cJSON_GetObjectItem(err, "message");
    if (!cJSON_IsString(cJSON_GetObjectItem(j, "type")) || strcmp(cJSON_GetObjectItem(j, "type")->valuestring, "error") ||
        !cJSON_IsString(msg))
        fail_msg("%s: not Anthropic's error shape", body);
    char *m = strdup(msg->valuestring);
    cJSON_Delete(j);
    return m;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsString(v)) fail_msg("no string '%s'", k);
    return v->valuestring;
}

static void test_messages_request(void **state) {
    (void)state;
    cJSON *c = to_chat(WIRE_ANTHROPIC,
        "{\"model\":\"m\",\"max_tokens\":50,\"stop_sequences\":[\"END\"],\"temperature\":0.5,"
        "\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\"}],\"thinking\":{\"type\":\"disabled\"},"
        "\"tool_choice\":{\"type\":\"auto\"},"
        "\"tools\":[{\"name\":\"get_weather\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"\"},"
        "{\"type\":\"text\",\"text\":\"Checking.\"},"
        "{\"type\":\"tool_use\",\"id\":\"tu1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"tu1\",\"content\":\"Sunny\"},"
        "{\"type\":\"text\",\"text\":\"Thanks\"}]}]}");
    assert_int_equal(cJSON_GetObjectItem(c, "max_tokens")->valueint, 50);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "stop"), 0)->valuestring, "END");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "chat_template_kwargs"), "enable_thinking")));
    assert_string_equal(str(c, "tool_choice"), "auto");
    const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "tools"), 0), "function");
    assert_string_equal(str(fn, "name"), "get_weather");
    assert_string_equal(str(cJSON_GetObjectItem(fn, "parameters"), "type"), "object");
    const cJSON *m = cJSON_GetObjectItem(c, "messages");
    assert_int_equal(cJSON_GetArraySize(m), 5);
    static const char *roles[5] = {"system", "user", "assistant", "tool", "user"};
    for (int i = 0; i < 5; i++) assert_string_equal(str(cJSON_GetArrayItem(m, i), "role"), roles[i]);
    assert_string_equal(str(cJSON_GetArrayItem(m, 0), "content"), "Be brief.");
    const cJSON *a = cJSON_GetArrayItem(m, 2);
    assert_string_equal(str(a, "content"), "Checking.");  /* the thinking block is dropped */
    const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "tool_calls"), 0);
    assert_string_equal(str(call, "id"), "tu1");
    assert_string_equal(str(cJSON_GetObjectItem(call, "function"), "arguments"), "{\"city\":\"Paris\"}");
    assert_string_equal(str(cJSON_GetArrayItem(m, 3), "tool_call_id"), "tu1");
    assert_string_equal(str(cJSON_GetArrayItem(m, 3), "content"), "Sunny");
    assert_string_equal(str(cJSON_GetArrayItem(m, 4), "content"), "Thanks");
    cJSON_Delete(c);
    const char *ok = "\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char b[512];
    refused(WIRE_ANTHROPIC, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens");
    snprintf(b, sizeof b, "{%s,\"top_logprobs\":3}", ok);
    refused(WIRE_ANTHROPIC, b, "top_logprobs");
    snprintf(b, sizeof b, "{%s,\"stop_sequences\":\"x\"}", ok);
    refused(WIRE_ANTHROPIC, b, "stop_sequences");
    snprintf(b, sizeof b, "{%s,\"tool_choice\":{\"type\":\"any\"}}", ok);
    refused(WIRE_ANTHROPIC, b, "tool_choice");
    snprintf(b, sizeof b, "{%s,\"thinking\":{\"type\":\"on\"}}", ok);
    refused(WIRE_ANTHROPIC, b, "thinking");
    refused(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
            "messages[0].content[0]");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}",
                "messages[0].role", "'messages[0].role' must be \"user\" or \"assistant\", got \"system\": the Messages "
                "API takes the system prompt in the top-level 'system' field");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
                "messages[0].role", "'messages[0].role' must be \"user\" or \"assistant\", got \"tool\"");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":1,\"content\":\"x\"}]}",
                "messages[0].role", "'messages[0].role' must be \"user\" or \"assistant\", got 1");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"content\":\"x\"}]}",
                "messages[0].role", "'messages[0].role' must be \"user\" or \"assistant\", got nothing");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":null,\"content\":\"x\"}]}",
                "messages[0].role", "'messages[0].role' must be \"user\" or \"assistant\", got null");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[\"hi\"]}", "messages[0]",
                "'messages[0]' must be an object {\"role\", \"content\"}, got a string");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[]}", "messages",
                "'messages' must be a non-empty array of {\"role\", \"content\"}, got an empty array");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":\"hi\"}", "messages",
                "'messages' must be a non-empty array of {\"role\", \"content\"}, got a string");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5}", "messages",
                "'messages' is required: a non-empty array of {\"role\", \"content\"}");
    /* the Messages API's max_tokens starts at 1 (OpenAI's -1, until the context is full, is not in it) */
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":0,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens",
                "'max_tokens' must be an integer of at least 1, got 0");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":-1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens",
                "'max_tokens' must be an integer of at least 1, got -1");
    refused(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"system\":7}", "system");
    /* content: an empty array is refused, and every content error says what it got */
    static const struct { const char *content, *got; } cs[] = {
        {"[]", "an empty array"}, {"5", "5"}, {"null", "null"}, {"{}", "an object"}, {"true", "true"}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char want[200];
        snprintf(b, sizeof b, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
                 "{\"role\":\"assistant\",\"content\":%s}]}", cs[i].content);
        snprintf(want, sizeof want, "'messages[1].content' must be a string or a non-empty array of content blocks, got %s",
                 cs[i].got);
        refused_msg(WIRE_ANTHROPIC, b, "messages[1].content", want);
    }
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\"}]}", "messages[0].content",
                "'messages[0].content' must be a string or a non-empty array of content blocks, got nothing");
    static const struct { const char *block, *got; } bs[] = {
        {"{\"type\":\"image\"}", "type 'image'"},
        {"{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\"}", "type 'tool_use' in a user message"},
        {"{\"type\":\"text\",\"text\":3}", "type 'text' without a string 'text'"},
        {"{\"text\":\"x\"}", "type nothing"}, {"\"x\"", "a string"}};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        char want[300];
        snprintf(b, sizeof b, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[%s]}]}", bs[i].block);
        snprintf(want, sizeof want, "'messages[0].content[0]' must be a text block, a tool_use block (assistant) or a "
                 "tool_result block (user); images and documents are not supported; got %s", bs[i].got);
        refused_msg(WIRE_ANTHROPIC, b, "messages[0].content[0]", want);
    }
    snprintf(b, sizeof b, "{%s,\"system\":7}", ok);
    refused_msg(WIRE_ANTHROPIC, b, "system", "'system' must be a string or an array of text blocks, got 7");
    snprintf(b, sizeof b, "{%s,\"system\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\"}]}", ok);
    refused_msg(WIRE_ANTHROPIC, b, "system", "'system[1]' must be a text block of type 'text', got type 'image'");
    snprintf(b, sizeof b, "{%s,\"system\":[{\"type\":\"text\"}]}", ok);
    refused_msg(WIRE_ANTHROPIC, b, "system", "'system[0]' must be a text block of type 'text', got type 'text' with 'text' missing");
    /* thinking and tool_choice of another kind than an object, or without a string type: the
     * message says what came */
    static const struct { const char *field, *value, *param, *want; } kinds[] = {
        {"thinking", "5", "thinking", "'thinking' must be an object {\"type\": \"enabled\" or \"disabled\", \"budget_tokens\"}, got 5"},
        {"thinking", "\"enabled\"", "thinking",
         "'thinking' must be an object {\"type\": \"enabled\" or \"disabled\", \"budget_tokens\"}, got a string"},
        {"thinking", "{}", "thinking", "'thinking.type' must be \"enabled\" or \"disabled\", got nothing"},
        {"thinking", "{\"type\":null}", "thinking", "'thinking.type' must be \"enabled\" or \"disabled\", got null"},
        {"thinking", "{\"type\":1}", "thinking", "'thinking.type' must be \"enabled\" or \"disabled\", got 1"},
        {"thinking", "{\"type\":\"on\"}", "thinking", "'thinking.type' must be \"enabled\" or \"disabled\", got 'on'"},
        {"thinking", "{\"type\":\"enabled\"}", "thinking",
         "'thinking.budget_tokens' is required when 'thinking.type' is \"enabled\" (the thinking's token budget, less than "
         "'max_tokens'), got nothing"},
        {"thinking", "{\"type\":\"enabled\",\"budget_tokens\":null}", "thinking",
         "'thinking.budget_tokens' is required when 'thinking.type' is \"enabled\" (the thinking's token budget, less than "
         "'max_tokens'), got null"},
        /* max_tokens is 5: the budget is part of it (as Anthropic's API says) */
        {"thinking", "{\"type\":\"enabled\",\"budget_tokens\":5}", "thinking",
         "'thinking.budget_tokens' (5) must be less than 'max_tokens' (5)"},
        {"tool_choice", "\"auto\"", "tool_choice",
         "'tool_choice' must be an object {\"type\": \"auto\"} or {\"type\": \"none\"}, got a string"},
        {"tool_choice", "{\"name\":\"f\"}", "tool_choice", "'tool_choice.type' must be \"auto\" or \"none\", got nothing"},
        {"tool_choice", "{\"type\":\"x\"}", "tool_choice",
         "'tool_choice.type' must be \"auto\" or \"none\" (Anthropic's \"any\" and \"tool\" are not supported here), got 'x'"}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        snprintf(b, sizeof b, "{%s,\"%s\":%s}", ok, kinds[i].field, kinds[i].value);
        refused_msg(WIRE_ANTHROPIC, b, kinds[i].param, kinds[i].want);
    }
    /* a tool_use block's input is the call's arguments object (the Qwen3.5 markup writes each
     * member as a parameter): anything else is refused under the block's own name */
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"system\":\"s\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"t\"},"
                "{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":[1]}]}]}",
                "messages[1].content[1].input", "'messages[1].content[1].input' must be an object (the tool's arguments), got an array");
    /* a tool_result answers a tool_use of the previous (assistant) message */
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                "\"tool_use_id\":\"t1\",\"content\":\"r\"}]}]}", "messages[0].content[0].tool_use_id",
                "'messages[0].content[0].tool_use_id' is 't1', expected the id of a tool_use block in the previous (assistant) message");
    refused_msg(WIRE_ANTHROPIC, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
                "\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\",\"content\":["
                "{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"r\"},{\"type\":\"tool_result\",\"tool_use_id\":\"t2\"}]}]}",
                "messages[2].content[1].tool_use_id",
                "'messages[2].content[1].tool_use_id' is 't2', expected the id of a tool_use block in the previous (assistant) message");
    /* fields the chat parser checks under its own names (stop, reasoning_budget): the message
     * names the field the client sent */
    static const struct { const char *extra, *want; } chat_checked[] = {
        {"\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":-7}",
         "'thinking.budget_tokens' must be an integer in [-1, 16777216], got -7"},
        {"\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":\"9\"}",
         "'thinking.budget_tokens' must be an integer in [-1, 16777216], got a string"},
        {"\"stop_sequences\":[1]", "'stop_sequences[0]' must be a string, got 1"},
        {"\"stop_sequences\":[\"a\",\"b\",null]", "'stop_sequences[2]' must be a string, got null"},
        {"\"stop_sequences\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]",
         "'stop_sequences' has 17 strings, at most 16"},
        {"\"temperature\":3", "'temperature' must be a number in [0, 2], got 3"},
        {"\"top_k\":1.5", "'top_k' must be an integer in [-1, 1000000000], got 1.5"},
        {"\"stream\":1", "'stream' must be true or false, got 1"}};
    for (size_t i = 0; i < sizeof chat_checked / sizeof chat_checked[0]; i++) {
        snprintf(b, sizeof b, "{%s,%s}", ok, chat_checked[i].extra);
        char *msg = anth_error(b);
        if (strcmp(msg, chat_checked[i].want)) fail_msg("%s: message '%s', expected '%s'", b, msg, chat_checked[i].want);
        free(msg);
    }
    {   /* a stop sequence over 256 bytes */
        char big[300];
        memset(big, 'x', 257);
        big[257] = '\0';
        char body[700];
        snprintf(body, sizeof body, "{%s,\"stop_sequences\":[\"a\",\"%s\"]}", ok, big);
        char *msg = anth_error(body);
        assert_string_equal(msg, "'stop_sequences[1]' must be at most 256 bytes, got 257");
        free(msg);
    }
}

static void test_responses_request(void **state) {
    (void)state;
    cJSON *c = to_chat(WIRE_RESPONSES,
        "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"max_output_tokens\":9,\"store\":false,"
        "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}],"
        "\"input\":[{\"role\":\"developer\",\"content\":\"Rules.\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Go\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"r1\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":\"r2\"}]}");
    assert_int_equal(cJSON_GetObjectItem(c, "max_tokens")->valueint, 9);
    const cJSON *m = cJSON_GetObjectItem(c, "messages");
    static const char *roles[6] = {"system", "system", "user", "assistant", "tool", "tool"};
    assert_int_equal(cJSON_GetArraySize(m), 6);
    for (int i = 0; i < 6; i++) assert_string_equal(str(cJSON_GetArrayItem(m, i), "role"), roles[i]);
    assert_string_equal(str(cJSON_GetArrayItem(m, 2), "content"), "Go");
    const cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(m, 3), "tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 2);           /* consecutive calls: one assistant turn */
    assert_string_equal(str(cJSON_GetArrayItem(calls, 1), "id"), "c2");
    assert_string_equal(str(cJSON_GetArrayItem(m, 5), "tool_call_id"), "c2");
    assert_string_equal(str(cJSON_GetArrayItem(m, 5), "content"), "r2");
    cJSON_Delete(c);
    c = to_chat(WIRE_RESPONSES, "{\"input\":\"Hello\"}");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "messages"), 0), "content"), "Hello");
    cJSON_Delete(c);
    refused(WIRE_RESPONSES, "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id");
    refused(WIRE_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}", "text.format");
    refused(WIRE_RESPONSES, "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]");
    refused(WIRE_RESPONSES, "{\"input\":[{\"type\":\"web_search_call\"}]}", "input[0]");
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "input[0]",
                "'input[0].role' must be \"user\", \"assistant\", \"system\" or \"developer\", got 'wizard'");
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"content\":\"x\"}]}", "input[0]",
                "'input[0].role' must be \"user\", \"assistant\", \"system\" or \"developer\", got nothing");
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":5}]}",
                "input[0]", "'input[0].arguments' (function_call) must be a string (the call's arguments as a JSON text), got 5");
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"role\":\"user\",\"content\":\"x\"},{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}",
                "input[1]", "'input[1].call_id' (function_call) must be a string, got nothing");
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":{}}]}",
                "input[0]", "'input[0].output' (function_call_output) must be a string, got an object");
    /* an output answers a function_call item before it */
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"r\"}]}",
                "input[0].call_id", "'input[0].call_id' is 'c1', expected the call_id of a function_call item before it (with only "
                "other outputs between)");
    refused_msg(WIRE_RESPONSES, "{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"r\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":\"r\"}]}",
                "input[2].call_id", "'input[2].call_id' is 'c2', expected the call_id of a function_call item before it (with only "
                "other outputs between)");
    refused(WIRE_RESPONSES, "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\"}]}]}", "input[0].content");
    refused_msg(WIRE_RESPONSES, "{\"input\":[]}", "input",
                "'input' must be a string or a non-empty array of items, got an empty array");
    refused_msg(WIRE_RESPONSES, "{\"input\":5}", "input", "'input' must be a string or a non-empty array of items, got 5");
    refused_msg(WIRE_RESPONSES, "{}", "input", "'input' is required: a string or a non-empty array of items");
}

/* two calls: one with object arguments, one whose arguments are a string that is no object */
static const char *CALLS = "[{\"id\":\"call_0\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                           "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
                           "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"oops\"}}]";

static void test_whole_responses(void **state) {
    (void)state;
    const wire_reply r = {"Hi", 2, "think", 5, CALLS, "tool_calls", false, {10, 7, 4}};
    char *t = wire_response(WIRE_ANTHROPIC, "chatcmpl-abc", 1, "m", &r);
    cJSON *j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(j, "id"), "msg_abc");
    assert_string_equal(str(j, "stop_reason"), "tool_use");
    const cJSON *c = cJSON_GetObjectItem(j, "content");
    assert_int_equal(cJSON_GetArraySize(c), 4);
    assert_string_equal(str(cJSON_GetArrayItem(c, 0), "type"), "thinking");
    assert_string_equal(str(cJSON_GetArrayItem(c, 0), "thinking"), "think");
    assert_string_equal(str(cJSON_GetArrayItem(c, 1), "text"), "Hi");
    const cJSON *tu = cJSON_GetArrayItem(c, 2);
    assert_string_equal(str(tu, "type"), "tool_use");
    assert_string_equal(str(tu, "id"), "call_0");
    assert_string_equal(str(cJSON_GetObjectItem(tu, "input"), "city"), "Paris");
    assert_string_equal(str(cJSON_GetArrayItem(c, 3), "type"), "text");   /* kept, as text */
    assert_string_equal(str(cJSON_GetArrayItem(c, 3), "text"), "{\"name\":\"f\",\"arguments\":\"oops\"}");
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    assert_int_equal(cJSON_GetObjectItem(u, "input_tokens")->valueint, 6);
    assert_int_equal(cJSON_GetObjectItem(u, "cache_read_input_tokens")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(u, "output_tokens")->valueint, 7);
    cJSON_Delete(j);

    t = wire_response(WIRE_RESPONSES, "chatcmpl-abc", 1, "m", &r);
    j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(j, "id"), "resp_abc");
    assert_string_equal(str(j, "status"), "completed");
    const cJSON *o = cJSON_GetObjectItem(j, "output");
    assert_int_equal(cJSON_GetArraySize(o), 4);
    assert_string_equal(str(cJSON_GetArrayItem(o, 0), "type"), "reasoning");
    assert_string_equal(str(cJSON_GetArrayItem(o, 1), "type"), "message");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(o, 1), "content"), 0), "text"), "Hi");
    assert_string_equal(str(cJSON_GetArrayItem(o, 2), "call_id"), "call_0");
    assert_string_equal(str(cJSON_GetArrayItem(o, 3), "arguments"), "oops");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valueint, 17);
    cJSON_Delete(j);

    const wire_reply len = {"abc", 3, NULL, 0, NULL, "length", false, {3, 5, 0}};
    t = wire_response(WIRE_RESPONSES, "chatcmpl-x", 1, "m", &len);
    j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(j, "status"), "incomplete");
    assert_string_equal(str(cJSON_GetObjectItem(j, "incomplete_details"), "reason"), "max_output_tokens");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "output"), 0), "status"), "incomplete");
    cJSON_Delete(j);
    t = wire_response(WIRE_ANTHROPIC, "chatcmpl-x", 1, "m", &len);
    j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(j, "stop_reason"), "max_tokens");
    cJSON_Delete(j);
    const wire_reply stop = {"abc", 3, NULL, 0, NULL, "stop", true, {3, 5, 0}};
    t = wire_response(WIRE_ANTHROPIC, "chatcmpl-x", 1, "m", &stop);
    j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(j, "stop_reason"), "stop_sequence");
    cJSON_Delete(j);
    srv_error e;
    srv_fail(&e, 429, "rate_limit_error", NULL, "busy");
    t = wire_error_json(WIRE_ANTHROPIC, &e);
    j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(j, "type"), "error");
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "type"), "rate_limit_error");
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "message"), "busy");
    cJSON_Delete(j);
    /* a Responses request's max_output_tokens is checked as the chat field it becomes: its error
     * names the client's field */
    srv_fail(&e, 400, "invalid_request_error", "max_tokens", "'max_tokens' must be an integer in [-1, 2147483647], got -5");
    t = wire_error_json(WIRE_RESPONSES, &e);
    j = cJSON_Parse(t);
    free(t);
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "param"), "max_output_tokens");
    assert_string_equal(str(cJSON_GetObjectItem(j, "error"), "message"),
                        "'max_output_tokens' must be an integer in [-1, 2147483647], got -5");
    cJSON_Delete(j);
}

/* The events of a stream: "event: NAME" lines and their data objects, in order. */
static int events(const sbuf *b, char names[][48], cJSON **data, int cap) {
    int n = 0;
    const char *p = b->p;
    while (p && (p = strstr(p, "event: ")) && n < cap) {
        const char *nl = strchr(p, '\n');
        snprintf(names[n], 48, "%.*s", (int)(nl - p - 7), p + 7);
        const char *d = nl + 1 + 6;                  /* "data: " */
        const char *end = strstr(d, "\n\n");
        char *js = strndup(d, (size_t)(end - d));
        data[n++] = cJSON_Parse(js);
        free(js);
        p = end;
    }
    return n;
}

static void test_streams(void **state) {
    (void)state;
    const wire_reply r = {"Hi!", 3, "hm", 2, CALLS, "tool_calls", false, {10, 7, 0}};
    wire_stream ws;
    sbuf out = {0};
    wire_stream_start(&ws, WIRE_ANTHROPIC, "chatcmpl-s", 1, "m", 10, &out);
    wire_stream_text(&ws, true, "hm", 2, &out);
    wire_stream_text(&ws, false, "Hi", 2, &out);
    wire_stream_text(&ws, false, "!", 1, &out);
    wire_stream_end(&ws, &r, &out);
    char names[64][48];
    cJSON *data[64];
    int n = events(&out, names, data, 64);
    static const char *want[] = {"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                                 "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                                 "content_block_start", "content_block_delta", "content_block_stop",
                                 "content_block_start", "content_block_delta", "content_block_stop",
                                 "message_delta", "message_stop"};
    assert_int_equal(n, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < n; i++) {
        assert_string_equal(names[i], want[i]);
        assert_string_equal(str(data[i], "type"), want[i]);
    }
    assert_string_equal(str(cJSON_GetObjectItem(data[1], "content_block"), "type"), "thinking");
    assert_int_equal(cJSON_GetObjectItem(data[4], "index")->valueint, 1);
    assert_string_equal(str(cJSON_GetObjectItem(data[8], "content_block"), "type"), "tool_use");
    assert_int_equal(cJSON_GetObjectItem(data[8], "index")->valueint, 2);
    assert_string_equal(str(cJSON_GetObjectItem(data[9], "delta"), "partial_json"), "{\"city\":\"Paris\"}");
    assert_string_equal(str(cJSON_GetObjectItem(data[11], "content_block"), "type"), "text");   /* the "oops" call */
    assert_string_equal(str(cJSON_GetObjectItem(data[14], "delta"), "stop_reason"), "tool_use");
    for (int i = 0; i < n; i++) cJSON_Delete(data[i]);
    wire_stream_free(&ws);
    out.n = 0;

    wire_stream_start(&ws, WIRE_RESPONSES, "chatcmpl-s", 1, "m", 10, &out);
    wire_stream_text(&ws, true, "hm", 2, &out);
    wire_stream_text(&ws, false, "Hi", 2, &out);
    wire_stream_text(&ws, false, "!", 1, &out);
    wire_stream_end(&ws, &r, &out);
    n = events(&out, names, data, 64);
    static const char *rwant[] = {"response.created", "response.in_progress",
                                  "response.output_item.added", "response.output_item.done",          /* reasoning */
                                  "response.output_item.added", "response.content_part.added",        /* message */
                                  "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                                  "response.content_part.done", "response.output_item.done",
                                  "response.output_item.added", "response.function_call_arguments.delta",
                                  "response.function_call_arguments.done", "response.output_item.done",
                                  "response.output_item.added", "response.function_call_arguments.delta",
                                  "response.function_call_arguments.done", "response.output_item.done",
                                  "response.completed"};
    assert_int_equal(n, (int)(sizeof rwant / sizeof rwant[0]));
    for (int i = 0; i < n; i++) {
        assert_string_equal(names[i], rwant[i]);
        assert_int_equal(cJSON_GetObjectItem(data[i], "sequence_number")->valueint, i);
    }
    assert_int_equal(cJSON_GetObjectItem(data[6], "output_index")->valueint, 1);
    assert_string_equal(str(data[8], "text"), "Hi!");
    assert_int_equal(cJSON_GetObjectItem(data[11], "output_index")->valueint, 2);
    assert_string_equal(str(data[13], "arguments"), "{\"city\":\"Paris\"}");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(data[19], "response"), "output")), 4);
    for (int i = 0; i < n; i++) cJSON_Delete(data[i]);
    wire_stream_free(&ws);
    sbuf_free(&out);
}

int suite_wire(int *n_tests) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_request),
        cmocka_unit_test(test_responses_request),
        cmocka_unit_test(test_whole_responses),
        cmocka_unit_test(test_streams),
    };
    TEST_RUN_SUITE("wire", tests);
}
