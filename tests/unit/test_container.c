/* test_container.c — the .colibri writer and reader: a container with dense tensors and
   routed experts of two layers is written tensor by tensor (in reverse order, in odd-sized
   chunks), reopened and checked against docs/FORMAT.md (layout, alignment, bytes, CRCs);
   then every truncation up to past the metadata, every header/metadata byte flipped, a
   flipped byte in each tensor, and hostile metadata JSON and header fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/common.h"
#include "format/container.h"

static char g_dir[64];
static char g_good[128]; /* the reference container */
static char g_mut[128];  /* scratch file for mutated copies */

/* ---- the reference model ---- */

typedef struct spec {
    const char *name;
    int dtype, n_dims;
    int64_t shape[4];
    int layer, expert;
} spec;

/* Caller order on purpose: experts of layer 1 before layer 0, expert 1 before expert 0,
   and a dense tensor after the experts (it must still be stored first). */
static const spec g_specs[] = {
    {"token_embd.weight", CLB_DT_F32, 2, {8, 16}, -1, -1},
    {"blk.1.ffn_gate.1.weight", CLB_DT_Q8_0, 2, {4, 64}, 1, 1},
    {"blk.1.ffn_up.1.weight", CLB_DT_Q8_0, 2, {4, 64}, 1, 1},
    {"blk.1.ffn_down.1.weight", CLB_DT_Q8_0, 2, {64, 32}, 1, 1},
    {"blk.0.attn_q.weight", CLB_DT_Q8_0, 2, {16, 32}, 0, -1},
    {"blk.0.ffn_gate.1.weight", CLB_DT_F16, 2, {4, 16}, 0, 1},
    {"blk.0.ffn_up.1.weight", CLB_DT_F16, 2, {4, 16}, 0, 1},
    {"blk.0.ffn_down.1.weight", CLB_DT_F16, 2, {16, 4}, 0, 1},
    {"blk.0.ffn_gate.0.weight", CLB_DT_F16, 2, {4, 16}, 0, 0},
    {"blk.0.ffn_up.0.weight", CLB_DT_F16, 2, {4, 16}, 0, 0},
    {"blk.0.ffn_down.0.weight", CLB_DT_F16, 2, {16, 4}, 0, 0},
    {"blk.1.ffn_gate.0.weight", CLB_DT_Q8_0, 2, {4, 64}, 1, 0},
    {"blk.1.ffn_up.0.weight", CLB_DT_Q8_0, 2, {4, 64}, 1, 0},
    {"blk.1.ffn_down.0.weight", CLB_DT_Q8_0, 2, {64, 32}, 1, 0},
    {"blk.1.ffn_gate_inp.weight", CLB_DT_F32, 2, {2, 16}, 1, -1},
    {"output_norm.weight", CLB_DT_F32, 1, {16}, -1, -1},
};
#define N_SPECS ((int)CLB_ARRAY_LEN(g_specs))

static uint8_t pattern(int t, uint64_t j) { return (uint8_t)(t * 37 + j * 11 + (j >> 8)); }

static uint64_t spec_size(const spec *s) {
    uint64_t rows = 1, rb;
    for (int d = 0; d < s->n_dims - 1; d++) rows *= (uint64_t)s->shape[d];
    assert_true(clb_row_bytes(s->dtype, s->shape[s->n_dims - 1], &rb));
    return rows * rb;
}

static void to_desc(const spec *s, clb_cw_tensor *d) {
    memset(d, 0, sizeof *d);
    d->name = s->name;
    d->dtype = s->dtype;
    d->n_dims = s->n_dims;
    memcpy(d->shape, s->shape, sizeof d->shape);
    d->layer = s->layer;
    d->expert = s->expert;
}

static cJSON *make_config(void) {
    cJSON *c = cJSON_Parse("{\"arch\":\"test-moe\",\"n_layer\":2,\"n_expert\":2,\"rope_theta\":10000.5}");
    assert_non_null(c);
    return c;
}

static void write_reference(const char *path) {
    clb_cw_tensor d[N_SPECS];
    for (int i = 0; i < N_SPECS; i++) to_desc(&g_specs[i], &d[i]);
    cJSON *cfg = make_config();
    cJSON *tok = cJSON_Parse("{\"model\":\"bpe\",\"tokens\":[\"a\",\"b\",\"\\u00e9\"]}");
    clb_cwriter *w = clb_cwriter_create(path, cfg, tok, d, N_SPECS);
    cJSON_Delete(cfg); /* copied by the writer */
    cJSON_Delete(tok);
    assert_non_null(w);
    uint8_t chunk[7];
    for (int i = N_SPECS - 1; i >= 0; i--) { /* reverse order, 7-byte chunks */
        uint64_t size = spec_size(&g_specs[i]);
        for (uint64_t j = 0; j < size; j += sizeof chunk) {
            uint64_t n = CLB_MIN((uint64_t)sizeof chunk, size - j);
            for (uint64_t k = 0; k < n; k++) chunk[k] = pattern(i, j + k);
            assert_int_equal(clb_cwriter_write(w, i, chunk, n), COLIBRI_OK);
        }
    }
    assert_int_equal(clb_cwriter_finish(w), COLIBRI_OK);
    clb_cwriter_free(w);
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Opens bytes written to g_mut; a failure must come with a one-line message naming the file. */
static int open_bytes(const void *b, size_t n, clb_container *c) {
    spit(g_mut, b, n);
    clb_clear_error();
    int rc = clb_container_open(g_mut, c);
    if (rc) {
        const char *e = clb_last_error();
        assert_non_null(strstr(e, g_mut));
        assert_null(strchr(e, '\n'));
        assert_null(c->tensors);
        assert_null(c->meta);
    }
    return rc;
}

static void expect_open_fails(const void *b, size_t n, const char *needle) {
    clb_container c;
    int rc = open_bytes(b, n, &c);
    if (rc == COLIBRI_OK) {
        clb_container_close(&c);
        fail_msg("open succeeded; expected an error containing '%s'", needle);
    }
    if (needle && !strstr(clb_last_error(), needle))
        fail_msg("error '%s' does not contain '%s'", clb_last_error(), needle);
}

static int setup(void **state) {
    (void)state;
    strcpy(g_dir, "/tmp/clb_container_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_good, sizeof g_good, "%s/model.colibri", g_dir);
    snprintf(g_mut, sizeof g_mut, "%s/mut.colibri", g_dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char p[160];
    const char *names[] = {"model.colibri", "mut.colibri", "empty.colibri", "big.colibri",
                           "partial.colibri", "partial.colibri.tmp", "bad.colibri"};
    for (size_t i = 0; i < CLB_ARRAY_LEN(names); i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(g_dir);
    return 0;
}

/* ---- layout and contents ---- */

static void test_roundtrip_layout(void **state) {
    (void)state;
    write_reference(g_good);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_good);
    assert_false(clb_file_exists(tmp)); /* renamed into place */

    clb_container c;
    assert_int_equal(clb_container_open(g_good, &c), COLIBRI_OK);
    assert_int_equal(c.version, 1);
    assert_int_equal(c.flags, 0);
    assert_int_equal(c.meta_offset, 128);
    assert_int_equal(c.data_offset % 4096, 0);
    assert_true(c.data_offset >= c.meta_offset + c.meta_size);
    assert_int_equal(c.map.size, c.data_offset + c.data_size);
    assert_int_equal(c.n_tensors, N_SPECS);
    /* config and tokenizer survive */
    assert_string_equal(cJSON_GetObjectItem(c.config, "arch")->valuestring, "test-moe");
    assert_true(cJSON_GetObjectItem(c.config, "rope_theta")->valuedouble == 10000.5);
    assert_non_null(c.tokenizer);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c.tokenizer, "tokens"), 2)->valuestring,
                        "\xc3\xa9");
    /* header bytes */
    assert_memory_equal(c.map.data, "COLIBRI\0", 8);
    for (int i = 68; i < 124; i++) assert_int_equal(c.map.data[i], 0);
    assert_int_equal(clb_rd_u32(c.map.data + 124), crc32(0, c.map.data, 124));
    assert_int_equal(clb_rd_u32(c.map.data + 56), crc32(0, c.map.data + 128, (uInt)c.meta_size));
    assert_int_equal(clb_rd_u32(c.map.data + 64),
                     crc32(0, c.map.data + c.data_offset, (uInt)c.data_size));
    assert_int_equal(clb_rd_u64(c.map.data + 128), c.meta_size - 8);

    uint64_t max_dense_end = 0, min_expert_off = UINT64_MAX;
    for (int i = 0; i < N_SPECS; i++) {
        const spec *s = &g_specs[i];
        const clb_tensor *t = clb_container_find(&c, s->name);
        assert_non_null(t);
        assert_ptr_equal(t, &c.tensors[i]); /* table keeps the caller's order */
        assert_string_equal(t->name, s->name);
        assert_int_equal(t->dtype, s->dtype);
        assert_int_equal(t->n_dims, s->n_dims);
        for (int d = 0; d < s->n_dims; d++) assert_int_equal(t->shape[d], s->shape[d]);
        assert_int_equal(t->size, spec_size(s));
        assert_int_equal(t->layer, s->layer);
        assert_int_equal(t->expert, s->expert);
        assert_true(t->has_crc);
        assert_int_equal(t->offset % 64, 0);
        assert_ptr_equal(t->data, c.map.data + t->offset);
        assert_true(t->offset >= c.data_offset && t->offset + t->size <= c.data_offset + c.data_size);
        for (uint64_t j = 0; j < t->size; j++)
            if (t->data[j] != pattern(i, j)) fail_msg("tensor %s byte %llu differs", s->name, (unsigned long long)j);
        assert_int_equal(t->crc32, crc32(0, t->data, (uInt)t->size));
        if (s->expert < 0) max_dense_end = CLB_MAX(max_dense_end, t->offset + t->size);
        else min_expert_off = CLB_MIN(min_expert_off, t->offset);
    }
    assert_true(max_dense_end <= min_expert_off);
    /* dense tensors in caller order, packed at 64-byte alignment from the data start */
    uint64_t pos = c.data_offset;
    for (int i = 0; i < N_SPECS; i++) {
        if (g_specs[i].expert >= 0) continue;
        assert_int_equal(c.tensors[i].offset, clb_align_up(pos, 64));
        pos = c.tensors[i].offset + c.tensors[i].size;
    }
    /* experts by (layer, expert), each 4096-aligned, its gate/up/down contiguous */
    const char *order[4][3] = {
        {"blk.0.ffn_gate.0.weight", "blk.0.ffn_up.0.weight", "blk.0.ffn_down.0.weight"},
        {"blk.0.ffn_gate.1.weight", "blk.0.ffn_up.1.weight", "blk.0.ffn_down.1.weight"},
        {"blk.1.ffn_gate.0.weight", "blk.1.ffn_up.0.weight", "blk.1.ffn_down.0.weight"},
        {"blk.1.ffn_gate.1.weight", "blk.1.ffn_up.1.weight", "blk.1.ffn_down.1.weight"},
    };
    for (int e = 0; e < 4; e++) {
        const clb_tensor *g = clb_container_find(&c, order[e][0]);
        assert_int_equal((g->offset - c.data_offset) % 4096, 0);
        assert_int_equal(g->offset, clb_align_up(pos, 4096)); /* no gap beyond alignment */
        pos = g->offset + g->size;
        for (int k = 1; k < 3; k++) {
            const clb_tensor *t = clb_container_find(&c, order[e][k]);
            assert_int_equal(t->offset, clb_align_up(pos, 64));
            pos = t->offset + t->size;
        }
    }
    assert_int_equal(pos, c.data_offset + c.data_size);
    assert_null(clb_container_find(&c, "nope"));
    assert_null(clb_container_find(&c, ""));

    uint64_t checked = 0;
    assert_int_equal(clb_container_verify(&c, &checked), COLIBRI_OK);
    assert_int_equal(checked, c.data_size);
    clb_container_close(&c);
    clb_container_close(&c); /* closing twice is harmless */

    /* deterministic: the same input gives the same bytes */
    size_t n1, n2;
    uint8_t *a = slurp(g_good, &n1);
    write_reference(g_mut);
    uint8_t *b = slurp(g_mut, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
}

static void test_empty_container(void **state) {
    (void)state;
    char p[160];
    snprintf(p, sizeof p, "%s/empty.colibri", g_dir);
    clb_cwriter *w = clb_cwriter_create(p, NULL, NULL, NULL, 0);
    assert_non_null(w);
    assert_int_equal(clb_cwriter_finish(w), COLIBRI_OK);
    clb_cwriter_free(w);
    clb_container c;
    assert_int_equal(clb_container_open(p, &c), COLIBRI_OK);
    assert_int_equal(c.n_tensors, 0);
    assert_int_equal(c.data_size, 0);
    assert_null(c.tokenizer);
    assert_true(cJSON_IsObject(c.config));
    assert_int_equal(clb_container_verify(&c, NULL), COLIBRI_OK);
    clb_container_close(&c);
}

static void test_writer_errors(void **state) {
    (void)state;
    char p[160], tmp[170];
    snprintf(p, sizeof p, "%s/partial.colibri", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    clb_cw_tensor d[3];
    to_desc(&g_specs[0], &d[0]); /* f32 [8,16]: 512 bytes */
    to_desc(&g_specs[4], &d[1]); /* q8_0 [16,32] */

    /* bad descriptors: no file is created */
    d[2] = d[0]; /* duplicate name */
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    assert_non_null(strstr(clb_last_error(), "token_embd.weight"));
    d[2].name = "x";
    d[2].dtype = 4; /* not a type */
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    d[2] = d[1];
    d[2].name = "y";
    d[2].shape[1] = 33; /* not whole q8_0 blocks */
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    assert_non_null(strstr(clb_last_error(), "'y'"));
    d[2].shape[1] = 32;
    d[2].shape[0] = 0;
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    d[2].shape[0] = 1;
    d[2].n_dims = 5;
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    d[2].n_dims = 2;
    d[2].expert = 3; /* expert without a layer */
    d[2].layer = -1;
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    d[2].name = "";
    d[2].expert = -1;
    assert_null(clb_cwriter_create(p, NULL, NULL, d, 3));
    assert_false(clb_file_exists(p));
    assert_false(clb_file_exists(tmp));

    clb_cwriter *w = clb_cwriter_create(p, NULL, NULL, d, 2);
    assert_non_null(w);
    assert_true(clb_file_exists(tmp));
    uint8_t buf[600] = {0};
    assert_int_not_equal(clb_cwriter_write(w, 0, buf, 513), COLIBRI_OK); /* more than the size */
    assert_int_not_equal(clb_cwriter_write(w, 2, buf, 1), COLIBRI_OK);   /* no such tensor */
    assert_int_not_equal(clb_cwriter_write(w, -1, buf, 1), COLIBRI_OK);
    assert_int_equal(clb_cwriter_write(w, 0, buf, 500), COLIBRI_OK);
    assert_int_not_equal(clb_cwriter_write(w, 0, buf, 13), COLIBRI_OK);
    assert_int_equal(clb_cwriter_write(w, 0, buf, 12), COLIBRI_OK);
    assert_int_equal(clb_cwriter_finish(w), COLIBRI_ERR_ARG); /* tensor 1 unwritten */
    assert_non_null(strstr(clb_last_error(), "blk.0.attn_q.weight"));
    clb_cwriter_free(w); /* unfinished: the partial file goes away */
    assert_false(clb_file_exists(tmp));
    assert_false(clb_file_exists(p));
    clb_cwriter_free(NULL);
}

/* ---- corruption ---- */

static void test_truncation(void **state) {
    (void)state;
    size_t n;
    uint8_t *b = slurp(g_good, &n);
    uint64_t data_off = clb_rd_u64(b + 32);
    clb_container c;
    /* every length up to past the end of the metadata, then points inside the data */
    for (size_t len = 0; len <= data_off + 1; len++) {
        if (open_bytes(b, len, &c) == COLIBRI_OK) fail_msg("a %zu-byte prefix opened", len);
        if (len >= 128 && !strstr(clb_last_error(), "truncated"))
            fail_msg("length %zu: '%s'", len, clb_last_error());
    }
    size_t pts[] = {data_off + 63, data_off + 64, data_off + 4095, data_off + 4096, n / 2, n - 4096,
                    n - 65, n - 1};
    for (size_t i = 0; i < CLB_ARRAY_LEN(pts); i++) {
        assert_true(pts[i] < n);
        assert_int_equal(open_bytes(b, pts[i], &c), COLIBRI_ERR_FORMAT);
        assert_non_null(strstr(clb_last_error(), "truncated: data section ends at"));
    }
    open_bytes(b, 100, &c);
    assert_non_null(strstr(clb_last_error(), "the file has 100 bytes, the header needs 128"));
    assert_int_equal(open_bytes(b, n, &c), COLIBRI_OK);
    clb_container_close(&c);
    free(b);
}

static void test_flip_header_and_metadata(void **state) {
    (void)state;
    size_t n;
    uint8_t *b = slurp(g_good, &n);
    uint64_t data_off = clb_rd_u64(b + 32);
    clb_container c;
    /* every byte before the data section: header, metadata and the padding after it */
    for (size_t i = 0; i < data_off; i++) {
        b[i] ^= 0x20;
        if (open_bytes(b, n, &c) == COLIBRI_OK) fail_msg("flipping byte %zu went unnoticed", i);
        b[i] ^= 0x20;
    }
    b[200] ^= 1;
    open_bytes(b, n, &c);
    assert_non_null(strstr(clb_last_error(), "metadata is corrupt"));
    b[200] ^= 1;
    b[20] ^= 1;
    open_bytes(b, n, &c);
    assert_non_null(strstr(clb_last_error(), "header is corrupt"));
    b[20] ^= 1;
    b[0] = 'X';
    open_bytes(b, n, &c);
    assert_non_null(strstr(clb_last_error(), "bad magic"));
    free(b);
}

static void test_flip_data(void **state) {
    (void)state;
    size_t n;
    uint8_t *b = slurp(g_good, &n);
    clb_container c;
    assert_int_equal(clb_container_open(g_good, &c), COLIBRI_OK);
    for (int i = 0; i < c.n_tensors; i++) {
        const clb_tensor *t = &c.tensors[i];
        uint64_t at[3] = {t->offset, t->offset + t->size / 2, t->offset + t->size - 1};
        for (int k = 0; k < 3; k++) {
            clb_container m;
            b[at[k]] ^= 0x01;
            assert_int_equal(open_bytes(b, n, &m), COLIBRI_OK); /* data CRCs are not read at open */
            uint64_t checked = 0;
            assert_int_equal(clb_container_verify(&m, &checked), COLIBRI_ERR_CORRUPT);
            char want[160];
            snprintf(want, sizeof want, "tensor '%s' is corrupt", t->name);
            if (!strstr(clb_last_error(), want)) fail_msg("'%s' lacks \"%s\"", clb_last_error(), want);
            clb_container_close(&m);
            b[at[k]] ^= 0x01;
        }
    }
    /* a padding byte between two experts */
    const clb_tensor *down = clb_container_find(&c, "blk.0.ffn_down.0.weight");
    uint64_t gap = down->offset + down->size + 5;
    assert_true(gap < clb_container_find(&c, "blk.0.ffn_gate.1.weight")->offset);
    b[gap] = 0xff;
    clb_container m;
    assert_int_equal(open_bytes(b, n, &m), COLIBRI_OK);
    assert_int_equal(clb_container_verify(&m, NULL), COLIBRI_ERR_CORRUPT);
    assert_non_null(strstr(clb_last_error(), "padding"));
    clb_container_close(&m);
    clb_container_close(&c);
    free(b);
}

/* ---- hostile metadata: files rebuilt with valid CRCs around edited JSON ---- */

typedef struct rebuilt {
    uint8_t *p;
    size_t n;
} rebuilt;

static void fix_header_crc(uint8_t *h) { clb_wr_u32(h + 124, (uint32_t)crc32(0, h, 124)); }

/* A container whose metadata is json (CRCs valid) and whose data section is the
   reference's. */
static rebuilt rebuild(const char *json) {
    size_t n;
    uint8_t *g = slurp(g_good, &n);
    uint64_t goff = clb_rd_u64(g + 32), gsize = clb_rd_u64(g + 40);
    size_t jl = strlen(json), msize = 8 + jl;
    size_t doff = (size_t)clb_align_up(128 + msize, 4096);
    rebuilt r = {calloc(1, doff + gsize), doff + gsize};
    assert_non_null(r.p);
    memcpy(r.p, g, 128);
    clb_wr_u64(r.p + 128, jl);
    memcpy(r.p + 136, json, jl);
    memcpy(r.p + doff, g + goff, gsize);
    clb_wr_u64(r.p + 24, msize);
    clb_wr_u64(r.p + 32, doff);
    clb_wr_u32(r.p + 56, (uint32_t)crc32(0, r.p + 128, (uInt)msize));
    /* tensor count from the JSON, when it has a tensors array */
    cJSON *j = cJSON_Parse(json);
    cJSON *arr = j ? cJSON_GetObjectItem(j, "tensors") : NULL;
    if (cJSON_IsArray(arr)) clb_wr_u64(r.p + 48, (uint64_t)cJSON_GetArraySize(arr));
    cJSON_Delete(j);
    fix_header_crc(r.p);
    free(g);
    return r;
}

static cJSON *good_meta(void) {
    clb_container c;
    assert_int_equal(clb_container_open(g_good, &c), COLIBRI_OK);
    cJSON *m = cJSON_Duplicate(c.meta, 1);
    clb_container_close(&c);
    return m;
}

static cJSON *tensor0(cJSON *m) { return cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tensors"), 0); }

static void expect_json_fails(cJSON *m, const char *needle) {
    char *s = cJSON_PrintUnformatted(m);
    rebuilt r = rebuild(s);
    expect_open_fails(r.p, r.n, needle);
    free(r.p);
    cJSON_free(s);
    cJSON_Delete(m);
}

static void set_num(cJSON *o, const char *k, double v) {
    cJSON_ReplaceItemInObject(o, k, cJSON_CreateNumber(v));
}

static void test_hostile_metadata(void **state) {
    (void)state;
    /* the rebuild itself is sound */
    {
        cJSON *m = good_meta();
        char *s = cJSON_Print(m); /* formatted: whitespace is fine */
        rebuilt r = rebuild(s);
        clb_container c;
        assert_int_equal(open_bytes(r.p, r.n, &c), COLIBRI_OK);
        assert_int_equal(clb_container_verify(&c, NULL), COLIBRI_OK);
        clb_container_close(&c);
        free(r.p);
        cJSON_free(s);
        cJSON_Delete(m);
    }
    cJSON *m;
    uint64_t dsize;
    {
        clb_container c;
        assert_int_equal(clb_container_open(g_good, &c), COLIBRI_OK);
        dsize = c.data_size;
        clb_container_close(&c);
    }
    m = good_meta(); /* offset out of range */
    set_num(tensor0(m), "offset", (double)dsize);
    expect_json_fails(m, "leave the data section");
    m = good_meta(); /* offset + size just past the end */
    set_num(tensor0(m), "offset", (double)(clb_align_up(dsize, 64) - 64));
    expect_json_fails(m, "leave the data section");
    m = good_meta();
    set_num(tensor0(m), "offset", 1e300);
    expect_json_fails(m, "offset");
    m = good_meta(); /* size mismatch */
    set_num(tensor0(m), "size", 1000);
    expect_json_fails(m, "size 1000 does not match its shape [8,16] of f32");
    m = good_meta(); /* huge shape: overflows */
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[1099511627776,1099511627776,1048576]"));
    expect_json_fails(m, "does not match its shape");
    m = good_meta(); /* a dimension beyond 2^53 */
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[1e18,16]"));
    expect_json_fails(m, "dimension 0");
    m = good_meta(); /* negative dimension */
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[-8,-16]"));
    expect_json_fails(m, "dimension 0 is not a positive integer");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[8,0]"));
    expect_json_fails(m, "dimension 1");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[8.5,16]"));
    expect_json_fails(m, "dimension 0");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[1,1,1,8,16]"));
    expect_json_fails(m, "1 to 4 dimensions");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "shape", cJSON_Parse("[]"));
    expect_json_fails(m, "1 to 4 dimensions");
    m = good_meta(); /* q8_0 row not whole blocks */
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tensors"), 4), "shape",
                              cJSON_Parse("[17,16]"));
    expect_json_fails(m, "blocks");
    m = good_meta(); /* duplicate names */
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tensors"), 3), "name",
                              cJSON_CreateString("token_embd.weight"));
    expect_json_fails(m, "tensor name 'token_embd.weight' appears twice");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "name", cJSON_CreateString(""));
    expect_json_fails(m, "has no name");
    m = good_meta();
    cJSON_DeleteItemFromObject(tensor0(m), "name");
    expect_json_fails(m, "has no name");
    m = good_meta(); /* unknown dtype */
    cJSON_ReplaceItemInObject(tensor0(m), "dtype", cJSON_CreateString("q9_9"));
    expect_json_fails(m, "unknown dtype 'q9_9'");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "dtype", cJSON_CreateString("F32")); /* names are lowercase */
    expect_json_fails(m, "unknown dtype 'F32'");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "dtype", cJSON_CreateNumber(0));
    expect_json_fails(m, "no dtype");
    m = good_meta(); /* crc32 field */
    cJSON_ReplaceItemInObject(tensor0(m), "crc32", cJSON_CreateString("ABCDEF01"));
    expect_json_fails(m, "crc32");
    m = good_meta();
    cJSON_ReplaceItemInObject(tensor0(m), "crc32", cJSON_CreateString("abc"));
    expect_json_fails(m, "crc32");
    m = good_meta();
    cJSON_DeleteItemFromObject(tensor0(m), "crc32");
    expect_json_fails(m, "crc32");
    m = good_meta(); /* misaligned offset */
    set_num(tensor0(m), "offset", 8);
    expect_json_fails(m, "not 64-byte aligned");
    m = good_meta(); /* overlapping tensors: output_norm on top of token_embd */
    set_num(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tensors"), N_SPECS - 1), "offset", 64);
    expect_json_fails(m, "overlap");
    m = good_meta(); /* layer / expert */
    cJSON_ReplaceItemInObject(tensor0(m), "layer", cJSON_CreateString("0"));
    expect_json_fails(m, "layer");
    m = good_meta();
    set_num(tensor0(m), "expert", -2);
    expect_json_fails(m, "expert");
    m = good_meta();
    set_num(tensor0(m), "expert", 3);
    expect_json_fails(m, "expert 3 has no layer");
    m = good_meta();
    cJSON_DeleteItemFromObject(tensor0(m), "layer");
    expect_json_fails(m, "layer");
    m = good_meta(); /* document level */
    cJSON_ReplaceItemInObject(m, "format", cJSON_CreateString("gguf"));
    expect_json_fails(m, "format");
    m = good_meta();
    set_num(m, "version", 2);
    expect_json_fails(m, "version");
    m = good_meta();
    cJSON_DeleteItemFromObject(m, "config");
    expect_json_fails(m, "config");
    m = good_meta();
    cJSON_ReplaceItemInObject(m, "tokenizer", cJSON_CreateString("x"));
    expect_json_fails(m, "tokenizer");
    m = good_meta();
    cJSON_ReplaceItemInObject(m, "tensors", cJSON_CreateObject());
    expect_json_fails(m, "tensors");
    m = good_meta();
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(m, "tensors"), 0, cJSON_CreateNumber(1));
    expect_json_fails(m, "tensors[0] is not an object");

    /* raw metadata text */
    const char *bad_json[] = {"", "{", "{\"format\":\"colibri\",", "[1,2]", "{} trailing", "nul\0l"};
    const char *needles[] = {"JSON", "JSON", "JSON", "not a JSON object", "after its JSON", "JSON"};
    for (size_t i = 0; i < CLB_ARRAY_LEN(bad_json); i++) {
        rebuilt r = rebuild(bad_json[i]);
        expect_open_fails(r.p, r.n, needles[i]);
        free(r.p);
    }
    /* tensor count in the header disagrees with the JSON */
    {
        m = good_meta();
        char *s = cJSON_PrintUnformatted(m);
        rebuilt r = rebuild(s);
        clb_wr_u64(r.p + 48, N_SPECS + 1);
        fix_header_crc(r.p);
        expect_open_fails(r.p, r.n, "header says 17 tensors, metadata lists 16");
        free(r.p);
        cJSON_free(s);
        cJSON_Delete(m);
    }
}

/* ---- hostile header fields (header CRC recomputed so the field itself is checked) ---- */

static void test_hostile_header(void **state) {
    (void)state;
    size_t n;
    uint8_t *g = slurp(g_good, &n);
    uint8_t *b = malloc(n);
    assert_non_null(b);
    struct {
        int at, width;
        uint64_t value;
        const char *needle;
    } cases[] = {
        {8, 4, 3, "version 3 is not supported"},
        {8, 4, 2, "neither compressed nor encrypted"}, /* a version 1 file claiming version 2 */
        {12, 4, 1, "unknown header flags 0x00000001"},
        {12, 4, 0x80000000u, "unknown header flags"},
        {16, 8, 136, "metadata offset"},
        {24, 8, 4, "metadata size"},
        {24, 8, UINT64_MAX - 64, "overflows"},
        {24, 8, 1 << 20, "truncated: metadata section ends at"},
        {32, 8, 4096 + 64, "not a multiple of 4096"},
        {32, 8, 0, "data offset"},
        {32, 8, 1ull << 40, "truncated: data section ends at"},
        {40, 8, UINT64_MAX, "overflows"},
        {40, 8, 1ull << 40, "truncated: data section ends at"},
        {48, 8, 0, "header says 0 tensors"},
        {56, 4, 0x12345678, "metadata is corrupt"},
        {60, 4, 64, "data alignment 64"},
        {68, 1, 1, "reserved header byte 68"},
        {100, 1, 0xff, "reserved header byte 100"},
        {123, 1, 1, "reserved header byte 123"},
    };
    for (size_t i = 0; i < CLB_ARRAY_LEN(cases); i++) {
        memcpy(b, g, n);
        if (cases[i].width == 8) clb_wr_u64(b + cases[i].at, cases[i].value);
        else if (cases[i].width == 4) clb_wr_u32(b + cases[i].at, (uint32_t)cases[i].value);
        else b[cases[i].at] = (uint8_t)cases[i].value;
        fix_header_crc(b);
        expect_open_fails(b, n, cases[i].needle);
    }
    /* the data CRC field: open is fine, verify notices */
    memcpy(b, g, n);
    clb_wr_u32(b + 64, clb_rd_u32(b + 64) ^ 1);
    fix_header_crc(b);
    clb_container c;
    assert_int_equal(open_bytes(b, n, &c), COLIBRI_OK);
    assert_int_equal(clb_container_verify(&c, NULL), COLIBRI_ERR_CORRUPT);
    clb_container_close(&c);
    /* not a file */
    assert_int_equal(clb_container_open(g_dir, &c), COLIBRI_ERR_IO);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/missing.colibri", g_dir);
    assert_int_equal(clb_container_open(missing, &c), COLIBRI_ERR_IO);
    assert_non_null(strstr(clb_last_error(), "missing.colibri"));
    free(b);
    free(g);
}

/* clb_crc32 (hardware when available) equals zlib's crc32 on every length and alignment. */
static void test_crc32_matches_zlib(void **state) {
    (void)state;
    size_t n = (5 << 20) + 77;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (uint8_t)(x >> 16);
    }
    for (size_t len = 0; len <= 1100; len++)
        for (size_t off = 0; off < 9; off++) {
            uint32_t init = (uint32_t)(len * 2654435761u + off);
            uint32_t want = (uint32_t)crc32(init, b + off, (uInt)len);
            uint32_t got = clb_crc32(init, b + off, len);
            if (want != got) fail_msg("len %zu off %zu: %08x, zlib %08x", len, off, got, want);
        }
    assert_int_equal(clb_crc32(0, b, n), (uint32_t)crc32(0, b, (uInt)n));
    assert_int_equal(clb_crc32(0, "123456789", 9), 0xcbf43926u); /* the CRC-32 check value */
    /* incremental == one shot */
    uint32_t c = 0;
    for (size_t i = 0; i < n; i += 100003) c = clb_crc32(c, b + i, CLB_MIN((size_t)100003, n - i));
    assert_int_equal(c, clb_crc32(0, b, n));
    free(b);
}

/* A larger container (24 MiB of experts): verify throughput, printed for the record. */
static void test_verify_throughput(void **state) {
    (void)state;
    char p[160];
    snprintf(p, sizeof p, "%s/big.colibri", g_dir);
    enum { N = 24 };
    clb_cw_tensor d[N];
    char names[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "blk.%d.ffn_up.%d.weight", i / 8, i % 8);
        d[i] = (clb_cw_tensor){.name = names[i], .dtype = CLB_DT_F32, .n_dims = 2,
                               .shape = {512, 512}, .layer = i / 8, .expert = i % 8};
    }
    clb_cwriter *w = clb_cwriter_create(p, NULL, NULL, d, N);
    assert_non_null(w);
    size_t rows = 64 * 512 * 4;
    uint8_t *buf = malloc(rows);
    assert_non_null(buf);
    for (int i = 0; i < N; i++)
        for (int r = 0; r < 8; r++) {
            for (size_t k = 0; k < rows; k++) buf[k] = (uint8_t)(k * 7 + (size_t)r + (size_t)i);
            assert_int_equal(clb_cwriter_write(w, i, buf, rows), COLIBRI_OK);
        }
    free(buf);
    assert_int_equal(clb_cwriter_finish(w), COLIBRI_OK);
    clb_cwriter_free(w);
    clb_container c;
    assert_int_equal(clb_container_open(p, &c), COLIBRI_OK);
    uint64_t checked = 0;
    assert_int_equal(clb_container_verify(&c, &checked), COLIBRI_OK); /* warms the page cache */
    double t0 = clb_now();
    int reps = 4;
    for (int r = 0; r < reps; r++) assert_int_equal(clb_container_verify(&c, &checked), COLIBRI_OK);
    double dt = clb_now() - t0;
    assert_int_equal(checked, c.data_size);
    assert_true(checked >= (uint64_t)N * 512 * 512 * 4);
    printf("verify: %.2f GB/s over %.1f MiB\n", (double)checked * reps / dt / 1e9,
           (double)checked / (1 << 20));
    clb_container_close(&c);
    unlink(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_layout),
        cmocka_unit_test(test_empty_container),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_flip_header_and_metadata),
        cmocka_unit_test(test_flip_data),
        cmocka_unit_test(test_hostile_metadata),
        cmocka_unit_test(test_hostile_header),
        cmocka_unit_test(test_crc32_matches_zlib),
        cmocka_unit_test(test_verify_throughput),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
