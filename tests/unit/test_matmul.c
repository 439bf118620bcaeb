/* test_matmul.c — the blocked row kernels (clb_kernels_rows / mdot) and the parallel matrix
 * product: every tile shape gives bit-identical outputs to the table's own vec_dot, the
 * SIMD tables agree with the portable one, the AVX2 and AVX-VNNI variants are bit-identical,
 * clb_matmul's output does not depend on the thread count or the batch size, and packed
 * rows (kernels.h) round-trip and give the same products as the row-major ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/threadpool.h"
#include "kernels/kernels_impl.h"
#include "nn/ops.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { return tu_rand_u64(&rng); }
static float rnd_f(void) { return tu_rand(&rng); }

static const char *const isas[] = {"generic", "avx2", "avx2+vnni", "avx512", "neon", "neon+dotprod", "neon+i8mm"};
static const clb_dtype dts[] = {CLB_DT_Q4_0, CLB_DT_Q8_0, CLB_DT_Q4_K, CLB_DT_Q5_K, CLB_DT_Q6_K, CLB_DT_IQ4_NL, CLB_DT_MXFP4, CLB_DT_F32};

/* rows of dtype: Q4_0/Q8_0/F32 quantized from random floats, K-quants random bytes with
   moderate fp16 scales */
static uint8_t *make_rows(clb_dtype t, int64_t cols, int64_t rows, uint64_t *rb) {
    assert_true(clb_row_bytes(t, cols, rb));
    uint8_t *w = malloc(*rb * (uint64_t)rows);
    float *f = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + (uint64_t)r * *rb;
        if (clb_dtype_can_quantize(t)) {
            for (int64_t c = 0; c < cols; c++) f[c] = rnd_f() * (c % 11 == 0 ? 3.0f : 1.0f);
            clb_quantize_row_ref(t, f, row, cols);
        } else {
            for (uint64_t i = 0; i < *rb; i++) row[i] = (uint8_t)rnd();
            const int bb = clb_type(t)->block_bytes;
            for (uint64_t b = 0; b < *rb; b += (uint64_t)bb) {
                uint16_t h = clb_fp32_to_fp16(rnd_f() * 0.05f), h2 = clb_fp32_to_fp16(rnd_f() * 0.05f);
                if (t == CLB_DT_Q4_K) {
                    memcpy(row + b, &h, 2);
                    memcpy(row + b + 2, &h2, 2);
                } else if (t == CLB_DT_Q6_K) {
                    memcpy(row + b + 208, &h, 2);
                }
            }
        }
    }
    free(f);
    return w;
}

/* n_tok activation rows in the vec_dot_type of t, 64-byte aligned stride */
static uint8_t *make_acts(clb_dtype t, int64_t cols, int n_tok, uint64_t *stride, float **xf) {
    const clb_dtype a = clb_type(t)->vec_dot_type;
    uint64_t rb;
    assert_true(clb_row_bytes(a, cols, &rb));
    *stride = clb_align_up(rb, 64);
    uint8_t *x = calloc(*stride, (size_t)n_tok);
    *xf = malloc(sizeof(float) * (size_t)(cols * n_tok));
    for (int64_t i = 0; i < cols * n_tok; i++) (*xf)[i] = rnd_f() * 4.0f;
    for (int i = 0; i < n_tok; i++) clb_kernels_generic()->quantize[a](*xf + i * cols, x + (uint64_t)i * *stride, cols);
    return x;
}

static void test_rows_match_vec_dot(void **state) {
    (void)state;
    const int64_t cols_list[] = {256, 2304};
    int tables = 0;
    for (size_t i = 0; i < CLB_ARRAY_LEN(isas); i++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[i]);
        if (!k) continue;
        tables++;
        for (size_t d = 0; d < CLB_ARRAY_LEN(dts); d++)
            for (size_t c = 0; c < CLB_ARRAY_LEN(cols_list); c++) {
                const clb_dtype t = dts[d];
                const int64_t cols = cols_list[c], rows = 11;
                const int n_tok = 9;
                uint64_t rb, xs;
                float *xf;
                uint8_t *w = make_rows(t, cols, rows, &rb), *x = make_acts(t, cols, n_tok, &xs, &xf);
                float *y = malloc(sizeof(float) * (size_t)(rows * n_tok));
                /* every sub-range of rows and every token count, against single dot products */
                for (int64_t r0 = 0; r0 < 3; r0++)
                    for (int nt = 1; nt <= n_tok; nt += 2) {
                        for (int64_t j = 0; j < rows * n_tok; j++) y[j] = NAN;
                        clb_kernels_rows(k, t, cols, r0, rows, w, rb, 0, false, x, xs, nt, y, rows);
                        for (int tok = 0; tok < nt; tok++)
                            for (int64_t r = r0; r < rows; r++) {
                                float want, ref;
                                k->vec_dot[t](cols, &want, w + (uint64_t)r * rb, x + (uint64_t)tok * xs);
                                clb_kernels_generic()->vec_dot[t](cols, &ref, w + (uint64_t)r * rb,
                                                                  x + (uint64_t)tok * xs);
                                const float got = y[(int64_t)tok * rows + r];
                                if (memcmp(&got, &want, sizeof got) != 0)
                                    fail_msg("%s %s cols %lld rows [%lld,11) n_tok %d: out[%d][%lld] %.9g, vec_dot %.9g",
                                             k->isa, clb_dtype_name(t), (long long)cols, (long long)r0, nt, tok,
                                             (long long)r, (double)got, (double)want);
                                if (!(fabsf(got - ref) <= 2e-3f * (1.0f + fabsf(ref))))
                                    fail_msg("%s %s: %.9g vs generic %.9g", k->isa, clb_dtype_name(t), (double)got,
                                             (double)ref);
                            }
                    }
                free(y);
                free(w);
                free(x);
                free(xf);
            }
    }
    assert_true(tables >= 1);
}

/* two tables' packed kernels on one group of 16 rows, packed in memory and row-major: the
   same bits (the AVX2 and AVX-VNNI integer sums are exact) */
static void packed_pair_equal(const clb_kernels *a, const clb_kernels *v, clb_dtype t) {
    const int64_t cols = 4096, rows = 16;
    const int n_tok = 5;
    uint64_t rb;
    uint8_t *r = make_rows(t, cols, rows, &rb), *p = malloc(rb * rows);
    memcpy(p, r, rb * rows);
    void *scratch = malloc(clb_pack_scratch_bytes(t, cols));
    const int64_t pr = clb_pack_rows(t, cols, rows, p, scratch);
    assert_int_equal(pr, rows);
    const clb_dtype vt = clb_type(t)->vec_dot_type;
    const uint64_t xs = clb_mm_convert_stride(t, cols);
    uint8_t *x = calloc(xs, n_tok);
    float *xf = malloc(sizeof(float) * (size_t)(cols * n_tok));
    for (int64_t j = 0; j < cols * n_tok; j++) xf[j] = rnd_f() * 4.0f;
    for (int u = 0; u < n_tok; u++) {
        clb_kernels_generic()->quantize[vt](xf + u * cols, x + (uint64_t)u * xs, cols);
        if (vt == CLB_DT_Q8_0) clb_q8_fill_extras(x + (uint64_t)u * xs, cols);
    }
    float ya[5 * 16], yv[5 * 16];
    for (int il = 0; il < 2; il++) {
        clb_kernels_rows(a, t, cols, 0, rows, il ? p : r, rb, pr, il, x, xs, n_tok, ya, rows);
        clb_kernels_rows(v, t, cols, 0, rows, il ? p : r, rb, pr, il, x, xs, n_tok, yv, rows);
        assert_memory_equal(ya, yv, sizeof ya);
    }
    free(xf);
    free(x);
    free(scratch);
    free(p);
    free(r);
}

static void test_vnni_bit_identical(void **state) {
    (void)state;
    const clb_kernels *a = clb_kernels_by_isa("avx2"), *v = clb_kernels_by_isa("avx2+vnni");
    if (!a || !v) {
        print_message("no AVX-VNNI table on this CPU; skipped\n");
        skip();
    }
    const clb_dtype t3[] = {CLB_DT_Q4_0, CLB_DT_Q8_0, CLB_DT_Q4_K, CLB_DT_IQ4_NL, CLB_DT_MXFP4};
    for (size_t d = 0; d < CLB_ARRAY_LEN(t3); d++) {
        uint64_t rb, xs;
        float *xf;
        uint8_t *w = make_rows(t3[d], 4096, 8, &rb), *x = make_acts(t3[d], 4096, 5, &xs, &xf);
        float ya[40], yv[40];
        clb_kernels_rows(a, t3[d], 4096, 0, 8, w, rb, 0, false, x, xs, 5, ya, 8);
        clb_kernels_rows(v, t3[d], 4096, 0, 8, w, rb, 0, false, x, xs, 5, yv, 8);
        assert_memory_equal(ya, yv, sizeof ya);
        free(w);
        if (clb_kernels_packs(a, t3[d]) && clb_kernels_packs(v, t3[d])) packed_pair_equal(a, v, t3[d]);
        free(x);
        free(xf);
    }
}

/* The AVX2 / AVX-VNNI and AVX-512 packed kernels do the same arithmetic per row lane (exact
   integer sums per block, then one conversion and one FMA by the row scale times the
   token's): the same bits, checked wherever the CPU has both */
static void test_packed_x86_tables_agree(void **state) {
    (void)state;
    const clb_kernels *z = clb_kernels_by_isa("avx512");
    const char *const narrow[] = {"avx2", "avx2+vnni"};
    const clb_dtype ts[] = {CLB_DT_Q4_0, CLB_DT_Q8_0, CLB_DT_Q4_K, CLB_DT_IQ4_NL, CLB_DT_MXFP4};
    int pairs = 0;
    for (size_t i = 0; z && i < CLB_ARRAY_LEN(narrow); i++) {
        const clb_kernels *a = clb_kernels_by_isa(narrow[i]);
        for (size_t d = 0; a && d < CLB_ARRAY_LEN(ts); d++) {
            assert_true(clb_kernels_packs(a, ts[d]) && clb_kernels_packs(z, ts[d]));
            packed_pair_equal(a, z, ts[d]);
            pairs++;
        }
    }
    if (!pairs) {
        print_message("no AVX-512 table on this CPU; skipped\n");
        skip();
    }
}

/* clb_matmul: same bits for 1, 2 and 3 threads, and for a token alone or inside a batch */
static void test_matmul_deterministic(void **state) {
    (void)state;
    const clb_kernels *k = clb_kernels_get();
    for (size_t d = 0; d < CLB_ARRAY_LEN(dts); d++) {
        const clb_dtype t = dts[d];
        const int64_t cols = 512, rows = 77;
        const int n_tok = 6;
        uint64_t rb, xs;
        float *xf;
        uint8_t *w = make_rows(t, cols, rows, &rb), *xq = make_acts(t, cols, n_tok, &xs, &xf);
        free(xq);
        clb_weight W = {.data = w, .dtype = t, .rows = rows, .cols = cols, .row_bytes = rb};
        float ref[6 * 77], got[6 * 77], one[77];
        for (int nth = 1; nth <= 3; nth++) {
            clb_pool *p = clb_pool_create(nth);
            assert_non_null(p);
            clb_mm_ctx mm = {.pool = p, .k = k, .qbuf_bytes = clb_matmul_qbuf_bytes(cols, n_tok)};
            mm.qbuf = clb_malloc(mm.qbuf_bytes);
            clb_matmul(&mm, &W, xf, cols, n_tok, nth == 1 ? ref : got, rows);
            if (nth > 1) assert_memory_equal(ref, got, sizeof ref);
            for (int tok = 0; tok < n_tok; tok++) { /* one token at a time, as in decoding */
                clb_matmul(&mm, &W, xf + tok * cols, cols, 1, one, rows);
                assert_memory_equal(one, ref + tok * rows, sizeof one);
            }
            clb_free(mm.qbuf);
            clb_pool_free(p);
        }
        free(w);
        free(xf);
    }
}

/* ---- conversions in pieces, the fused SwiGLU feed-forward ---- */

/* clb_mm_convert_range over block-aligned pieces writes the bytes of the whole-row
   conversion, for every activation format (Q8_0 with and without extras, Q8_1, Q8_K) and
   every kernel table. */
static void test_convert_range(void **state) {
    (void)state;
    const clb_dtype wts[] = {CLB_DT_Q4_0, CLB_DT_Q5_0, CLB_DT_Q4_1, CLB_DT_Q4_K, CLB_DT_Q6_K};
    const int64_t cols = 1536;
    float *x = malloc(sizeof(float) * cols);
    for (int64_t j = 0; j < cols; j++) x[j] = rnd_f() * (j % 7 == 0 ? 5.0f : 1.0f);
    int checked = 0;
    for (size_t i = 0; i < CLB_ARRAY_LEN(isas); i++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[i]);
        if (!k) continue;
        clb_mm_ctx mm = {.k = k};
        for (size_t d = 0; d < CLB_ARRAY_LEN(wts); d++) {
            const uint64_t rb = clb_mm_convert_stride(wts[d], cols);
            uint8_t *whole = calloc(1, rb), *parts = calloc(1, rb);
            uint64_t st;
            assert_ptr_equal(clb_mm_convert(&mm, whole, wts[d], cols, x, cols, 1, &st), whole);
            assert_int_equal(st, rb);
            const int64_t bs = clb_mm_act_block(wts[d]);
            for (int64_t e0 = 0; e0 < cols;) { /* pieces of 1, 2, 3, ... blocks */
                const int64_t e1 = CLB_MIN(cols, e0 + bs * (1 + (e0 / bs) % 3));
                clb_mm_convert_range(&mm, parts, wts[d], cols, x, e0, e1);
                e0 = e1;
            }
            assert_memory_equal(whole, parts, rb);
            checked++;
            free(whole);
            free(parts);
        }
    }
    assert_true(checked >= 5);
    free(x);
}

/* clb_ffn_swiglu (gate and up in one dispatch, SwiGLU and the hidden rows' conversion
   inside it) equals the three separate products with clb_silu_mul between them, bit for
   bit, for 1-3 threads and 1 or 5 tokens, with mixed activation formats. */
static void test_ffn_swiglu(void **state) {
    (void)state;
    const clb_dtype combos[][3] = {{CLB_DT_Q4_0, CLB_DT_Q4_0, CLB_DT_Q8_0},
                                   {CLB_DT_Q4_K, CLB_DT_Q4_K, CLB_DT_Q6_K},
                                   {CLB_DT_Q4_0, CLB_DT_Q4_K, CLB_DT_Q4_K},
                                   {CLB_DT_F32, CLB_DT_Q8_0, CLB_DT_F32}};
    const int64_t E = 512, ff = 768;
    const clb_kernels *k = clb_kernels_get();
    float *xf = malloc(sizeof(float) * (size_t)(E * 5));
    for (int64_t j = 0; j < E * 5; j++) xf[j] = rnd_f() * 2.0f;
    for (size_t c = 0; c < CLB_ARRAY_LEN(combos); c++) {
        uint64_t rg, ru, rd;
        uint8_t *g = make_rows(combos[c][0], E, ff, &rg), *u = make_rows(combos[c][1], E, ff, &ru);
        uint8_t *dn = make_rows(combos[c][2], ff, E, &rd);
        clb_weight G = {.data = g, .dtype = combos[c][0], .rows = ff, .cols = E, .row_bytes = rg};
        clb_weight U = {.data = u, .dtype = combos[c][1], .rows = ff, .cols = E, .row_bytes = ru};
        clb_weight D = {.data = dn, .dtype = combos[c][2], .rows = E, .cols = ff, .row_bytes = rd};
        float *h = malloc(sizeof(float) * (size_t)(ff * 5)), *hs = malloc(sizeof(float) * (size_t)(ff * 5));
        float *ref = malloc(sizeof(float) * (size_t)(E * 5)), *got = malloc(sizeof(float) * (size_t)(E * 5));
        for (int nth = 1; nth <= 3; nth++)
            for (int n = 1; n <= 5; n += 4) {
                clb_pool *p = clb_pool_create(nth);
                clb_mm_ctx mm = {.pool = p, .k = k, .qbuf_bytes = clb_ffn_swiglu_qbuf_bytes(ff, ff, n)};
                mm.qbuf = clb_malloc(mm.qbuf_bytes);
                clb_matmul(&mm, &G, xf, E, n, h, ff);
                clb_matmul(&mm, &U, xf, E, n, hs, ff);
                clb_silu_mul(h, hs, (int64_t)n * ff);
                clb_matmul(&mm, &D, h, ff, n, ref, E);
                memset(got, 0, sizeof(float) * (size_t)(E * n));
                clb_ffn_swiglu(&mm, &G, &U, &D, xf, E, n, h, hs, got, E);
                assert_memory_equal(ref, got, sizeof(float) * (size_t)(E * n));
                clb_free(mm.qbuf);
                clb_pool_free(p);
            }
        free(g), free(u), free(dn), free(h), free(hs), free(ref), free(got);
    }
    free(xf);
}

/* ---- packed rows ---- */

static const clb_dtype packable[] = {CLB_DT_Q4_0, CLB_DT_Q8_0, CLB_DT_Q4_K, CLB_DT_IQ4_NL, CLB_DT_MXFP4};

/* pack + unpack restores every byte; rows past the last full group are untouched */
static void test_pack_round_trip(void **state) {
    (void)state;
    const int64_t cols_list[] = {32, 2336}, cols_k[] = {256, 2304}, rows = 37;
    for (size_t d = 0; d < CLB_ARRAY_LEN(packable); d++)
        for (size_t c = 0; c < CLB_ARRAY_LEN(cols_list); c++) {
            const clb_dtype t = packable[d];
            const int64_t cols = t == CLB_DT_Q4_K ? cols_k[c] : cols_list[c];
            uint64_t rb;
            uint8_t *w = make_rows(t, cols, rows, &rb), *p = malloc(rb * rows);
            memcpy(p, w, rb * rows);
            void *scratch = malloc(clb_pack_scratch_bytes(t, cols));
            assert_true(clb_pack_layout_known(t, cols));
            assert_int_equal(clb_pack_rows(t, cols, rows, p, scratch), 32);
            assert_true(memcmp(p, w, rb * 32) != 0);
            assert_memory_equal(p + rb * 32, w + rb * 32, rb * 5);
            clb_unpack_rows(t, cols, 32, p, scratch);
            assert_memory_equal(p, w, rb * rows);
            free(scratch);
            free(p);
            free(w);
        }
    assert_false(clb_pack_layout_known(CLB_DT_Q4_K, 288));
    assert_false(clb_pack_layout_known(CLB_DT_Q6_K, 256));
    assert_false(clb_pack_layout_known(CLB_DT_Q4_0, 48));
    assert_int_equal(clb_pack_rows(CLB_DT_F32, 32, 16, NULL, NULL), 0);
}

/* packed products against the portable row-major ones, for every range of rows (whole and
   partial groups, the unpacked tail) and token count; each output's bits are the same
   whichever range or batch it was computed in */
static void test_packed_rows(void **state) {
    (void)state;
    int checked = 0;
    const int64_t ranges[][2] = {{0, 37}, {0, 16}, {16, 37}, {3, 20}, {5, 9}, {20, 37}, {32, 37}};
    for (size_t i = 0; i < CLB_ARRAY_LEN(isas); i++) {
        const clb_kernels *k = clb_kernels_by_isa(isas[i]);
        if (!k) continue;
        for (size_t d = 0; d < CLB_ARRAY_LEN(packable); d++) {
            const clb_dtype t = packable[d];
            if (!clb_kernels_packs(k, t)) continue;
            const int64_t cols = t == CLB_DT_Q4_K ? 2304 : 2336, rows = 37;
            const int n_tok = 9;
            const clb_dtype vt = clb_type(t)->vec_dot_type;
            uint64_t rb;
            uint8_t *w = make_rows(t, cols, rows, &rb), *p = malloc(rb * rows);
            memcpy(p, w, rb * rows);
            void *scratch = malloc(clb_pack_scratch_bytes(t, cols));
            const int64_t pr = clb_pack_rows(t, cols, rows, p, scratch);
            float *xf = malloc(sizeof(float) * (size_t)(cols * n_tok));
            for (int64_t j = 0; j < cols * n_tok; j++) xf[j] = rnd_f() * 4.0f;
            const uint64_t xs = clb_mm_convert_stride(t, cols);
            uint8_t *x = calloc(xs, n_tok);
            for (int u = 0; u < n_tok; u++) {
                k->quantize[vt](xf + u * cols, x + (uint64_t)u * xs, cols);
                if (vt == CLB_DT_Q8_0) clb_q8_fill_extras(x + (uint64_t)u * xs, cols);
            }
            float full[9 * 37], y[9 * 37];
            clb_kernels_rows(k, t, cols, 0, rows, p, rb, pr, true, x, xs, n_tok, full, rows);
            for (int u = 0; u < n_tok; u++)
                for (int64_t r = 0; r < rows; r++) {
                    float ref;
                    clb_kernels_generic()->vec_dot[t](cols, &ref, w + (uint64_t)r * rb, x + (uint64_t)u * xs);
                    const float got = full[u * rows + r];
                    /* the NEON packed kernels keep generic.c's roundings: the same bits (the rows
                       past the last group go through the per-row kernels) */
                    if (r < pr && strncmp(k->isa, "neon", 4) == 0 && memcmp(&got, &ref, sizeof got) != 0)
                        fail_msg("%s packed %s row %lld tok %d: %.9g, generic %.9g (bits differ)", k->isa,
                                 clb_dtype_name(t), (long long)r, u, (double)got, (double)ref);
                    if (!(fabsf(got - ref) <= 2e-3f * (1.0f + fabsf(ref))))
                        fail_msg("%s packed %s row %lld tok %d: %.9g vs generic %.9g", k->isa, clb_dtype_name(t),
                                 (long long)r, u, (double)got, (double)ref);
                }
            /* packed in memory (p) or row-major (w, transposed in registers): the same bits */
            for (int il = 0; il < 2; il++)
            for (size_t g = 0; g < CLB_ARRAY_LEN(ranges); g++)
                for (int nt = 1; nt <= n_tok; nt += 2) {
                    for (int64_t j = 0; j < rows * n_tok; j++) y[j] = NAN;
                    clb_kernels_rows(k, t, cols, ranges[g][0], ranges[g][1], il ? p : w, rb, pr, il, x, xs, nt, y,
                                     rows);
                    for (int u = 0; u < n_tok; u++)
                        for (int64_t r = 0; r < rows; r++) {
                            const bool in = u < nt && r >= ranges[g][0] && r < ranges[g][1];
                            const float got = y[u * rows + r];
                            if (in ? memcmp(&got, &full[u * rows + r], sizeof got) != 0 : !isnan(got))
                                fail_msg("%s %s %s rows [%lld,%lld) nt %d: out[%d][%lld] %.9g (full %.9g)", k->isa,
                                         il ? "interleaved" : "row-major", clb_dtype_name(t), (long long)ranges[g][0],
                                         (long long)ranges[g][1], nt, u, (long long)r, (double)got,
                                         (double)full[u * rows + r]);
                        }
                }
            /* through clb_matmul (its own activation conversion), 1 to 3 threads */
            clb_weight W = {.data = p, .dtype = t, .rows = rows, .cols = cols, .row_bytes = rb, .packed_rows = pr,
                            .interleaved = true};
            for (int nth = 1; nth <= 4; nth++) {
                if (nth == 4) W.data = w, W.interleaved = false, nth = 2;
                clb_pool *pool = clb_pool_create(nth);
                clb_mm_ctx mm = {.pool = pool, .k = k, .qbuf_bytes = clb_matmul_qbuf_bytes(cols, n_tok)};
                mm.qbuf = clb_malloc(mm.qbuf_bytes);
                clb_matmul(&mm, &W, xf, cols, n_tok, y, rows);
                assert_memory_equal(y, full, sizeof y);
                clb_free(mm.qbuf);
                clb_pool_free(pool);
                if (!W.interleaved) break;
            }
            checked++;
            free(x);
            free(xf);
            free(scratch);
            free(p);
            free(w);
        }
    }
    if (!checked) {
        print_message("no packed kernels on this CPU; skipped\n");
        skip();
    }
}

/* MXFP4 rows whose E8M0 exponents span the range, 0 and 1 (2^-128, 2^-127: denormal
   scales) to 250, through every table's row kernels (packed where the table packs, the
   blocked tile or vec_dot else, and the unpacked tail): each output within 1e-4 relative of
   the portable kernel. Positive weights and activations, so no sum cancels and a wrong
   power of two anywhere is caught. */
static void test_mxfp4_exponents(void **state) {
    (void)state;
    const int64_t cols = 256, rows = 37;
    const int n_tok = 5;
    const uint8_t lo_e[] = {0, 1, 2, 3, 64, 100}, hi_e[] = {127, 128, 129, 180, 240, 250};
    uint64_t rb;
    assert_true(clb_row_bytes(CLB_DT_MXFP4, cols, &rb));
    const uint64_t xs = clb_mm_convert_stride(CLB_DT_MXFP4, cols);
    uint8_t *w = malloc(rb * rows), *p = malloc(rb * rows), *x = calloc(xs, n_tok);
    float *xf = malloc(sizeof(float) * (size_t)cols);
    float y[5 * 37];
    for (int pass = 0; pass < 2; pass++) {
        const uint8_t *es = pass ? hi_e : lo_e;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < cols / 32; b++) {
                uint8_t *blk = w + (uint64_t)r * rb + (uint64_t)b * 17;
                blk[0] = (uint8_t)(es[r % 6] + (b & 1)); /* one row, one exponent class */
                for (int j = 0; j < 16; j++) blk[1 + j] = (uint8_t)((1 + rnd() % 7) | (1 + rnd() % 7) << 4);
            }
        /* large activations for the tiny scales, tiny ones for the large */
        for (int u = 0; u < n_tok; u++) {
            for (int64_t c = 0; c < cols; c++) xf[c] = (0.5f + 0.5f * fabsf(rnd_f())) * (pass ? 1e-3f : 1e4f);
            clb_quantize_row_ref(CLB_DT_Q8_0, xf, x + (uint64_t)u * xs, cols);
            clb_q8_fill_extras(x + (uint64_t)u * xs, cols);
        }
        int checked = 0;
        for (size_t i = 0; i < CLB_ARRAY_LEN(isas); i++) {
            const clb_kernels *k = clb_kernels_by_isa(isas[i]);
            if (!k) continue;
            memcpy(p, w, rb * rows);
            int64_t pr = 0;
            if (clb_kernels_packs(k, CLB_DT_MXFP4)) {
                void *scratch = malloc(clb_pack_scratch_bytes(CLB_DT_MXFP4, cols));
                pr = clb_pack_rows(CLB_DT_MXFP4, cols, rows, p, scratch);
                free(scratch);
            }
            for (int il = 0; il < (pr ? 2 : 1); il++) {
                clb_kernels_rows(k, CLB_DT_MXFP4, cols, 0, rows, il ? p : w, rb, pr, il, x, xs, n_tok, y, rows);
                for (int u = 0; u < n_tok; u++)
                    for (int64_t r = 0; r < rows; r++) {
                        float ref;
                        clb_kernels_generic()->vec_dot[CLB_DT_MXFP4](cols, &ref, w + (uint64_t)r * rb,
                                                                     x + (uint64_t)u * xs);
                        const float got = y[u * rows + r];
                        if (!(ref > 0 && isfinite(ref) && fabsf(got - ref) <= 1e-4f * ref))
                            fail_msg("%s mxfp4 %s row %lld (exponent %d) tok %d: %.9g vs generic %.9g", k->isa,
                                     il ? "packed" : "row-major", (long long)r, (int)w[(uint64_t)r * rb], u,
                                     (double)got, (double)ref);
                    }
                checked++;
            }
        }
        assert_true(checked > 0);
    }
    free(xf);
    free(x);
    free(p);
    free(w);
}

static int n_calls;
static void count_task(void *ctx, int ith, int nth) {
    (void)ith;
    (void)nth;
    __atomic_fetch_add((int *)ctx, 1, __ATOMIC_RELAXED);
}

/* many back-to-back dispatches: every worker runs every task exactly once */
static void test_pool_dispatch(void **state) {
    (void)state;
    for (int nth = 1; nth <= 3; nth++) {
        clb_pool *p = clb_pool_create(nth);
        n_calls = 0;
        for (int i = 0; i < 2000; i++) clb_pool_run(p, count_task, &n_calls);
        assert_int_equal(n_calls, 2000 * clb_pool_size(p));
        clb_pool_free(p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_match_vec_dot),
        cmocka_unit_test(test_vnni_bit_identical),
        cmocka_unit_test(test_packed_x86_tables_agree),
        cmocka_unit_test(test_matmul_deterministic),
        cmocka_unit_test(test_convert_range),
        cmocka_unit_test(test_ffn_swiglu),
        cmocka_unit_test(test_pack_round_trip),
        cmocka_unit_test(test_packed_rows),
        cmocka_unit_test(test_mxfp4_exponents),
        cmocka_unit_test(test_pool_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
