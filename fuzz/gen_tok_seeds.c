/* gen_tok_seeds.c: writes the seed corpora of fuzz_tok and fuzz_hf (so no seed files are
 * committed). usage: gen_tok_seeds tok|hf DIR
 * tok: texts with special tokens, invalid and split UTF-8, and chat inputs in fuzz_tok's layout
 * (a control byte, then NUL-separated fields: tools, then per message content, reasoning and
 * tool calls) with valid tools and tool-call JSON. hf: fuzz_hf inputs (a control byte, then
 * tokenizer.json, then after a NUL tokenizer_config.json): the smallest byte-level BPE tokenizer
 * that imports (the 256 byte tokens of the GPT-2 byte alphabet, a merge, added tokens), with and
 * without a config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int put(const char *dir, const char *name, const char *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gen_tok_seeds: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* The UTF-8 of code point c (< 0x800) at p; returns its length. */
static int utf8(unsigned c, char *p) {
    if (c < 0x80) { p[0] = (char)c; return 1; }
    p[0] = (char)(0xC0 | c >> 6);
    p[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

/* GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes for
 * U+0100 upwards in byte order. */
static unsigned byte_char(unsigned b) {
    const int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (printable) return b;
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) k++;
    return 0x100 + k;
}

/* A JSON string of code point c ("\"" and "\\" escaped). */
static size_t json_char(unsigned c, char *p) {
    size_t n = 0;
    p[n++] = '"';
    if (c == '"' || c == '\\') p[n++] = '\\';
    n += (size_t)utf8(c, p + n);
    p[n++] = '"';
    return n;
}

static size_t hf_json(char *p, int with_added) {
    size_t n = (size_t)sprintf(p, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (unsigned b = 0; b < 256; b++) {
        if (b) p[n++] = ',';
        n += json_char(byte_char(b), p + n);
        n += (size_t)sprintf(p + n, ":%u", b);
    }
    n += (size_t)sprintf(p + n, ",\"ab\":256,\"Ġa\":257},\"merges\":[\"a b\",[\"Ġ\",\"a\"]]}");
    if (with_added)
        n += (size_t)sprintf(p + n, ",\"added_tokens\":[{\"id\":258,\"content\":\"<|endoftext|>\",\"special\":true},"
                                    "{\"id\":259,\"content\":\"<think>\",\"special\":false}]");
    p[n++] = '}';
    return n;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "tok") != 0 && strcmp(argv[1], "hf") != 0)) {
        fprintf(stderr, "usage: gen_tok_seeds tok|hf DIR\n");
        return 2;
    }
    const char *dir = argv[2];
    int rc = 0;
    if (strcmp(argv[1], "hf") == 0) {
        static char hf[16384];
        for (int v = 0; v < 3; v++) {
            size_t n = 0;
            hf[n++] = (char)(v == 2 ? 1 : v * 2);   /* 0: no config; 2: qwen35 pre; 1: with a config */
            n += hf_json(hf + n, v > 0);
            if (v == 2) {
                hf[n++] = '\0';
                n += (size_t)sprintf(hf + n, "{\"bos_token\":null,\"eos_token\":{\"content\":\"<|endoftext|>\"},"
                                             "\"add_bos_token\":false,\"chat_template\":\"{{ messages }}\"}");
            }
            char name[32];
            snprintf(name, sizeof name, "hf%d", v);
            rc |= put(dir, name, hf, n);
        }
        return rc;
    }
#define TEXT(s) {s, sizeof s - 1}
    static const struct { const char *p; size_t n; } texts[] = {
        TEXT("\x07Hello world, it's 2024!\n\tdone"),
        TEXT("\x01<|im_start|>user\nhi <think>x</think><|im_end|>"),
        TEXT("\x06\xC3\xA9\xE2\x82\xF0\x9F\x98\x80 \xFF\xFE split \xE2"),
        TEXT("\x00   many   spaces\r\n\r\n123456789 don't"),
    };
#undef TEXT
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "text%zu", i);
        rc |= put(dir, name, texts[i].p, texts[i].n);
    }
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]";
    static const char calls[] = "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":[1,2.5,true,null]}}]";
    char buf[4096];
    for (int ctl = 0; ctl < 4; ctl++) {
        size_t n = 0;
        buf[n++] = (char)(ctl * 0x55 | 0x28);   /* the tools bit, and roles that vary with ctl */
        const char *fields[] = {tools, "You are terse.", "", "", "What is the weather?", "", "",
                                "Let me check.", "The user wants weather.", calls, "{\"temp\": 21}", "", ""};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            if (f) buf[n++] = '\0';
            memcpy(buf + n, fields[f], strlen(fields[f]));
            n += strlen(fields[f]);
        }
        char name[32];
        snprintf(name, sizeof name, "chat%d", ctl);
        rc |= put(dir, name, buf, n);
    }
    return rc;
}
