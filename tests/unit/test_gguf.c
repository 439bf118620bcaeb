/* test_gguf.c — the GGUF reader on files written here (every value type, nested arrays,
   v2/v3, custom alignment, f32/q8_0 tensors), on hostile files (truncations, huge counts,
   bad fields) and on the real fixtures. Run from the repository root. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/common.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

/* ---- a small GGUF writer ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void w_bytes(wbuf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void w_u8(wbuf *b, uint8_t v) { w_bytes(b, &v, 1); }
static void w_u16(wbuf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    w_bytes(b, x, 2);
}
static void w_u32(wbuf *b, uint32_t v) {
    uint8_t x[4];
    clb_wr_u32(x, v);
    w_bytes(b, x, 4);
}
static void w_u64(wbuf *b, uint64_t v) {
    uint8_t x[8];
    clb_wr_u64(x, v);
    w_bytes(b, x, 8);
}
static void w_f32(wbuf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    w_u32(b, u);
}
static void w_f64(wbuf *b, double f) {
    uint64_t u;
    memcpy(&u, &f, 8);
    w_u64(b, u);
}
static void w_str(wbuf *b, const char *s) {
    w_u64(b, strlen(s));
    w_bytes(b, s, strlen(s));
}
static void w_key(wbuf *b, const char *key, uint32_t type) {
    w_str(b, key);
    w_u32(b, type);
}
static void w_header(wbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    w_bytes(b, "GGUF", 4);
    w_u32(b, version);
    w_u64(b, n_tensors);
    w_u64(b, n_kv);
}
static void w_tensor(wbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                     uint32_t type, uint64_t offset) {
    w_str(b, name);
    w_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) w_u64(b, ne[i]);
    w_u32(b, type);
    w_u64(b, offset);
}
static void w_pad(wbuf *b, size_t align) {
    while (b->n % align) w_u8(b, 0);
}

/* Parses a copy of exactly n bytes (so ASan sees any read past the end). *copy must be
   freed after clb_gguf_close. */
static int parse_copy(const uint8_t *p, size_t n, clb_gguf *g, uint8_t **copy) {
    *copy = malloc(n ? n : 1);
    assert_non_null(*copy);
    if (n) memcpy(*copy, p, n);
    clb_map m = {.data = n ? *copy : NULL, .size = n, .fd = -1};
    return clb_gguf_parse(&m, g);
}

/* Expects parsing to fail with status and an error message containing `needle`. */
static void expect_fail(const wbuf *b, int status, const char *needle) {
    clb_gguf g;
    uint8_t *copy;
    clb_clear_error();
    int rc = parse_copy(b->p, b->n, &g, &copy);
    if (rc != status || !strstr(clb_last_error(), needle))
        fail_msg("want status %d with '%s', got %d: %s", status, needle, rc, clb_last_error());
    assert_int_equal(g.n_kv, 0); /* a failed parse leaves nothing to free */
    assert_null(g.kv);
    assert_null(g.tensors);
    clb_gguf_close(&g);
    free(copy);
}

/* ---- the sample file: every value type + two tensors ---- */

typedef struct sample_pos {
    size_t n_tensors, n_kv, key0_len, u8_arr_n, str_arr_n, nest_arr_n, t0_name_len, t0_ndims,
        t0_ne0, t0_type, t0_off, t1_off, infos_end, data_start;
} sample_pos;

enum { T0_NE0 = 8, T0_NE1 = 3, T1_NE0 = 64, T1_NE1 = 2 };

/* alignment 0 = no general.alignment key (default 32) */
static void build_sample(wbuf *b, uint32_t version, uint32_t alignment, sample_pos *pos) {
    size_t align = alignment ? alignment : 32;
    uint64_t n_kv = 21 + (alignment ? 1 : 0);
    w_bytes(b, "GGUF", 4);
    w_u32(b, version);
    pos->n_tensors = b->n;
    w_u64(b, 2);
    pos->n_kv = b->n;
    w_u64(b, n_kv);
    pos->key0_len = b->n;
    w_key(b, "general.architecture", CLB_GGUF_STRING);
    w_str(b, "llama");
    if (alignment) {
        w_key(b, "general.alignment", CLB_GGUF_UINT32);
        w_u32(b, alignment);
    }
    w_key(b, "t.u8", CLB_GGUF_UINT8), w_u8(b, 200);
    w_key(b, "t.i8", CLB_GGUF_INT8), w_u8(b, (uint8_t)-100);
    w_key(b, "t.u16", CLB_GGUF_UINT16), w_u16(b, 60000);
    w_key(b, "t.i16", CLB_GGUF_INT16), w_u16(b, (uint16_t)-30000);
    w_key(b, "t.u32", CLB_GGUF_UINT32), w_u32(b, 4000000000u);
    w_key(b, "t.i32", CLB_GGUF_INT32), w_u32(b, (uint32_t)-2000000000);
    w_key(b, "t.f32", CLB_GGUF_FLOAT32), w_f32(b, 1.5f);
    w_key(b, "t.bool", CLB_GGUF_BOOL), w_u8(b, 1);
    w_key(b, "t.str", CLB_GGUF_STRING), w_str(b, "hello, world");
    w_key(b, "t.u64", CLB_GGUF_UINT64), w_u64(b, (1ull << 63) + 5); /* does not fit i64 */
    w_key(b, "t.i64", CLB_GGUF_INT64), w_u64(b, (uint64_t)-(1ll << 40));
    w_key(b, "t.f64", CLB_GGUF_FLOAT64), w_f64(b, -3.25e100);
    w_key(b, "t.u64small", CLB_GGUF_UINT64), w_u64(b, 123456789012ull);
    /* arrays */
    w_key(b, "a.u8", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_UINT8);
    pos->u8_arr_n = b->n;
    w_u64(b, 3), w_u8(b, 1), w_u8(b, 2), w_u8(b, 255);
    w_key(b, "a.i32", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_INT32), w_u64(b, 2);
    w_u32(b, (uint32_t)-7), w_u32(b, 70000);
    w_key(b, "a.f32", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_FLOAT32), w_u64(b, 2);
    w_f32(b, 0.25f), w_f32(b, -2.0f);
    w_key(b, "a.str", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_STRING);
    pos->str_arr_n = b->n;
    w_u64(b, 3), w_str(b, "alpha"), w_str(b, ""), w_str(b, "gamma");
    /* [[1, 2], [], [["x"]]] : an array of arrays (the third is itself nested) */
    w_key(b, "a.nested", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_ARRAY);
    pos->nest_arr_n = b->n;
    w_u64(b, 3);
    w_u32(b, CLB_GGUF_INT16), w_u64(b, 2), w_u16(b, 1), w_u16(b, 2);
    w_u32(b, CLB_GGUF_UINT64), w_u64(b, 0);
    w_u32(b, CLB_GGUF_ARRAY), w_u64(b, 1), w_u32(b, CLB_GGUF_STRING), w_u64(b, 1), w_str(b, "x");
    w_key(b, "a.empty", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_STRING), w_u64(b, 0);
    w_key(b, "a.bool", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_BOOL), w_u64(b, 2);
    w_u8(b, 0), w_u8(b, 1);
    /* tensors: f32 [3][8] at 0, q8_0 [2][64] after it */
    uint64_t ne0[2] = {T0_NE0, T0_NE1}, ne1[2] = {T1_NE0, T1_NE1};
    uint64_t t1_off = clb_align_up(T0_NE0 * T0_NE1 * 4, align);
    pos->t0_name_len = b->n;
    w_str(b, "tok.f32");
    pos->t0_ndims = b->n;
    w_u32(b, 2);
    pos->t0_ne0 = b->n;
    w_u64(b, ne0[0]), w_u64(b, ne0[1]);
    pos->t0_type = b->n;
    w_u32(b, CLB_DT_F32);
    pos->t0_off = b->n;
    w_u64(b, 0);
    w_str(b, "blk.0.q8");
    w_u32(b, 2), w_u64(b, ne1[0]), w_u64(b, ne1[1]), w_u32(b, CLB_DT_Q8_0);
    pos->t1_off = b->n;
    w_u64(b, t1_off);
    pos->infos_end = b->n;
    w_pad(b, align);
    pos->data_start = b->n;
    for (int i = 0; i < T0_NE0 * T0_NE1; i++) w_f32(b, (float)i * 0.5f);
    w_pad(b, align);
    for (int i = 0; i < T1_NE1 * (T1_NE0 / 32) * 34; i++) w_u8(b, (uint8_t)(i * 7));
}

static void check_sample(const clb_gguf *g, uint32_t version, uint32_t alignment,
                         const sample_pos *pos) {
    int64_t i;
    double f;
    bool bl;
    int et;
    assert_int_equal(g->version, version);
    assert_int_equal(g->n_kv, 21 + (alignment ? 1 : 0));
    assert_int_equal(g->alignment, alignment ? alignment : 32);
    assert_int_equal(g->data_offset, pos->data_start);
    assert_int_equal(g->data_offset % g->alignment, 0);

    char *s = clb_gguf_get_str(g, "general.architecture");
    assert_string_equal(s, "llama");
    clb_free(s);
    s = clb_gguf_get_str(g, "t.str");
    assert_string_equal(s, "hello, world");
    clb_free(s);
    assert_null(clb_gguf_get_str(g, "t.u8"));    /* wrong type */
    assert_null(clb_gguf_get_str(g, "missing")); /* missing */

    assert_true(clb_gguf_get_i64(g, "t.u8", &i)), assert_int_equal(i, 200);
    assert_true(clb_gguf_get_i64(g, "t.i8", &i)), assert_int_equal(i, -100);
    assert_true(clb_gguf_get_i64(g, "t.u16", &i)), assert_int_equal(i, 60000);
    assert_true(clb_gguf_get_i64(g, "t.i16", &i)), assert_int_equal(i, -30000);
    assert_true(clb_gguf_get_i64(g, "t.u32", &i)), assert_int_equal(i, 4000000000ll);
    assert_true(clb_gguf_get_i64(g, "t.i32", &i)), assert_int_equal(i, -2000000000ll);
    assert_true(clb_gguf_get_i64(g, "t.i64", &i)), assert_true(i == -(1ll << 40));
    assert_true(clb_gguf_get_i64(g, "t.u64small", &i)), assert_true(i == 123456789012ll);
    assert_false(clb_gguf_get_i64(g, "t.u64", &i)); /* 2^63 + 5 does not fit */
    assert_int_equal(clb_gguf_find(g, "t.u64")->val.v.u, (1ull << 63) + 5);
    assert_false(clb_gguf_get_i64(g, "t.f32", &i));
    assert_false(clb_gguf_get_i64(g, "t.bool", &i));
    assert_false(clb_gguf_get_i64(g, "t.str", &i));
    assert_false(clb_gguf_get_i64(g, "missing", &i));

    assert_true(clb_gguf_get_f64(g, "t.f32", &f)), assert_true(f == 1.5);
    assert_true(clb_gguf_get_f64(g, "t.f64", &f)), assert_true(f == -3.25e100);
    assert_false(clb_gguf_get_f64(g, "t.u8", &f));
    assert_true(clb_gguf_get_bool(g, "t.bool", &bl)), assert_true(bl);
    assert_false(clb_gguf_get_bool(g, "t.u8", &bl));
    assert_int_equal(clb_gguf_find(g, "t.u32")->val.type, CLB_GGUF_UINT32);

    /* numeric arrays */
    const clb_gguf_kv *kv = clb_gguf_find(g, "a.u8");
    assert_int_equal(clb_gguf_arr_n(g, "a.u8", &et), 3);
    assert_int_equal(et, CLB_GGUF_UINT8);
    assert_true(clb_gguf_arr_i64(kv, 2, &i)), assert_int_equal(i, 255);
    assert_false(clb_gguf_arr_i64(kv, 3, &i)); /* out of range */
    assert_false(clb_gguf_arr_f64(kv, 0, &f)); /* type mismatch */
    kv = clb_gguf_find(g, "a.i32");
    assert_true(clb_gguf_arr_i64(kv, 0, &i)), assert_int_equal(i, -7);
    assert_true(clb_gguf_arr_i64(kv, 1, &i)), assert_int_equal(i, 70000);
    kv = clb_gguf_find(g, "a.f32");
    assert_true(clb_gguf_arr_f64(kv, 1, &f)), assert_true(f == -2.0);
    assert_false(clb_gguf_arr_i64(kv, 0, &i));
    kv = clb_gguf_find(g, "a.bool");
    assert_int_equal(kv->val.v.arr.n, 2);
    assert_int_equal(kv->val.v.arr.data[1], 1);
    assert_int_equal(clb_gguf_arr_n(g, "t.u8", &et), 0); /* not an array */
    assert_int_equal(et, -1);
    assert_int_equal(clb_gguf_arr_n(g, "missing", NULL), 0);
    assert_false(clb_gguf_arr_i64(NULL, 0, &i));

    /* string arrays */
    assert_int_equal(clb_gguf_arr_n(g, "a.str", &et), 3);
    assert_int_equal(et, CLB_GGUF_STRING);
    kv = clb_gguf_find(g, "a.str");
    assert_int_equal(kv->val.v.arr.strs[0].len, 5);
    assert_memory_equal(kv->val.v.arr.strs[0].ptr, "alpha", 5);
    assert_int_equal(kv->val.v.arr.strs[1].len, 0);
    assert_memory_equal(kv->val.v.arr.strs[2].ptr, "gamma", 5);
    assert_false(clb_gguf_arr_i64(kv, 0, &i));
    assert_int_equal(clb_gguf_arr_n(g, "a.empty", &et), 0);
    assert_int_equal(et, CLB_GGUF_STRING);

    /* nested arrays */
    kv = clb_gguf_find(g, "a.nested");
    assert_int_equal(kv->val.v.arr.type, CLB_GGUF_ARRAY);
    assert_int_equal(kv->val.v.arr.n, 3);
    const clb_gguf_value *it = kv->val.v.arr.items;
    assert_int_equal(it[0].type, CLB_GGUF_ARRAY);
    assert_int_equal(it[0].v.arr.type, CLB_GGUF_INT16);
    assert_int_equal(it[0].v.arr.n, 2);
    assert_int_equal(clb_rd_u16(it[0].v.arr.data + 2), 2);
    assert_int_equal(it[1].v.arr.type, CLB_GGUF_UINT64);
    assert_int_equal(it[1].v.arr.n, 0);
    assert_int_equal(it[2].v.arr.type, CLB_GGUF_ARRAY);
    assert_int_equal(it[2].v.arr.n, 1);
    const clb_gguf_value *inner = &it[2].v.arr.items[0];
    assert_int_equal(inner->v.arr.type, CLB_GGUF_STRING);
    assert_int_equal(inner->v.arr.n, 1);
    assert_memory_equal(inner->v.arr.strs[0].ptr, "x", 1);

    /* tensors */
    assert_int_equal(g->n_tensors, 2);
    const clb_tensor *t = clb_gguf_find_tensor(g, "tok.f32");
    assert_non_null(t);
    assert_int_equal(t->dtype, CLB_DT_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], T0_NE1);
    assert_int_equal(t->shape[1], T0_NE0);
    assert_int_equal(t->size, T0_NE0 * T0_NE1 * 4);
    assert_int_equal(t->offset, g->data_offset);
    assert_ptr_equal(t->data, g->map.data + t->offset);
    assert_int_equal(t->layer, -1);
    assert_int_equal(t->expert, -1);
    float v5;
    memcpy(&v5, t->data + 5 * 4, 4);
    assert_true(v5 == 2.5f);
    assert_true(clb_tensor_size_consistent(t));
    t = clb_gguf_find_tensor(g, "blk.0.q8");
    assert_non_null(t);
    assert_int_equal(t->dtype, CLB_DT_Q8_0);
    assert_int_equal(t->shape[0], T1_NE1);
    assert_int_equal(t->shape[1], T1_NE0);
    assert_int_equal(t->size, T1_NE1 * 2 * 34);
    assert_int_equal(t->offset % g->alignment, 0);
    assert_int_equal(t->offset, g->data_offset + clb_align_up(T0_NE0 * T0_NE1 * 4, g->alignment));
    assert_int_equal(t->data[3], 21);
    assert_true(clb_tensor_size_consistent(t));
    assert_null(clb_gguf_find_tensor(g, "nope"));
    assert_string_equal(clb_gguf_type_name(CLB_GGUF_FLOAT64), "float64");
    assert_string_equal(clb_gguf_type_name(99), "unknown");
}

static void test_sample_versions_and_alignment(void **state) {
    (void)state;
    static const uint32_t versions[] = {2, 3};
    static const uint32_t aligns[] = {0, 32, 64, 256, 8};
    for (size_t v = 0; v < CLB_ARRAY_LEN(versions); v++) {
        for (size_t a = 0; a < CLB_ARRAY_LEN(aligns); a++) {
            wbuf b = {0};
            sample_pos pos;
            build_sample(&b, versions[v], aligns[a], &pos);
            clb_gguf g;
            uint8_t *copy;
            int rc = parse_copy(b.p, b.n, &g, &copy);
            if (rc) fail_msg("v%u align %u: %s", versions[v], aligns[a], clb_last_error());
            check_sample(&g, versions[v], aligns[a], &pos);
            clb_gguf_close(&g);
            clb_gguf_close(&g); /* closing twice is harmless */
            free(copy);
            free(b.p);
        }
    }
}

static void test_open_file(void **state) {
    (void)state;
    wbuf b = {0};
    sample_pos pos;
    build_sample(&b, 3, 64, &pos);
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b.p, b.n), (ssize_t)b.n);
    close(fd);
    clb_gguf g;
    assert_int_equal(clb_gguf_open(path, &g), COLIBRI_OK);
    check_sample(&g, 3, 64, &pos);
    assert_true(g.map.fd >= 0);
    clb_gguf_close(&g);
    assert_int_equal(g.map.fd, -1);
    /* an opened file's errors name the path */
    b.p[0] = 'X';
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b.p, b.n), (ssize_t)b.n);
    close(fd);
    assert_int_equal(clb_gguf_open(path, &g), COLIBRI_ERR_FORMAT);
    assert_non_null(strstr(clb_last_error(), path));
    assert_non_null(strstr(clb_last_error(), "magic"));
    unlink(path);
    assert_int_equal(clb_gguf_open(path, &g), COLIBRI_ERR_IO);
    assert_int_equal(clb_gguf_open("tests", &g), COLIBRI_ERR_IO);
    free(b.p);
}

/* Every strict prefix of the sample must fail cleanly (never succeed, never over-read). */
static void test_truncated_everywhere(void **state) {
    (void)state;
    wbuf b = {0};
    sample_pos pos;
    build_sample(&b, 3, 0, &pos);
    for (size_t n = 0; n < b.n; n++) {
        clb_gguf g;
        uint8_t *copy;
        int rc = parse_copy(b.p, n, &g, &copy);
        if (rc != COLIBRI_ERR_FORMAT) fail_msg("prefix of %zu bytes: rc %d", n, rc);
        assert_true(clb_last_error()[0] != 0);
        assert_null(g.kv);
        clb_gguf_close(&g);
        free(copy);
    }
    free(b.p);
}

/* Copies the sample and overwrites 4 or 8 bytes at pos. */
static void sample_patch(wbuf *out, size_t at, uint64_t v, int width) {
    sample_pos pos;
    memset(out, 0, sizeof *out);
    build_sample(out, 3, 0, &pos);
    if (width == 4) clb_wr_u32(out->p + at, (uint32_t)v);
    else clb_wr_u64(out->p + at, v);
}

static void test_huge_counts(void **state) {
    (void)state;
    sample_pos pos;
    wbuf tmp = {0};
    build_sample(&tmp, 3, 0, &pos);
    free(tmp.p);
    static const uint64_t huge[] = {1ull << 63, UINT64_MAX, 1ull << 40, 1ull << 32};
    for (size_t h = 0; h < CLB_ARRAY_LEN(huge); h++) {
        wbuf b;
        sample_patch(&b, pos.n_kv, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "metadata count");
        free(b.p);
        sample_patch(&b, pos.n_tensors, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "tensor count");
        free(b.p);
        sample_patch(&b, pos.key0_len, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "metadata key 0");
        free(b.p);
        sample_patch(&b, pos.u8_arr_n, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "a.u8");
        free(b.p);
        sample_patch(&b, pos.str_arr_n, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "a.str");
        free(b.p);
        sample_patch(&b, pos.nest_arr_n, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "a.nested");
        free(b.p);
        sample_patch(&b, pos.t0_name_len, huge[h], 8);
        expect_fail(&b, COLIBRI_ERR_FORMAT, "name of tensor 0");
        free(b.p);
    }
    /* a count one too large for the bytes that follow still fails */
    wbuf b;
    sample_patch(&b, pos.n_tensors, 3, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "");
    free(b.p);
    sample_patch(&b, pos.str_arr_n, 4, 8); /* 4th string is read from the next key's bytes */
    expect_fail(&b, COLIBRI_ERR_FORMAT, "");
    free(b.p);
}

static void test_bad_header(void **state) {
    (void)state;
    sample_pos pos;
    wbuf b = {0};
    build_sample(&b, 3, 0, &pos);
    memcpy(b.p, "GGUG", 4);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "bad magic");
    free(b.p);
    sample_patch(&b, 4, 1, 4);
    expect_fail(&b, COLIBRI_ERR_UNSUPPORTED, "version 1");
    free(b.p);
    sample_patch(&b, 4, 4, 4);
    expect_fail(&b, COLIBRI_ERR_UNSUPPORTED, "version 4");
    free(b.p);
    sample_patch(&b, 4, 0, 4);
    expect_fail(&b, COLIBRI_ERR_UNSUPPORTED, "version 0");
    free(b.p);
    sample_patch(&b, 4, 3u << 24, 4);
    expect_fail(&b, COLIBRI_ERR_UNSUPPORTED, "big-endian");
    free(b.p);
    /* empty map and NULL map */
    clb_gguf g;
    clb_map m = {.data = NULL, .size = 0, .fd = -1};
    assert_int_equal(clb_gguf_parse(&m, &g), COLIBRI_ERR_FORMAT);
    assert_int_equal(clb_gguf_parse(NULL, &g), COLIBRI_ERR_ARG);
    clb_gguf_close(&g);
    clb_gguf_close(NULL);
}

static void test_bad_tensor_info(void **state) {
    (void)state;
    sample_pos pos;
    wbuf b = {0};
    build_sample(&b, 3, 0, &pos);
    free(b.p);
    sample_patch(&b, pos.t0_ndims, 0, 4);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "n_dims 0");
    free(b.p);
    sample_patch(&b, pos.t0_ndims, 5, 4);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "n_dims 5");
    free(b.p);
    sample_patch(&b, pos.t0_ne0, 0, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "'tok.f32': dimension 0 is 0");
    free(b.p);
    sample_patch(&b, pos.t0_ne0 + 8, 0, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "dimension 1 is 0");
    free(b.p);
    sample_patch(&b, pos.t0_ne0, 1ull << 63, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "dimension 0");
    free(b.p);
    /* misaligned, out of file, offset overflow */
    sample_patch(&b, pos.t0_off, 4, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "not a multiple of the alignment 32");
    free(b.p);
    sample_patch(&b, pos.t1_off, 1ull << 40, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "'blk.0.q8': 136 bytes at data offset");
    free(b.p);
    sample_patch(&b, pos.t1_off, UINT64_MAX - 31, 8);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "outside the file");
    free(b.p);
    sample_patch(&b, pos.t1_off, 128, 8); /* aligned, but the last bytes are past the end */
    expect_fail(&b, COLIBRI_ERR_FORMAT, "outside the file");
    free(b.p);
    /* q8_0 row length not a multiple of 32 */
    sample_patch(&b, pos.t0_type, CLB_DT_Q8_0, 4);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "row length 8 is not a multiple");
    free(b.p);
    sample_patch(&b, pos.t0_type, 1u << 31, 4);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "invalid type");
    free(b.p);
    /* duplicate tensor name */
    wbuf d = {0};
    w_header(&d, 3, 2, 0);
    uint64_t ne[1] = {8};
    w_tensor(&d, "same", 1, ne, CLB_DT_F32, 0);
    w_tensor(&d, "same", 1, ne, CLB_DT_F32, 32);
    w_pad(&d, 32);
    for (int i = 0; i < 64; i++) w_u8(&d, 0);
    expect_fail(&d, COLIBRI_ERR_FORMAT, "duplicate tensor name 'same'");
    free(d.p);
    /* empty name, NUL in name */
    memset(&d, 0, sizeof d);
    w_header(&d, 3, 1, 0);
    w_tensor(&d, "", 1, ne, CLB_DT_F32, 0);
    w_pad(&d, 32);
    for (int i = 0; i < 32; i++) w_u8(&d, 0);
    expect_fail(&d, COLIBRI_ERR_FORMAT, "invalid length 0");
    free(d.p);
    memset(&d, 0, sizeof d);
    w_header(&d, 3, 1, 0);
    w_tensor(&d, "ab", 1, ne, CLB_DT_F32, 0);
    d.p[24 + 8 + 1] = 0;
    w_pad(&d, 32);
    for (int i = 0; i < 32; i++) w_u8(&d, 0);
    expect_fail(&d, COLIBRI_ERR_FORMAT, "NUL");
    free(d.p);
}

/* A file with one tensor of the given dims/type/offset and `data` zero bytes of data. */
static void one_tensor(wbuf *b, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset, size_t data) {
    memset(b, 0, sizeof *b);
    w_header(b, 3, 1, 1);
    w_key(b, "general.architecture", CLB_GGUF_STRING);
    w_str(b, "llama");
    w_tensor(b, "w", n_dims, ne, type, offset);
    w_pad(b, 32);
    for (size_t i = 0; i < data; i++) w_u8(b, 0);
}

static void test_ne_overflow_and_unknown_type(void **state) {
    (void)state;
    wbuf b;
    uint64_t ne_ovf[4] = {1ull << 32, 1ull << 32, 1, 1}; /* element count 2^64 */
    one_tensor(&b, 4, ne_ovf, CLB_DT_F32, 0, 64);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "element count overflows");
    free(b.p);
    uint64_t ne_i64[2] = {1ull << 32, 1ull << 31}; /* 2^63 elements: beyond int64 */
    one_tensor(&b, 2, ne_i64, CLB_DT_F32, 0, 64);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "element count overflows");
    free(b.p);
    uint64_t ne_bytes[2] = {1ull << 31, 1ull << 31}; /* 2^62 f32 = 2^64 bytes */
    one_tensor(&b, 2, ne_bytes, CLB_DT_F32, 0, 64);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "byte size overflows");
    free(b.p);
    uint64_t ne_big[3] = {1ull << 20, 1ull << 20, 4}; /* fits u64, far beyond the file */
    one_tensor(&b, 3, ne_big, CLB_DT_Q8_0, 0, 64);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "outside the file");
    free(b.p);

    /* unknown types parse (size 0, data NULL): the loader reports them if it needs them */
    static const uint32_t unknown[] = {4, 5, 16, 29, 1000};
    for (size_t u = 0; u < CLB_ARRAY_LEN(unknown); u++) {
        uint64_t ne[4] = {7, 3, 1ull << 30, 5}; /* not block-aligned, no data in the file */
        one_tensor(&b, 4, ne, unknown[u], 12345, 0);
        clb_gguf g;
        uint8_t *copy;
        int rc = parse_copy(b.p, b.n, &g, &copy);
        if (rc) fail_msg("unknown type %u: %s", unknown[u], clb_last_error());
        assert_int_equal(g.n_tensors, 1);
        assert_int_equal(g.tensors[0].dtype, (int)unknown[u]);
        assert_null(clb_type(g.tensors[0].dtype));
        assert_int_equal(g.tensors[0].size, 0);
        assert_null(g.tensors[0].data);
        assert_int_equal(g.tensors[0].shape[0], 5);
        assert_int_equal(g.tensors[0].shape[3], 7);
        clb_gguf_close(&g);
        free(copy);
        free(b.p);
    }
    /* known types of every block size parse with the right byte size */
    uint64_t ne_k[2] = {512, 3};
    one_tensor(&b, 2, ne_k, CLB_DT_Q4_K, 0, 3 * 2 * 144);
    clb_gguf g;
    uint8_t *copy;
    assert_int_equal(parse_copy(b.p, b.n, &g, &copy), COLIBRI_OK);
    assert_int_equal(g.tensors[0].size, 3 * 2 * 144);
    assert_true(clb_tensor_size_consistent(&g.tensors[0]));
    clb_gguf_close(&g);
    free(copy);
    free(b.p);
    one_tensor(&b, 2, ne_k, CLB_DT_Q4_K, 0, 3 * 2 * 144 - 1);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "outside the file");
    free(b.p);
}

/* A file with no tensors and the KVs written by fn. */
static void kv_file(wbuf *b, uint64_t n_kv, void (*fn)(wbuf *)) {
    memset(b, 0, sizeof *b);
    w_header(b, 3, 0, n_kv);
    fn(b);
}
static void kv_dup(wbuf *b) {
    w_key(b, "a.b", CLB_GGUF_UINT32), w_u32(b, 1);
    w_key(b, "c", CLB_GGUF_STRING), w_str(b, "x");
    w_key(b, "a.b", CLB_GGUF_INT8), w_u8(b, 1);
}
static void kv_bool2(wbuf *b) { w_key(b, "flag", CLB_GGUF_BOOL), w_u8(b, 2); }
static void kv_bool_arr(wbuf *b) {
    w_key(b, "flags", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_BOOL), w_u64(b, 2);
    w_u8(b, 1), w_u8(b, 7);
}
static void kv_type13(wbuf *b) { w_key(b, "k", 13), w_u64(b, 0); }
static void kv_elem13(wbuf *b) { w_key(b, "k", CLB_GGUF_ARRAY), w_u32(b, 13), w_u64(b, 0); }
static void kv_empty_key(wbuf *b) { w_key(b, "", CLB_GGUF_UINT8), w_u8(b, 0); }
static void kv_nul_key(wbuf *b) {
    w_u64(b, 3), w_bytes(b, "a\0b", 3), w_u32(b, CLB_GGUF_UINT8), w_u8(b, 0);
}
static void kv_align0(wbuf *b) { w_key(b, "general.alignment", CLB_GGUF_UINT32), w_u32(b, 0); }
static void kv_align48(wbuf *b) { w_key(b, "general.alignment", CLB_GGUF_UINT32), w_u32(b, 48); }
static void kv_align_str(wbuf *b) {
    w_key(b, "general.alignment", CLB_GGUF_STRING), w_str(b, "32");
}
static void kv_align_neg(wbuf *b) {
    w_key(b, "general.alignment", CLB_GGUF_INT32), w_u32(b, (uint32_t)-32);
}
static void nest(wbuf *b, int levels) {
    for (int i = 0; i < levels - 1; i++) w_u32(b, CLB_GGUF_ARRAY), w_u64(b, 1);
    w_u32(b, CLB_GGUF_UINT8), w_u64(b, 1), w_u8(b, 42);
}
static void kv_nest8(wbuf *b) { w_key(b, "deep", CLB_GGUF_ARRAY), nest(b, 8); }
static void kv_nest9(wbuf *b) { w_key(b, "deep", CLB_GGUF_ARRAY), nest(b, 9); }
static void kv_nest_bomb(wbuf *b) { /* 2^40 nested arrays claimed */
    w_key(b, "bomb", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_ARRAY), w_u64(b, 1ull << 40);
    for (int i = 0; i < 100; i++) w_u32(b, CLB_GGUF_UINT8), w_u64(b, 0);
}
static void kv_str_in_nest(wbuf *b) { /* [[ "abc" with length 2^62 ]] */
    w_key(b, "s", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_ARRAY), w_u64(b, 1);
    w_u32(b, CLB_GGUF_STRING), w_u64(b, 1), w_u64(b, 1ull << 62), w_bytes(b, "abc", 3);
}

static void test_bad_kvs(void **state) {
    (void)state;
    wbuf b;
    kv_file(&b, 3, kv_dup);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "duplicate metadata key 'a.b'");
    free(b.p);
    kv_file(&b, 1, kv_bool2);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "'flag': bool value 2");
    free(b.p);
    kv_file(&b, 1, kv_bool_arr);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "bool array element 1 is 7");
    free(b.p);
    kv_file(&b, 1, kv_type13);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "'k': unknown value type 13");
    free(b.p);
    kv_file(&b, 1, kv_elem13);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "unknown array element type 13");
    free(b.p);
    kv_file(&b, 1, kv_empty_key);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "invalid length 0");
    free(b.p);
    kv_file(&b, 1, kv_nul_key);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "NUL");
    free(b.p);
    kv_file(&b, 1, kv_align0);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "alignment 0 is not a nonzero power of two");
    free(b.p);
    kv_file(&b, 1, kv_align48);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "alignment 48");
    free(b.p);
    kv_file(&b, 1, kv_align_neg);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "alignment -32");
    free(b.p);
    kv_file(&b, 1, kv_align_str);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "general.alignment has type string");
    free(b.p);
    kv_file(&b, 1, kv_nest9);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "nested deeper than 8");
    free(b.p);
    kv_file(&b, 1, kv_nest_bomb);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "'bomb': array of 1099511627776 array elements");
    free(b.p);
    kv_file(&b, 1, kv_str_in_nest);
    expect_fail(&b, COLIBRI_ERR_FORMAT, "has length 4611686018427387904");
    free(b.p);

    /* 8 levels is the limit and parses */
    kv_file(&b, 1, kv_nest8);
    clb_gguf g;
    uint8_t *copy;
    assert_int_equal(parse_copy(b.p, b.n, &g, &copy), COLIBRI_OK);
    const clb_gguf_value *v = &g.kv[0].val;
    for (int i = 0; i < 7; i++) {
        assert_int_equal(v->v.arr.type, CLB_GGUF_ARRAY);
        assert_int_equal(v->v.arr.n, 1);
        v = &v->v.arr.items[0];
    }
    assert_int_equal(v->v.arr.type, CLB_GGUF_UINT8);
    assert_int_equal(v->v.arr.data[0], 42);
    assert_int_equal(g.n_tensors, 0);
    clb_gguf_close(&g);
    free(copy);
    free(b.p);
}

/* Many keys: duplicate detection must not be quadratic and must find a late duplicate. */
static void test_many_keys(void **state) {
    (void)state;
    enum { N = 20000 };
    wbuf b = {0};
    w_header(&b, 3, 0, N);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "k.%d", i == N - 1 ? 123 : i);
        w_key(&b, key, CLB_GGUF_UINT16), w_u16(&b, (uint16_t)i);
    }
    double t0 = clb_now();
    expect_fail(&b, COLIBRI_ERR_FORMAT, "duplicate metadata key 'k.123'");
    assert_true(clb_now() - t0 < 2.0);
    /* unique keys parse; the last value is found */
    b.n = 24;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "k.%d", i);
        w_key(&b, key, CLB_GGUF_UINT16), w_u16(&b, (uint16_t)i);
    }
    clb_gguf g;
    uint8_t *copy;
    assert_int_equal(parse_copy(b.p, b.n, &g, &copy), COLIBRI_OK);
    int64_t v;
    assert_true(clb_gguf_get_i64(&g, "k.19999", &v));
    assert_int_equal(v, 19999);
    clb_gguf_close(&g);
    free(copy);
    free(b.p);
}

/* ---- real files ---- */

static void check_all_tensors(const clb_gguf *g) {
    for (int i = 0; i < g->n_tensors; i++) {
        const clb_tensor *t = &g->tensors[i];
        assert_non_null(clb_type(t->dtype));
        assert_true(clb_tensor_size_consistent(t));
        assert_true(clb_range_ok(t->offset, t->size, g->map.size));
        assert_ptr_equal(t->data, g->map.data + t->offset);
        assert_int_equal(t->offset % g->alignment, 0);
    }
}

static void check_mixtral(const char *path, int expect_dtype) {
    clb_gguf g;
    if (clb_gguf_open(path, &g)) fail_msg("%s", clb_last_error());
    char *arch = clb_gguf_get_str(&g, "general.architecture");
    assert_string_equal(arch, "llama");
    clb_free(arch);
    int64_t v;
    assert_true(clb_gguf_get_i64(&g, "llama.block_count", &v));
    assert_int_equal(v, 2);
    int et;
    assert_int_equal(clb_gguf_arr_n(&g, "tokenizer.ggml.tokens", &et), 512);
    assert_int_equal(et, CLB_GGUF_STRING);
    const clb_tensor *t = clb_gguf_find_tensor(&g, "blk.0.ffn_gate_exps.weight");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 3);
    assert_int_equal(t->shape[0], 8);
    assert_int_equal(t->shape[1], 256);
    assert_int_equal(t->shape[2], 256);
    assert_int_equal(t->dtype, expect_dtype);
    assert_non_null(clb_gguf_find_tensor(&g, "token_embd.weight"));
    check_all_tensors(&g);
    clb_gguf_close(&g);
}

static void test_fixture_mixtral(void **state) {
    (void)state;
    check_mixtral("tests/fixtures/mixtral/model-f32.gguf", CLB_DT_F32);
    check_mixtral("tests/fixtures/mixtral/model-q4_0.gguf", CLB_DT_Q4_0);
}

static void test_fixture_gpt2_vocab(void **state) {
    (void)state;
    clb_gguf g;
    const char *path = "tests/fixtures/tokenizers/llamacpp-suite/ggml-vocab-gpt-2.gguf";
    if (clb_gguf_open(path, &g)) fail_msg("%s", clb_last_error());
    int et;
    assert_int_equal(clb_gguf_arr_n(&g, "tokenizer.ggml.tokens", &et), 50257);
    assert_int_equal(et, CLB_GGUF_STRING);
    const clb_gguf_kv *kv = clb_gguf_find(&g, "tokenizer.ggml.tokens");
    assert_int_equal(kv->val.v.arr.strs[0].len, 1);
    assert_memory_equal(kv->val.v.arr.strs[0].ptr, "!", 1);
    char *model = clb_gguf_get_str(&g, "tokenizer.ggml.model");
    assert_string_equal(model, "gpt2");
    clb_free(model);
    check_all_tensors(&g);
    clb_gguf_close(&g);
}

/* Every prefix up to the end of the fixture's header is refused (a sample, to stay fast). */
static void test_fixture_truncated(void **state) {
    (void)state;
    clb_map m;
    assert_int_equal(clb_map_open("tests/fixtures/mixtral/model-q4_0.gguf", &m), COLIBRI_OK);
    clb_gguf g;
    assert_int_equal(clb_gguf_parse(&m, &g), COLIBRI_OK);
    uint64_t hdr = g.data_offset;
    clb_gguf_close(&g);
    assert_int_equal(m.fd >= 0, 1); /* a parse does not take the map */
    for (uint64_t n = 0; n < hdr; n += (n < 4096 ? 1 : 97)) {
        uint8_t *copy;
        if (parse_copy(m.data, (size_t)n, &g, &copy) != COLIBRI_ERR_FORMAT)
            fail_msg("prefix %llu: %s", (unsigned long long)n, clb_last_error());
        free(copy);
    }
    uint8_t *copy;
    assert_int_equal(parse_copy(m.data, (size_t)m.size - 1, &g, &copy), COLIBRI_ERR_FORMAT);
    free(copy);
    clb_map_close(&m);
}

/* The fuzz seeds (tests/fuzz/make_corpus.py, an independent writer) all parse. */
static void test_fuzz_seeds(void **state) {
    (void)state;
    const char *dir = "tests/fuzz/corpus/gguf";
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".gguf")) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        clb_gguf g;
        if (clb_gguf_open(path, &g)) fail_msg("%s", clb_last_error());
        assert_true(g.n_kv > 0);
        for (int i = 0; i < g.n_tensors; i++) {
            const clb_tensor *t = &g.tensors[i];
            if (clb_type(t->dtype)) assert_true(clb_tensor_size_consistent(t));
            else assert_null(t->data);
        }
        if (strcmp(e->d_name, "unknown-type.gguf") == 0) {
            const clb_tensor *t = clb_gguf_find_tensor(&g, "blk.0.iq2.weight");
            assert_non_null(t);
            assert_int_equal(t->dtype, 16);
            assert_int_equal(t->size, 0);
            assert_non_null(clb_gguf_find_tensor(&g, "output.weight")->data);
        }
        clb_gguf_close(&g);
        n++;
    }
    closedir(d);
    assert_true(n >= 6);
}

/* A vocabulary whose special-token ids point past its end (found by fuzz_gguf_vocab: an
   unknown_token_id of 2^24 in an 8-token file came out of the encoder as a token id). Such an
   id means "no such token"; every id the encoder gives is in the vocabulary. */
static void kv_vocab_bad_ids(wbuf *b) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "a", "b"};
    const uint64_t n = CLB_ARRAY_LEN(toks);
    w_key(b, "tokenizer.ggml.model", CLB_GGUF_STRING), w_str(b, "llama");
    w_key(b, "tokenizer.ggml.tokens", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_STRING), w_u64(b, n);
    for (uint64_t i = 0; i < n; i++) w_str(b, toks[i]);
    w_key(b, "tokenizer.ggml.scores", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_FLOAT32), w_u64(b, n);
    for (uint64_t i = 0; i < n; i++) w_f32(b, -(float)i);
    w_key(b, "tokenizer.ggml.token_type", CLB_GGUF_ARRAY), w_u32(b, CLB_GGUF_INT32), w_u64(b, n);
    for (uint64_t i = 0; i < n; i++) w_u32(b, i == 0 ? 2 : i < 3 ? 3 : 1);
    w_key(b, "tokenizer.ggml.unknown_token_id", CLB_GGUF_UINT32), w_u32(b, 1u << 24);
    w_key(b, "tokenizer.ggml.bos_token_id", CLB_GGUF_UINT32), w_u32(b, 7);
    w_key(b, "tokenizer.ggml.eos_token_id", CLB_GGUF_UINT32), w_u32(b, 2);
}

static void test_vocab_special_ids_out_of_range(void **state) {
    (void)state;
    wbuf b;
    kv_file(&b, 6, kv_vocab_bad_ids);
    clb_gguf g;
    uint8_t *copy;
    assert_int_equal(parse_copy(b.p, b.n, &g, &copy), COLIBRI_OK);
    clb_tokenizer *t = clb_tokenizer_from_gguf(&g);
    if (!t) fail_msg("%s", clb_last_error());
    const int32_t nv = clb_tokenizer_n_vocab(t);
    assert_int_equal(nv, 6);
    for (int mode = 0; mode < 2; mode++) {
        int32_t ids[64];
        size_t n = 0;
        int rc = clb_tokenize(t, "a zz b", 6, mode, mode, ids, CLB_ARRAY_LEN(ids), &n);
        if (rc != COLIBRI_OK) {
            assert_true(clb_last_error()[0] != 0);
            continue;
        }
        assert_true(n > 0);
        for (size_t i = 0; i < n; i++) assert_true(ids[i] >= 0 && ids[i] < nv);
    }
    clb_tokenizer_free(t);
    clb_gguf_close(&g);
    free(copy);
    free(b.p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_versions_and_alignment),
        cmocka_unit_test(test_vocab_special_ids_out_of_range),
        cmocka_unit_test(test_open_file),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_huge_counts),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_bad_tensor_info),
        cmocka_unit_test(test_ne_overflow_and_unknown_type),
        cmocka_unit_test(test_bad_kvs),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_fixture_mixtral),
        cmocka_unit_test(test_fixture_gpt2_vocab),
        cmocka_unit_test(test_fixture_truncated),
        cmocka_unit_test(test_fuzz_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
