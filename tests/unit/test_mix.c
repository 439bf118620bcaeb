/* test_mix.c — llama.cpp's quantization mixes (src/model/mix.c): for every oracle fixture
 * model and every mix, the type of every tensor must be the one llama-quantize chose
 * (tests/fixtures/quant/types.json, recorded from llama-quantize's own output files), and
 * mix names parse as llama-quantize spells them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/platform.h"
#include "model/mix.h"
#include "model/source.h"

static void test_mix_names(void **state) {
    (void)state;
    assert_int_equal(clb_mix_from_name("Q4_K_M", true), CLB_MIX_Q4_K_M);
    assert_int_equal(clb_mix_from_name("q5_k_s", true), CLB_MIX_Q5_K_S);
    /* names that are also a single type's are mixes only where not strict */
    assert_int_equal(clb_mix_from_name("Q6_K", true), CLB_MIX_NONE);
    assert_int_equal(clb_mix_from_name("Q6_K", false), CLB_MIX_Q6_K);
    assert_int_equal(clb_mix_from_name("Q4_K", false), CLB_MIX_Q4_K_M); /* llama-quantize's alias */
    assert_int_equal(clb_mix_from_name("IQ4_XS", false), CLB_MIX_IQ4_XS);
    assert_int_equal(clb_mix_from_name("Q2_K_S", false), CLB_MIX_NONE); /* needs an importance matrix */
    assert_non_null(strstr(colibri_last_error(), "importance matrix"));
    assert_int_equal(clb_mix_from_name("Q4_K_X", false), CLB_MIX_NONE);
    assert_non_null(strstr(colibri_last_error(), "unknown mix"));
    assert_int_equal(clb_mix_from_name(NULL, false), CLB_MIX_NONE);
    assert_string_equal(clb_mix_name(CLB_MIX_Q4_K_M), "Q4_K_M");
    assert_string_equal(clb_mix_name(CLB_MIX_Q3_K_M), "Q3_K_M");
}

/* The colibri tensors a GGUF tensor name stands for: itself, or every expert's slice of a
   stacked blk.L.ffn_X_exps.weight. */
static int check_one(const clb_source *s, const int *types, const char *gguf_name, const char *want, int *n_checked) {
    int L = -1, bad = 0;
    char part[32] = {0};
    clb_dtype d;
    int want_dt = -2;
    if (clb_dtype_from_name(want, &d) == 0) want_dt = d;
    const char *ex = strstr(gguf_name, "_exps.weight");
    if (ex && sscanf(gguf_name, "blk.%d.%31[a-z_]", &L, part) == 2 && strlen(part) > 5 &&
        !strcmp(part + strlen(part) - 5, "_exps")) {
        part[strlen(part) - 5] = 0;
        for (int e = 0; e < s->hp.n_expert; e++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s.%d.weight", L, part, e);
            const clb_src_tensor *t = clb_source_find(s, name);
            if (!t) {
                print_message("%s: no tensor %s\n", gguf_name, name);
                return 1;
            }
            int got = types[t - s->tensors];
            if (got < 0) got = t->dtype; /* left as it is: f32 in the fixtures */
            if (got != want_dt) {
                print_message("%s: %s, llama-quantize chose %s\n", name, clb_dtype_name(got), want);
                bad++;
            }
            (*n_checked)++;
        }
        return bad;
    }
    const clb_src_tensor *t = clb_source_find(s, gguf_name);
    if (!t) {
        if (!strcmp(gguf_name, "output.weight") && s->hp.tie_embd) return 0;
        print_message("%s: not in the source\n", gguf_name);
        return 1;
    }
    int got = types[t - s->tensors];
    if (got < 0) got = t->dtype;
    (*n_checked)++;
    if (got != want_dt) {
        print_message("%s: %s, llama-quantize chose %s\n", gguf_name, clb_dtype_name(got), want);
        return 1;
    }
    return 0;
}

static void test_mix_plans_match_llama_quantize(void **state) {
    (void)state;
    char *text = NULL;
    if (clb_read_file("tests/fixtures/quant/types.json", 1 << 24, &text, NULL)) {
        print_message("tests/fixtures/quant/types.json not found (run from the repository root)\n");
        skip();
    }
    cJSON *root = cJSON_Parse(text);
    clb_free(text);
    assert_non_null(root);
    int n_models = 0, n_mixes = 0, n_checked = 0, bad = 0;
    const cJSON *model;
    cJSON_ArrayForEach(model, root) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fixtures/%s/hf", model->string);
        clb_source s;
        assert_int_equal(clb_source_open(dir, &s), COLIBRI_OK);
        int *types = clb_calloc((size_t)s.n_tensors, sizeof *types);
        assert_non_null(types);
        const cJSON *mix;
        cJSON_ArrayForEach(mix, model) {
            int m = clb_mix_from_name(mix->string, false);
            assert_int_not_equal(m, CLB_MIX_NONE);
            assert_int_equal(clb_mix_plan(&s, m, types, NULL), COLIBRI_OK);
            const cJSON *t;
            int before = bad;
            cJSON_ArrayForEach(t, mix) bad += check_one(&s, types, t->string, t->valuestring, &n_checked);
            if (bad != before) print_message("  (model %s, mix %s)\n", model->string, mix->string);
            n_mixes++;
        }
        clb_free(types);
        clb_source_close(&s);
        n_models++;
    }
    cJSON_Delete(root);
    print_message("mix plans: %d models, %d (model, mix) pairs, %d tensors checked, %d differ\n", n_models, n_mixes,
                  n_checked, bad);
    assert_int_equal(bad, 0);
    assert_true(n_models >= 4 && n_mixes >= 4 * 16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mix_names),
        cmocka_unit_test(test_mix_plans_match_llama_quantize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
