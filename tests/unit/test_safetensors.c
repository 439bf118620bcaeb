/* test_safetensors.c — safetensors files and Hugging Face directories generated here
   (single file, sharded with model.safetensors.index.json), the real fixtures, and hostile
   inputs: truncation at every length, byte flips, bad headers, bad indexes. Run from the
   repository root (the fixture test is skipped elsewhere). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/common.h"
#include "format/safetensors.h"

static char g_dir[64];

static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rm_tree(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int setup(void **state) {
    (void)state;
    strcpy(g_dir, "/tmp/clb_st_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    rm_tree(g_dir);
    return 0;
}

/* ---- building files ---- */

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

/* u64 header length, header (space-padded to a multiple of 8 when pad), data. */
static buf st_bytes(const char *header, const void *data, size_t dlen, int pad) {
    size_t hl = strlen(header), hp = pad ? (hl + 7) / 8 * 8 : hl;
    buf b = {malloc(8 + hp + dlen + 1), 8 + hp + dlen};
    assert_non_null(b.p);
    clb_wr_u64(b.p, hp);
    memcpy(b.p + 8, header, hl);
    memset(b.p + 8 + hl, ' ', hp - hl);
    if (dlen) memcpy(b.p + 8 + hp, data, dlen);
    return b;
}

static void write_file(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *s) {
    write_file(dir, name, s, strlen(s));
}

static void write_st(const char *dir, const char *name, const char *header, const void *data,
                     size_t dlen) {
    buf b = st_bytes(header, data, dlen, 1);
    write_file(dir, name, b.p, b.n);
    free(b.p);
}

static char *make_dir(const char *name) {
    static char paths[32][256];
    static int k;
    char *p = paths[k++ % 32];
    snprintf(p, 256, "%s/%s", g_dir, name);
    assert_int_equal(mkdir(p, 0755), 0);
    return p;
}

/* The reference tensors: a F32 [2,3] matrix, F16 [4], BF16 [2,2] and a F32 scalar. */
typedef struct ref_data {
    float a[6];
    uint16_t b[4], c[4];
    float s;
} ref_data;

static const char *REF_HEADER =
    "{\"c.norm\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[32,40]},"
    "\"__metadata__\":{\"format\":\"pt\"},"
    "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[40,44]},"
    "\"b.bias\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]}}";

static ref_data ref_values(void) {
    ref_data r;
    for (int i = 0; i < 6; i++) r.a[i] = 0.5f * (float)i - 1.0f;
    const uint16_t b[4] = {0x3c00, 0xc000, 0x3800, 0x0000}; /* 1, -2, 0.5, 0 */
    const uint16_t c[4] = {0x3f80, 0x4040, 0xbf80, 0x3e80}; /* 1, 3, -1, 0.25 */
    memcpy(r.b, b, sizeof b);
    memcpy(r.c, c, sizeof c);
    r.s = 7.0f;
    return r;
}

static void check_ref_tensors(const clb_hf_dir *d, int file_index, const uint8_t *map_data) {
    ref_data r = ref_values();
    const clb_tensor *a = clb_hf_find(d, "a.weight"), *b = clb_hf_find(d, "b.bias"),
                     *c = clb_hf_find(d, "c.norm"), *s = clb_hf_find(d, "s");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_non_null(s);
    assert_int_equal(a->dtype, CLB_DT_F32);
    assert_int_equal(a->n_dims, 2);
    assert_int_equal(a->shape[0], 2);
    assert_int_equal(a->shape[1], 3);
    assert_int_equal(a->size, 24);
    assert_int_equal(a->file_index, file_index);
    assert_false(a->has_crc);
    assert_int_equal(a->layer, -1);
    assert_int_equal(a->expert, -1);
    assert_ptr_equal(a->data, map_data + a->offset);
    float fa[6];
    memcpy(fa, a->data, sizeof fa);
    for (int i = 0; i < 6; i++) assert_true(fa[i] == r.a[i]);
    assert_int_equal(b->dtype, CLB_DT_F16);
    assert_int_equal(b->n_dims, 1);
    assert_int_equal(b->shape[0], 4);
    assert_true(clb_fp16_to_fp32(clb_rd_u16(b->data + 2)) == -2.0f);
    assert_true(clb_fp16_to_fp32(clb_rd_u16(b->data + 4)) == 0.5f);
    assert_int_equal(c->dtype, CLB_DT_BF16);
    assert_int_equal(c->n_dims, 2);
    assert_true(clb_bf16_to_fp32(clb_rd_u16(c->data + 2)) == 3.0f);
    assert_true(clb_bf16_to_fp32(clb_rd_u16(c->data + 6)) == 0.25f);
    assert_int_equal(s->n_dims, 1); /* a scalar reads as shape [1] */
    assert_int_equal(s->shape[0], 1);
    float fs;
    memcpy(&fs, s->data, 4);
    assert_true(fs == 7.0f);
    assert_true(clb_tensor_size_consistent(a) && clb_tensor_size_consistent(b) &&
                clb_tensor_size_consistent(c) && clb_tensor_size_consistent(s));
}

/* ---- good inputs ---- */

static void test_single_file(void **state) {
    (void)state;
    char *dir = make_dir("single");
    write_text(dir, "config.json", "{\"model_type\":\"llama\",\"hidden_size\":4}");
    write_text(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\"}}\n");
    write_text(dir, "tokenizer_config.json", "{\"bos_token\":\"<s>\"}");
    ref_data r = ref_values();
    write_st(dir, "model.safetensors", REF_HEADER, &r, sizeof r);

    clb_hf_dir d;
    assert_int_equal(clb_hf_open(dir, &d), COLIBRI_OK);
    assert_string_equal(cJSON_GetObjectItem(d.config, "model_type")->valuestring, "llama");
    assert_string_equal(d.tokenizer_json, "{\"model\":{\"type\":\"BPE\"}}\n");
    assert_string_equal(d.tokenizer_config, "{\"bos_token\":\"<s>\"}");
    assert_int_equal(d.n_maps, 1);
    assert_int_equal(d.n_tensors, 4);
    size_t hl = (strlen(REF_HEADER) + 7) / 8 * 8;
    assert_int_equal(d.maps[0].size, 8 + hl + sizeof r);
    const clb_tensor *c = clb_hf_find(&d, "c.norm");
    assert_int_equal(c->offset, 8 + hl + 32); /* absolute: header end + data_offsets[0] */
    check_ref_tensors(&d, 0, d.maps[0].data);
    assert_null(clb_hf_find(&d, "__metadata__"));
    assert_null(clb_hf_find(&d, "missing"));
    clb_hf_close(&d);
    clb_hf_close(&d); /* twice is harmless */
}

static void test_sharded(void **state) {
    (void)state;
    char *dir = make_dir("sharded");
    write_text(dir, "config.json", "{\"model_type\":\"mixtral\"}");
    ref_data r = ref_values();
    /* shard 1: a.weight, b.bias; shard 2: c.norm, s and d.weight */
    uint8_t d1[32], d2[24];
    memcpy(d1, r.a, 24);
    memcpy(d1 + 24, r.b, 8);
    memcpy(d2, r.c, 8);
    memcpy(d2 + 8, &r.s, 4);
    float dw[3] = {10, 20, 30};
    memcpy(d2 + 12, dw, 12);
    write_st(dir, "model-00001-of-00002.safetensors",
             "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
             "\"b.bias\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]}}",
             d1, sizeof d1);
    write_st(dir, "model-00002-of-00002.safetensors",
             "{\"__metadata__\":{},\"d.weight\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]},"
             "\"c.norm\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
             "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]}}",
             d2, sizeof d2);
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{\"total_size\":56},\"weight_map\":{"
               "\"a.weight\":\"model-00001-of-00002.safetensors\","
               "\"c.norm\":\"model-00002-of-00002.safetensors\","
               "\"b.bias\":\"model-00001-of-00002.safetensors\","
               "\"s\":\"model-00002-of-00002.safetensors\","
               "\"d.weight\":\"model-00002-of-00002.safetensors\"}}");
    clb_hf_dir d;
    assert_int_equal(clb_hf_open(dir, &d), COLIBRI_OK);
    assert_null(d.tokenizer_json);
    assert_null(d.tokenizer_config);
    assert_int_equal(d.n_maps, 2); /* each shard opened once */
    assert_int_equal(d.n_tensors, 5);
    assert_non_null(strstr(d.maps[0].path, "model-00001-of-00002.safetensors"));
    assert_non_null(strstr(d.maps[1].path, "model-00002-of-00002.safetensors"));
    const clb_tensor *a = clb_hf_find(&d, "a.weight"), *c = clb_hf_find(&d, "c.norm");
    const clb_tensor *w = clb_hf_find(&d, "d.weight");
    assert_int_equal(a->file_index, 0);
    assert_int_equal(c->file_index, 1);
    assert_int_equal(w->file_index, 1);
    assert_ptr_equal(a->data, d.maps[0].data + a->offset);
    assert_ptr_equal(c->data, d.maps[1].data + c->offset);
    float got[3];
    memcpy(got, w->data, 12);
    assert_true(got[0] == 10 && got[1] == 20 && got[2] == 30);
    assert_true(clb_bf16_to_fp32(clb_rd_u16(c->data + 2)) == 3.0f);
    float fa[6];
    memcpy(fa, a->data, sizeof fa);
    for (int i = 0; i < 6; i++) assert_true(fa[i] == r.a[i]);
    clb_hf_close(&d);
}

static void test_fixtures(void **state) {
    (void)state;
    const char *dirs[] = {"tests/fixtures/llama-dense/hf", "tests/fixtures/mixtral/hf",
                          "tests/fixtures/olmoe/hf", "tests/fixtures/qwen2moe/hf"};
    if (!clb_is_dir(dirs[0])) skip();
    for (size_t k = 0; k < CLB_ARRAY_LEN(dirs); k++) {
        clb_hf_dir d;
        if (clb_hf_open(dirs[k], &d) != COLIBRI_OK) fail_msg("%s: %s", dirs[k], clb_last_error());
        assert_true(d.n_tensors > 10);
        assert_non_null(d.tokenizer_json);
        assert_non_null(d.tokenizer_config);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(d.config, "model_type")));
        uint64_t total = 0;
        for (int i = 0; i < d.n_tensors; i++) {
            const clb_tensor *t = &d.tensors[i];
            assert_ptr_equal(clb_hf_find(&d, t->name), t);
            assert_true(t->offset + t->size <= d.maps[t->file_index].size);
            assert_true(clb_tensor_size_consistent(t));
            total += t->size;
        }
        const clb_tensor *e = clb_hf_find(&d, "model.embed_tokens.weight");
        assert_non_null(e);
        assert_int_equal(e->dtype, CLB_DT_F32);
        assert_int_equal(e->n_dims, 2);
        assert_int_equal(e->shape[0], cJSON_GetObjectItem(d.config, "vocab_size")->valueint);
        assert_int_equal(e->shape[1], cJSON_GetObjectItem(d.config, "hidden_size")->valueint);
        /* the tensors fill the data buffer exactly */
        uint64_t hl = clb_rd_u64(d.maps[0].data);
        assert_int_equal(total, d.maps[0].size - 8 - hl);
        clb_hf_close(&d);
    }
}

/* ---- hostile single files (parsed from heap copies of exact size, so ASan sees any
   read past the end) ---- */

static int parse_bytes(const void *p, size_t n, clb_tensor **t, int *nt) {
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n) memcpy(copy, p, n);
    clb_map m = {.data = n ? copy : NULL, .size = n, .fd = -1, .path = (char *)"mem.safetensors"};
    clb_clear_error();
    int n0 = *nt;
    int rc = clb_safetensors_parse(&m, 3, t, nt);
    if (rc == COLIBRI_OK) {
        /* every new tensor inside the buffer; clear the pointers into the freed copy */
        for (int i = n0; i < *nt; i++) {
            assert_true((*t)[i].offset + (*t)[i].size <= n);
            assert_ptr_equal((*t)[i].data, copy + (*t)[i].offset);
            (*t)[i].data = NULL;
        }
    } else {
        assert_non_null(strstr(clb_last_error(), "mem.safetensors"));
    }
    free(copy);
    return rc;
}

static void free_tensors(clb_tensor *t, int n) {
    for (int i = 0; i < n; i++) free(t[i].name);
    free(t);
}

static void expect_parse_fails(const char *header, size_t dlen, int status, const char *needle) {
    uint8_t data[256] = {0};
    assert_true(dlen <= sizeof data);
    buf b = st_bytes(header, data, dlen, 0);
    clb_tensor *t = NULL;
    int n = 0;
    int rc = parse_bytes(b.p, b.n, &t, &n);
    if (rc == COLIBRI_OK) fail_msg("parsed: %s", header);
    if (status) assert_int_equal(rc, status);
    assert_int_equal(n, 0);
    if (!strstr(clb_last_error(), needle))
        fail_msg("error '%s' does not contain '%s'", clb_last_error(), needle);
    free_tensors(t, n);
    free(b.p);
}

static void test_parse_appends(void **state) {
    (void)state;
    ref_data r = ref_values();
    buf b = st_bytes(REF_HEADER, &r, sizeof r, 1);
    clb_tensor *t = NULL;
    int n = 0;
    assert_int_equal(parse_bytes(b.p, b.n, &t, &n), COLIBRI_OK);
    assert_int_equal(n, 4);
    assert_int_equal(parse_bytes(b.p, b.n, &t, &n), COLIBRI_OK); /* appends */
    assert_int_equal(n, 8);
    assert_int_equal(t[5].file_index, 3);
    assert_string_equal(t[4].name, t[0].name);
    /* a failing parse leaves the table as it was */
    buf bad = st_bytes("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"y\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[4,5]}}",
                       &r, 8, 0);
    assert_int_not_equal(parse_bytes(bad.p, bad.n, &t, &n), COLIBRI_OK);
    assert_int_equal(n, 8);
    assert_string_equal(t[7].name, t[3].name);
    free_tensors(t, n);
    free(bad.p);
    free(b.p);
}

static void test_hostile_headers(void **state) {
    (void)state;
    const char *F = "\"dtype\":\"F32\",\"shape\":[2,3]";
    char h[512];
    /* too short for the length, length past the end */
    clb_tensor *t = NULL;
    int n = 0;
    uint8_t tiny[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    for (size_t len = 0; len < 8; len++) {
        assert_int_equal(parse_bytes(tiny, len, &t, &n), COLIBRI_ERR_FORMAT);
        assert_non_null(strstr(clb_last_error(), "truncated"));
    }
    assert_int_equal(parse_bytes(tiny, 8, &t, &n), COLIBRI_ERR_FORMAT);
    assert_non_null(strstr(clb_last_error(), "header length 2 exceeds the file (8 bytes)"));
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    assert_int_equal(parse_bytes(huge, sizeof huge, &t, &n), COLIBRI_ERR_FORMAT);
    assert_non_null(strstr(clb_last_error(), "exceeds the file"));
    assert_int_equal(n, 0);

    expect_parse_fails("{\"a\":", 0, COLIBRI_ERR_FORMAT, "not valid JSON");
    expect_parse_fails("", 0, COLIBRI_ERR_FORMAT, "not valid JSON");
    expect_parse_fails("{} {}", 0, COLIBRI_ERR_FORMAT, "after its JSON");
    expect_parse_fails("[1,2]", 0, COLIBRI_ERR_FORMAT, "not a JSON object");
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,24]}}", F);
    expect_parse_fails(h, 20, COLIBRI_ERR_FORMAT, "data_offsets end at 24 but the data buffer has 20 bytes");
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[24,0]}}", F);
    expect_parse_fails(h, 24, COLIBRI_ERR_FORMAT, "end before they begin");
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,20]}}", F);
    expect_parse_fails(h, 24, COLIBRI_ERR_FORMAT, "span 20 bytes but 6 F32 elements need 24");
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,24]},\"b\":{%s,\"data_offsets\":[16,40]}}", F, F);
    expect_parse_fails(h, 40, COLIBRI_ERR_FORMAT, "tensors 'a' and 'b' overlap");
    snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,24]},\"b\":{%s,\"data_offsets\":[0,24]}}", F, F);
    expect_parse_fails(h, 24, COLIBRI_ERR_FORMAT, "overlap");
    expect_parse_fails("{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16,
                       COLIBRI_ERR_UNSUPPORTED, "tensor 'ids' has dtype I64");
    expect_parse_fails("{\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                       COLIBRI_ERR_UNSUPPORTED, "F8_E4M3");
    expect_parse_fails("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                       COLIBRI_ERR_UNSUPPORTED, "dtype f32");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                       COLIBRI_ERR_UNSUPPORTED, "5 dimensions");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]}}", 4,
                       COLIBRI_ERR_UNSUPPORTED, "dimension 1 is 0");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                       COLIBRI_ERR_FORMAT, "dimension 0 is not a non-negative integer");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                       COLIBRI_ERR_FORMAT, "dimension 0");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                       "\"data_offsets\":[0,4]}}",
                       4, COLIBRI_ERR_FORMAT, "shape overflows");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 4,
                       COLIBRI_ERR_FORMAT, "data_offsets is not [begin, end]");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
                       COLIBRI_ERR_FORMAT, "data_offsets");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                       COLIBRI_ERR_FORMAT, "data_offsets");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", 4,
                       COLIBRI_ERR_FORMAT, "data_offsets");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                       COLIBRI_ERR_FORMAT, "data_offsets");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, COLIBRI_ERR_FORMAT, "data_offsets");
    expect_parse_fails("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, COLIBRI_ERR_FORMAT,
                       "tensor 'a': no dtype");
    expect_parse_fails("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, COLIBRI_ERR_FORMAT,
                       "no shape");
    expect_parse_fails("{\"a\":5}", 4, COLIBRI_ERR_FORMAT, "tensor 'a': entry is not an object");
    expect_parse_fails("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                       COLIBRI_ERR_FORMAT, "empty name");
    free_tensors(t, n);
}

static void test_truncation_and_flips(void **state) {
    (void)state;
    ref_data r = ref_values();
    buf b = st_bytes(REF_HEADER, &r, sizeof r, 1);
    clb_tensor *t = NULL;
    int n = 0;
    for (size_t len = 0; len < b.n; len++) {
        if (parse_bytes(b.p, len, &t, &n) == COLIBRI_OK) fail_msg("a %zu-byte prefix parsed", len);
        assert_int_equal(n, 0);
    }
    /* any byte of the header changed to a few characters: never out of bounds */
    const uint8_t subst[] = {'0', '9', '"', '{', ']', ',', '-', 0, 0xff};
    size_t hl = (size_t)clb_rd_u64(b.p);
    int ok = 0, failed = 0;
    for (size_t i = 0; i < 8 + hl; i++) {
        uint8_t keep = b.p[i];
        for (size_t s = 0; s < sizeof subst; s++) {
            b.p[i] = subst[s];
            if (parse_bytes(b.p, b.n, &t, &n) == COLIBRI_OK) ok++;
            else failed++;
            free_tensors(t, n);
            t = NULL;
            n = 0;
        }
        b.p[i] = keep;
    }
    assert_true(failed > ok);
    free(b.p);
}

/* ---- hostile directories ---- */

static void expect_open_fails(const char *dir, const char *needle) {
    clb_hf_dir d;
    clb_clear_error();
    int rc = clb_hf_open(dir, &d);
    if (rc == COLIBRI_OK) {
        clb_hf_close(&d);
        fail_msg("%s opened; expected '%s'", dir, needle);
    }
    assert_null(d.tensors);
    assert_null(d.config);
    assert_null(d.maps);
    if (!strstr(clb_last_error(), needle))
        fail_msg("error '%s' does not contain '%s'", clb_last_error(), needle);
}

static void sharded_dir(const char *dir, const char *index) {
    ref_data r = ref_values();
    write_text(dir, "config.json", "{}");
    write_st(dir, "s1.safetensors", "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",
             r.a, 24);
    write_st(dir, "s2.safetensors", "{\"b.bias\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
             r.b, 8);
    write_text(dir, "model.safetensors.index.json", index);
}

static void test_hf_dir_errors(void **state) {
    (void)state;
    char msg[300];
    char *dir = make_dir("nothing");
    snprintf(msg, sizeof msg, "%s: no config.json", dir);
    expect_open_fails(dir, msg);
    char notdir[300];
    snprintf(notdir, sizeof notdir, "%s/missing-dir", g_dir);
    expect_open_fails(notdir, "not a directory");

    write_text(dir, "config.json", "{\"a\":");
    expect_open_fails(dir, "config.json: malformed JSON");
    write_text(dir, "config.json", "[]");
    expect_open_fails(dir, "config.json: not a JSON object");
    write_text(dir, "config.json", "{}");
    expect_open_fails(dir, "no model.safetensors or model.safetensors.index.json");

    /* a bad single file names the file and the problem */
    write_st(dir, "model.safetensors", "{\"ids\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             "abcd", 4);
    expect_open_fails(dir, "model.safetensors: tensor 'ids' has dtype I32");
    write_st(dir, "model.safetensors",
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             "abcdefgh", 8);
    expect_open_fails(dir, "tensor 'x' appears twice");

    const char *s1 = "\"s1.safetensors\"", *s2 = "\"s2.safetensors\"";
    char idx[600];
    snprintf(idx, sizeof idx, "{\"weight_map\":{\"a.weight\":%s,\"b.bias\":%s,\"c\":\"s3.safetensors\"}}", s1, s2);
    sharded_dir(make_dir("missing-shard"), idx);
    expect_open_fails(g_dir, "no config.json");
    snprintf(msg, sizeof msg, "%s/missing-shard", g_dir);
    expect_open_fails(msg, "missing-shard: shard s3.safetensors is missing");
    snprintf(idx, sizeof idx, "{\"weight_map\":{\"a.weight\":%s,\"b.bias\":%s,\"zz\":%s}}", s1, s2, s2);
    char *d = make_dir("not-in-shard");
    sharded_dir(d, idx);
    expect_open_fails(d, "tensor 'zz' is not in shard s2.safetensors");
    snprintf(idx, sizeof idx, "{\"weight_map\":{\"a.weight\":%s,\"b.bias\":%s}}", s2, s2);
    d = make_dir("wrong-shard");
    sharded_dir(d, idx);
    expect_open_fails(d, "tensor 'a.weight' is not in shard s2.safetensors");
    snprintf(idx, sizeof idx, "{\"weight_map\":{\"a.weight\":\"../s1.safetensors\"}}");
    d = make_dir("escape");
    sharded_dir(d, idx);
    expect_open_fails(d, "not a shard file name");
    d = make_dir("no-map");
    sharded_dir(d, "{\"metadata\":{}}");
    expect_open_fails(d, "no \"weight_map\" object");
    d = make_dir("empty-map");
    sharded_dir(d, "{\"weight_map\":{}}");
    expect_open_fails(d, "weight_map is empty");
    d = make_dir("bad-index");
    sharded_dir(d, "{\"weight_map\":");
    expect_open_fails(d, "model.safetensors.index.json: malformed JSON");
    d = make_dir("number-entry");
    sharded_dir(d, "{\"weight_map\":{\"a.weight\":1}}");
    expect_open_fails(d, "weight_map entry 'a.weight'");
    /* the same tensor in two shards */
    d = make_dir("dup-shards");
    sharded_dir(d, "{\"weight_map\":{\"a.weight\":\"s1.safetensors\",\"b.bias\":\"s3.safetensors\"}}");
    ref_data r = ref_values();
    write_st(d, "s3.safetensors", "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}",
             r.a, 24);
    expect_open_fails(d, "tensor 'a.weight' appears in both s1.safetensors and s3.safetensors");
    /* a shard that is itself broken is named */
    d = make_dir("broken-shard");
    sharded_dir(d, "{\"weight_map\":{\"a.weight\":\"s1.safetensors\",\"b.bias\":\"s2.safetensors\"}}");
    write_file(d, "s2.safetensors", "\x10\0\0\0\0\0\0\0{}", 10);
    expect_open_fails(d, "s2.safetensors: header length 16 exceeds the file (10 bytes)");
    /* and the well-formed variant of the same directory opens */
    sharded_dir(d, "{\"weight_map\":{\"a.weight\":\"s1.safetensors\",\"b.bias\":\"s2.safetensors\"}}");
    clb_hf_dir ok;
    assert_int_equal(clb_hf_open(d, &ok), COLIBRI_OK);
    assert_int_equal(ok.n_maps, 2);
    assert_int_equal(clb_hf_find(&ok, "b.bias")->file_index, 1);
    clb_hf_close(&ok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_parse_appends),
        cmocka_unit_test(test_hostile_headers),
        cmocka_unit_test(test_truncation_and_flips),
        cmocka_unit_test(test_hf_dir_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
