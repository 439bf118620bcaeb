/* test_chat.c — chat templates end to end: the Qwen3 fixture renders (byte for byte against
   @huggingface/jinja / Python jinja2 output in tests/fixtures/tokenizers/qwen3/chat.jsonl),
   Llama-2 and Mistral templates with hand-derived expectations, tools / enable_thinking via
   extra variables, the ChatML fallback and error reporting. Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/common.h"
#include "text/chat.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static cJSON *qwen3_config(void) {
    char *s = slurp("tests/fixtures/tokenizers/qwen3/tokenizer_config.json");
    assert_non_null(s);
    cJSON *cfg = cJSON_Parse(s);
    free(s);
    assert_non_null(cfg);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(cfg, "chat_template")));
    return cfg;
}

static void test_qwen3_fixture(void **st) {
    (void)st;
    cJSON *cfg = qwen3_config();
    const char *tpl = cJSON_GetObjectItem(cfg, "chat_template")->valuestring;
    const char *eos = cJSON_GetObjectItem(cfg, "eos_token")->valuestring;
    char *all = slurp("tests/fixtures/tokenizers/qwen3/chat.jsonl");
    assert_non_null(all);
    int n_cases = 0;
    for (char *line = all, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *c = cJSON_Parse(line);
        assert_non_null(c);
        const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
        cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        const char *want = cJSON_GetObjectItem(c, "rendered")->valuestring;
        /* the plain API with role/content pairs */
        size_t n = (size_t)cJSON_GetArraySize(msgs);
        clb_chat_msg *m = calloc(n ? n : 1, sizeof *m);
        for (size_t i = 0; i < n; i++) {
            cJSON *e = cJSON_GetArrayItem(msgs, (int)i);
            m[i].role = cJSON_GetObjectItem(e, "role")->valuestring;
            m[i].content = cJSON_GetObjectItem(e, "content")->valuestring;
        }
        char *out = NULL;
        int rc = clb_chat_render(tpl, m, n, gen, NULL, eos, &out);
        if (rc != COLIBRI_OK || strcmp(out, want) != 0) {
            print_error("%s: rc %d (%s)\n  got  [%s]\n  want [%s]\n", id, rc, clb_last_error(),
                        out ? out : "", want);
            fail();
        }
        clb_free(out);
        /* the same through the extra-variables API: exactly the fixture's context */
        cJSON *extra = cJSON_CreateObject();
        cJSON_AddItemToObject(extra, "messages", cJSON_Duplicate(msgs, 1));
        cJSON_AddStringToObject(extra, "pad_token", "<|endoftext|>");
        rc = clb_chat_render_ex(tpl, NULL, 0, gen, NULL, eos, extra, &out);
        assert_int_equal(rc, COLIBRI_OK);
        assert_string_equal(out, want);
        clb_free(out);
        cJSON_Delete(extra);
        free(m);
        cJSON_Delete(c);
        n_cases++;
    }
    assert_int_equal(n_cases, 10);
    free(all);
    cJSON_Delete(cfg);
}

/* Qwen3 with tools, a tool call, a tool response and enable_thinking=false; expected output
   derived by hand from the template's branches. */
static void test_qwen3_tools(void **st) {
    (void)st;
    cJSON *cfg = qwen3_config();
    const char *tpl = cJSON_GetObjectItem(cfg, "chat_template")->valuestring;
    cJSON *extra = cJSON_Parse(
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
        " \"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", \"properties\":"
        " {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
        " \"enable_thinking\": false,"
        " \"messages\": [{\"role\": \"system\", \"content\": \"S\"},"
        " {\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
        " \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
        " {\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 20}\"}]}");
    assert_non_null(extra);
    const char *want =
        "<|im_start|>system\nS\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
        "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
        "\"Get weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
        "\"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json "
        "object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
        "<|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    char *out = NULL;
    int rc = clb_chat_render_ex(tpl, NULL, 0, true, NULL, "<|im_end|>", extra, &out);
    if (rc != COLIBRI_OK) print_error("%s\n", clb_last_error());
    assert_int_equal(rc, COLIBRI_OK);
    assert_string_equal(out, want);
    clb_free(out);
    cJSON_Delete(extra);
    cJSON_Delete(cfg);
}

/* Meta's Llama-2-chat template (tokenizer_config.json of meta-llama/Llama-2-7b-chat-hf; the
   llama2 fixture folder has none). */
static const char llama2_tpl[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] "
    "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != "
    "false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% "
    "endfor %}";

static void test_llama2(void **st) {
    (void)st;
    const clb_chat_msg conv[] = {{"system", "You are helpful."},
                                 {"user", " Hello "},
                                 {"assistant", "Hi there!\n"},
                                 {"user", "Bye"}};
    char *out = NULL;
    assert_int_equal(clb_chat_render(llama2_tpl, conv, 4, true, "<s>", "</s>", &out), COLIBRI_OK);
    /* system folded into the first user turn; strip() drops the outer spaces of the whole
       content (so " Hello " keeps its leading space after the <</SYS>> block) */
    assert_string_equal(out, "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\n Hello [/INST]"
                             " Hi there! </s><s>[INST] Bye [/INST]");
    clb_free(out);
    /* without a system message */
    assert_int_equal(clb_chat_render(llama2_tpl, conv + 1, 1, false, "<s>", "</s>", &out), COLIBRI_OK);
    assert_string_equal(out, "<s>[INST] Hello [/INST]");
    clb_free(out);
    /* roles that do not alternate: the template's raise_exception message comes through */
    const clb_chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
    out = (char *)1;
    assert_int_equal(clb_chat_render(llama2_tpl, bad, 2, false, "<s>", "</s>", &out), COLIBRI_ERR_FORMAT);
    assert_null(out);
    assert_non_null(strstr(clb_last_error(), "Conversation roles must alternate user/assistant/user/assistant/..."));
    assert_non_null(strstr(clb_last_error(), "chat template"));
}

static void test_mistral(void **st) {
    (void)st;
    static const char tpl[] =
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
        "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
        "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
        "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
        "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
        "roles are supported!') }}{% endif %}{% endfor %}";
    const clb_chat_msg conv[] = {{"user", "Hello"}, {"assistant", "Hi"}, {"user", "Bye"}};
    char *out = NULL;
    assert_int_equal(clb_chat_render(tpl, conv, 3, true, "<s>", "</s>", &out), COLIBRI_OK);
    assert_string_equal(out, "<s>[INST] Hello [/INST]Hi</s>[INST] Bye [/INST]");
    clb_free(out);
    const clb_chat_msg sys[] = {{"system", "x"}};
    assert_int_equal(clb_chat_render(tpl, sys, 1, true, "<s>", "</s>", &out), COLIBRI_ERR_FORMAT);
    assert_non_null(strstr(clb_last_error(), "Conversation roles must alternate"));
    /* bos_token NULL is undefined: prints as nothing */
    assert_int_equal(clb_chat_render(tpl, conv, 1, true, NULL, "</s>", &out), COLIBRI_OK);
    assert_string_equal(out, "[INST] Hello [/INST]");
    clb_free(out);
}

static void test_llama3_trim_filter(void **st) {
    (void)st;
    /* Meta-Llama-3-Instruct: `message['content'] | trim` binds before the `+` chain */
    static const char tpl[] =
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
        "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
        "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
        "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
    const clb_chat_msg conv[] = {{"system", "  Be brief. "}, {"user", "Hi\n"}};
    char *out = NULL;
    assert_int_equal(clb_chat_render(tpl, conv, 2, true, "<|begin_of_text|>", "<|eot_id|>", &out), COLIBRI_OK);
    assert_string_equal(out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n");
    clb_free(out);
}

static void test_default_template(void **st) {
    (void)st;
    const clb_chat_msg conv[] = {{"system", "S"}, {"user", "U \xC3\xA9"}};
    char *out = NULL;
    assert_int_equal(clb_chat_render(NULL, conv, 2, true, NULL, NULL, &out), COLIBRI_OK);
    assert_string_equal(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU \xC3\xA9<|im_end|>\n"
                             "<|im_start|>assistant\n");
    clb_free(out);
    assert_int_equal(clb_chat_render(clb_chat_default_template(), conv, 1, false, NULL, NULL, &out), COLIBRI_OK);
    assert_string_equal(out, "<|im_start|>system\nS<|im_end|>\n");
    clb_free(out);
    assert_int_equal(clb_chat_render(NULL, NULL, 0, false, NULL, NULL, &out), COLIBRI_OK);
    assert_string_equal(out, "");
    clb_free(out);
}

static void test_bad_args(void **st) {
    (void)st;
    char *out = NULL;
    const clb_chat_msg nul[] = {{"user", NULL}};
    assert_int_equal(clb_chat_render(NULL, nul, 1, false, NULL, NULL, &out), COLIBRI_ERR_ARG);
    assert_int_equal(clb_chat_render(NULL, NULL, 2, false, NULL, NULL, &out), COLIBRI_ERR_ARG);
    assert_int_equal(clb_chat_render(NULL, NULL, 0, false, NULL, NULL, NULL), COLIBRI_ERR_ARG);
    cJSON *arr = cJSON_CreateArray();
    assert_int_equal(clb_chat_render_ex(NULL, NULL, 0, false, NULL, NULL, arr, &out), COLIBRI_ERR_ARG);
    cJSON_Delete(arr);
    assert_int_equal(clb_chat_render("{% if %}", NULL, 0, false, NULL, NULL, &out), COLIBRI_ERR_FORMAT);
    assert_null(out);
    assert_non_null(strstr(clb_last_error(), "syntax error"));
}

/* gpt-oss's harmony template as published (openai/gpt-oss-20b chat_template.jinja) against
   Python jinja2 in transformers' environment (tools/tokfixtures/make_harmony_chat.py wrote
   tests/fixtures/tokenizers/gpt-oss/chat.jsonl): reasoning_effort, model_identity,
   builtin_tools, developer instructions, function tools over every schema shape the
   template's recursive macro handles (its whitespace quirks and namespace scoping included),
   thinking + tool_calls + tool results, the training form, and its raise_exception errors.
   The fixture pins strftime_now to its date; the engine uses the clock, so the expected
   "Current date:" line takes today's date (read before and after rendering: a render across
   midnight is retried). */
static void test_harmony_fixture(void **st) {
    (void)st;
    char *tpl = slurp("tests/fixtures/tokenizers/gpt-oss/chat_template.jinja");
    char *all = slurp("tests/fixtures/tokenizers/gpt-oss/chat.jsonl");
    assert_non_null(tpl);
    assert_non_null(all);
    int n_cases = 0, n_errors = 0;
    for (char *line = all, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *c = cJSON_Parse(line);
        assert_non_null(c);
        const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
        bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        cJSON *vars = cJSON_GetObjectItem(c, "vars"), *want_j = cJSON_GetObjectItem(c, "rendered");
        char *out = NULL, day0[32], day1[32];
        int rc;
        do {
            time_t t = time(NULL);
            struct tm tmv;
            strftime(day0, sizeof day0, "%Y-%m-%d", localtime_r(&t, &tmv));
            rc = clb_chat_render_ex(tpl, NULL, 0, gen, "<|startoftext|>", "<|return|>", vars, &out);
            t = time(NULL);
            strftime(day1, sizeof day1, "%Y-%m-%d", localtime_r(&t, &tmv));
            if (strcmp(day0, day1)) clb_free(out), out = NULL;
        } while (strcmp(day0, day1));
        if (!cJSON_IsString(want_j)) { /* the template refuses: the same message */
            const char *err = cJSON_GetObjectItem(c, "error")->valuestring;
            if (rc == COLIBRI_OK || !strstr(clb_last_error(), err)) {
                print_error("%s: rc %d [%s], want the error [%s]\n", id, rc, rc ? clb_last_error() : out, err);
                fail();
            }
            n_errors++;
        } else {
            const char *w = want_j->valuestring, *d = strstr(w, "Current date: 2025-08-05");
            assert_non_null(d);
            size_t pre = (size_t)(d - w) + strlen("Current date: ");
            char *want = malloc(strlen(w) + 32);
            snprintf(want, strlen(w) + 32, "%.*s%s%s", (int)pre, w, day0, d + strlen("Current date: 2025-08-05"));
            if (rc != COLIBRI_OK || strcmp(out, want) != 0) {
                size_t k = 0;
                while (out && out[k] && out[k] == want[k]) k++;
                print_error("%s: rc %d (%s), first difference at byte %zu\n  got  [%s]\n  want [%s]\n", id, rc,
                            rc ? clb_last_error() : "", k, out ? out + k : "", want + k);
                fail();
            }
            free(want);
        }
        clb_free(out);
        cJSON_Delete(c);
        n_cases++;
    }
    assert_int_equal(n_cases, 13);
    assert_int_equal(n_errors, 3);
    free(all);
    free(tpl);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_fixture), cmocka_unit_test(test_qwen3_tools),
        cmocka_unit_test(test_llama2),        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_llama3_trim_filter), cmocka_unit_test(test_default_template),
        cmocka_unit_test(test_bad_args),          cmocka_unit_test(test_harmony_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
