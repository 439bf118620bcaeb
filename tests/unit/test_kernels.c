/* test_kernels.c — every SIMD kernel against the portable one (generic.c) on awkward sizes
 * and random data, the portable dot products against dequantize-then-dot, the SIMD
 * activation quantizers bit-exact with the reference, and run-time dispatch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "testutil.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return tu_rand_u64(&rng_state); }
static float rnd_f(void) { return tu_rand(&rng_state); }

static const char *const simd_isas[] = {"avx2", "avx2+vnni", "avx512", "neon", "neon+dotprod", "neon+i8mm"};

/* Weight types under test and where their fp16 scale fields sit inside a block (so that
   random bytes can be turned into a block with finite, moderate scales). */
typedef struct { clb_dtype t; int scale_off[2]; int n_scale; } wtype;
static const wtype wtypes[] = {
    {CLB_DT_F32, {0}, 0},         {CLB_DT_F16, {0}, 0},          {CLB_DT_BF16, {0}, 0},
    {CLB_DT_Q4_0, {0}, 1},        {CLB_DT_Q4_1, {0, 2}, 2},      {CLB_DT_Q5_0, {0}, 1},
    {CLB_DT_Q5_1, {0, 2}, 2},     {CLB_DT_Q8_0, {0}, 1},         {CLB_DT_Q2_K, {80, 82}, 2},
    {CLB_DT_Q3_K, {108}, 1},      {CLB_DT_Q4_K, {0, 2}, 2},      {CLB_DT_Q5_K, {0, 2}, 2},
    {CLB_DT_Q6_K, {208}, 1},      {CLB_DT_IQ4_NL, {0}, 1},       {CLB_DT_IQ4_XS, {0}, 1},
    {CLB_DT_MXFP4, {0}, 0},
};

static const int64_t block_sizes[] = {32, 64, 96, 256, 288, 512, 1280, 4096};
static const int64_t float_sizes[] = {1, 7, 31, 33, 257, 4096};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* Fills rows weights of type t: random bytes with sane scales (mode 0) or the reference
   quantization of random floats when the type can be quantized (mode 1). */
static void make_weights(const wtype *w, int64_t n, uint8_t *dst, int mode) {
    const clb_type_info *ti = clb_type(w->t);
    uint64_t rb;
    assert_true(clb_row_bytes(w->t, n, &rb));
    if (!ti->is_quantized || (mode == 1 && clb_dtype_can_quantize(w->t))) {
        float *f = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) f[i] = rnd_f() * (i % 13 == 0 ? 4.0f : 1.0f);
        clb_quantize_row_ref(w->t, f, dst, n);
        free(f);
        return;
    }
    for (uint64_t i = 0; i < rb; i++) dst[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < n / ti->block_size; b++) {
        uint8_t *blk = dst + b * ti->block_bytes;
        for (int s = 0; s < w->n_scale; s++)
            put16(blk + w->scale_off[s], clb_fp32_to_fp16(rnd_f() * 0.05f));
        if (w->t == CLB_DT_MXFP4) blk[0] = (uint8_t)(118 + rnd() % 14); /* 2^-9 .. 2^4 */
    }
}

static void make_activation(clb_dtype a, int64_t n, uint8_t *dst) {
    float *f = malloc((size_t)n * sizeof(float));
    const float scale = (float)(1 + rnd() % 8);
    for (int64_t i = 0; i < n; i++) f[i] = rnd_f() * scale;
    clb_kernels_generic()->quantize[a](f, dst, n);
    free(f);
}

static bool size_ok(clb_dtype t, int64_t n) {
    uint64_t rb;
    return clb_row_bytes(t, n, &rb) && clb_row_bytes(clb_type(t)->vec_dot_type, n, &rb);
}

/* sum |w_i x_i| and sum w_i x_i (double) of the dequantized rows */
static void deq_dot(clb_dtype t, const void *w, const void *x, int64_t n, double *abs_sum, double *dot) {
    const clb_kernels *g = clb_kernels_generic();
    clb_dtype a = clb_type(t)->vec_dot_type;
    float *fw = malloc((size_t)n * sizeof(float)), *fx = malloc((size_t)n * sizeof(float));
    g->dequantize[t](w, fw, n);
    g->dequantize[a](x, fx, n);
    double s = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs((double)fw[i] * fx[i]);
        d += (double)fw[i] * fx[i];
    }
    free(fw);
    free(fx);
    *abs_sum = s;
    *dot = d;
}

static double tolerance(clb_dtype t, int64_t n, double abs_sum) {
    const int64_t chunks = clb_type(t)->is_quantized ? n / clb_type(t)->block_size : n / 8;
    return 2e-7 * (double)(chunks + 16) * abs_sum + 1e-30;
}

/* ---- SIMD vec_dot vs generic --------------------------------------------------------- */

static int n_simd_tables;

static void test_simd_vec_dot(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    int checked = 0;
    for (size_t s = 0; s < sizeof(simd_isas) / sizeof(simd_isas[0]); s++) {
        const clb_kernels *k = clb_kernels_by_isa(simd_isas[s]);
        if (!k) continue;
        print_message("comparing %s with generic\n", k->isa);
        for (size_t wi = 0; wi < sizeof(wtypes) / sizeof(wtypes[0]); wi++) {
            const wtype *w = &wtypes[wi];
            assert_non_null(k->vec_dot[w->t]);
            const bool is_q = clb_type(w->t)->is_quantized;
            const int64_t *sizes = is_q ? block_sizes : float_sizes;
            const size_t ns = is_q ? sizeof(block_sizes) / sizeof(block_sizes[0])
                                   : sizeof(float_sizes) / sizeof(float_sizes[0]);
            for (size_t si = 0; si < ns; si++) {
                const int64_t n = sizes[si];
                if (!size_ok(w->t, n)) continue;
                const clb_dtype a = clb_type(w->t)->vec_dot_type;
                uint64_t wrb, xrb;
                clb_row_bytes(w->t, n, &wrb);
                clb_row_bytes(a, n, &xrb);
                /* two rows back to back, so the second starts at an unaligned offset */
                uint8_t *wbuf = malloc(2 * wrb), *xbuf = malloc(xrb);
                for (int mode = 0; mode < 2; mode++) {
                    make_weights(w, n, wbuf, mode);
                    make_weights(w, n, wbuf + wrb, 1 - mode);
                    make_activation(a, n, xbuf);
                    for (int r = 0; r < 2; r++) {
                        const uint8_t *wr = wbuf + r * wrb;
                        float got = -1.0f, want = -2.0f;
                        k->vec_dot[w->t](n, &got, wr, xbuf);
                        g->vec_dot[w->t](n, &want, wr, xbuf);
                        double abs_sum, dot;
                        deq_dot(w->t, wr, xbuf, n, &abs_sum, &dot);
                        if (!(fabs((double)got - want) <= tolerance(w->t, n, abs_sum)))
                            fail_msg("%s vec_dot %s n=%lld mode %d row %d: simd %.9g generic %.9g (sum|wx| %g)",
                                     k->isa, clb_dtype_name(w->t), (long long)n, mode, r, (double)got,
                                     (double)want, abs_sum);
                        checked++;
                    }
                }
                free(wbuf);
                free(xbuf);
            }
        }
    }
    if (n_simd_tables == 0) print_message("no SIMD table on this CPU; nothing compared\n");
    else assert_true(checked > 100);
}

/* ---- generic vec_dot vs dequantize-then-dot ------------------------------------------ */

static void test_generic_matches_dequant(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    for (size_t wi = 0; wi < sizeof(wtypes) / sizeof(wtypes[0]); wi++) {
        const wtype *w = &wtypes[wi];
        assert_true(clb_dtype_is_weight(w->t));
        for (size_t si = 0; si < sizeof(block_sizes) / sizeof(block_sizes[0]); si++) {
            const int64_t n = block_sizes[si];
            if (!size_ok(w->t, n)) continue;
            const clb_dtype a = clb_type(w->t)->vec_dot_type;
            uint64_t wrb, xrb;
            clb_row_bytes(w->t, n, &wrb);
            clb_row_bytes(a, n, &xrb);
            uint8_t *wbuf = malloc(wrb), *xbuf = malloc(xrb);
            for (int mode = 0; mode < 2; mode++) {
                make_weights(w, n, wbuf, mode);
                make_activation(a, n, xbuf);
                float got = 0;
                g->vec_dot[w->t](n, &got, wbuf, xbuf);
                double abs_sum, dot;
                deq_dot(w->t, wbuf, xbuf, n, &abs_sum, &dot);
                if (!(fabs(got - dot) <= tolerance(w->t, n, abs_sum)))
                    fail_msg("generic vec_dot %s n=%lld: %.9g, dequantized dot %.9g (sum|wx| %g)",
                             clb_dtype_name(w->t), (long long)n, (double)got, dot, abs_sum);
            }
            free(wbuf);
            free(xbuf);
        }
    }
}

/* ---- axpy: every table against a double-precision sum, every tail length ---- */

static void test_axpy(void **state) {
    (void)state;
    int checked = 0;
    for (size_t s = 0; s < sizeof(simd_isas) / sizeof(simd_isas[0]) + 1; s++) {
        const clb_kernels *k = s == 0 ? clb_kernels_generic() : clb_kernels_by_isa(simd_isas[s - 1]);
        if (!k) continue;
        assert_non_null(k->axpy_f32);
        for (int64_t n = 1; n <= 70; n += (n < 20 ? 1 : 7)) {
            float x[70], y[70], y0[70];
            for (int64_t i = 0; i < n; i++) x[i] = rnd_f() * 3.0f, y[i] = y0[i] = rnd_f();
            const float a = rnd_f() * 2.0f;
            k->axpy_f32(n, a, x, y);
            for (int64_t i = 0; i < n; i++) {
                const double want = (double)y0[i] + (double)a * x[i];
                if (fabs(y[i] - want) > 1e-6 * (fabs(want) + fabs((double)a * x[i]) + 1e-3))
                    fail_msg("%s axpy n=%lld [%lld]: %.9g, want %.9g", k->isa, (long long)n, (long long)i, y[i], want);
            }
            checked++;
        }
    }
    assert_true(checked > 0);
}

/* ---- SIMD quantizers bit-exact ------------------------------------------------------- */

static void test_simd_quantize(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    const clb_dtype acts[] = {CLB_DT_F32, CLB_DT_F16, CLB_DT_BF16, CLB_DT_Q8_0, CLB_DT_Q8_K};
    int checked = 0;
    for (size_t s = 0; s < sizeof(simd_isas) / sizeof(simd_isas[0]); s++) {
        const clb_kernels *k = clb_kernels_by_isa(simd_isas[s]);
        if (!k) continue;
        for (size_t ai = 0; ai < sizeof(acts) / sizeof(acts[0]); ai++) {
            const clb_dtype a = acts[ai];
            assert_non_null(k->quantize[a]);
            for (size_t si = 0; si < sizeof(block_sizes) / sizeof(block_sizes[0]); si++) {
                const int64_t n = block_sizes[si];
                uint64_t rb;
                if (!clb_row_bytes(a, n, &rb)) continue;
                float *f = malloc((size_t)n * sizeof(float));
                uint8_t *q1 = malloc(rb), *q2 = malloc(rb);
                for (int64_t i = 0; i < n; i++) f[i] = rnd_f() * (float)(1 + rnd() % 100);
                for (int64_t i = 0; i < 32 && i < n; i++) f[i] = 0.0f; /* zero block */
                if (n >= 64) {
                    /* amax 127 -> d = 1, id = 1: exact .5 ties must round away from zero */
                    for (int64_t i = 32; i < 64; i++) f[i] = (float)((int)(i - 48)) + 0.5f;
                    f[40] = -127.0f;
                }
                if (n >= 96) for (int64_t i = 64; i < 96; i++) f[i] = rnd_f() * 1e-30f; /* tiny */
                if (n >= 512) { /* second Q8_K block: -127 first of two largest magnitudes -> scale 1 */
                    for (int64_t i = 256; i < 512; i++) f[i] = rnd_f() * 100.0f;
                    f[260] = -127.0f;
                    f[261] = 127.0f;
                    f[262] = 2.5f;  /* ties: half to even in Q8_K */
                    f[263] = -3.5f;
                    f[264] = 0.5f;
                }
                if (a == CLB_DT_F16 || a == CLB_DT_BF16) { /* the KV cache's: every rounding case */
                    const float sp[] = {INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                                        1e-8f, -1e-8f, 0x1p-25f, 0x1.8p-24f, 0x1.4p-24f, 0x1p-24f, 0x1p-26f,
                                        0x1.002p0f, 0x1.006p0f, 0x1.0011p0f, 6.1e-5f, -0.0f, 3.0e38f, 1e-40f};
                    for (size_t j = 0; j < sizeof sp / sizeof sp[0] && 96 + (int64_t)j < n; j++) f[96 + j] = sp[j];
                    if (n >= 160) { /* a NaN with a payload, as a float's bits */
                        const uint32_t bits = 0x7fa01234u;
                        memcpy(&f[150], &bits, 4);
                    }
                }
                memset(q1, 0x11, rb);
                memset(q2, 0x22, rb);
                k->quantize[a](f, q1, n);
                g->quantize[a](f, q2, n);
                if (memcmp(q1, q2, rb) != 0)
                    fail_msg("%s quantize %s n=%lld differs from the reference", k->isa, clb_dtype_name(a),
                             (long long)n);
                if (a == CLB_DT_Q8_0 && n >= 64) {
                    const int8_t *qs = (const int8_t *)(q1 + 34 + 2);
                    assert_int_equal(q1[34] | (q1[35] << 8), 0x3c00);
                    assert_int_equal(qs[0], -16);       /* -15.5 -> -16 */
                    assert_int_equal(qs[15], -1);       /* -0.5 -> -1 */
                    assert_int_equal(qs[16], 1);        /* 0.5 -> 1 */
                    assert_int_equal(qs[17], 2);        /* 1.5 -> 2 */
                    assert_int_equal(qs[18], 3);        /* 2.5 -> 3 */
                    assert_int_equal(qs[8], -127);
                }
                checked++;
                free(f);
                free(q1);
                free(q2);
            }
        }
    }
    if (n_simd_tables) assert_true(checked > 0);
}

/* ---- dispatch ------------------------------------------------------------------------ */

static int child_default_ok = -1; /* set in main: clb_kernels_get() without COLIBRI_ISA */

static void test_dispatch(void **state) {
    (void)state;
    const clb_kernels *g = clb_kernels_generic();
    assert_string_equal(g->isa, "generic");
    /* main() set COLIBRI_ISA=generic before the first call */
    assert_ptr_equal(clb_kernels_get(), g);
    assert_ptr_equal(clb_kernels_by_isa("generic"), g);
    assert_null(clb_kernels_by_isa("sse9"));
    assert_null(clb_kernels_by_isa(NULL));
    const clb_kernels *s = clb_kernels_simd();
    const clb_cpu_features *cpu = clb_cpu();
#if defined(__x86_64__)
    if (cpu->avx2 && cpu->fma && cpu->f16c) {
        assert_non_null(s);
        /* the best table: AVX-512 VNNI/VBMI, else AVX-VNNI, where the CPU has them */
        const bool has512 = cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512vnni && cpu->avx512vbmi;
        assert_true((clb_kernels_by_isa("avx512") != NULL) == has512);
        assert_string_equal(s->isa, has512 ? "avx512" : clb_kernels_by_isa("avx2+vnni") ? "avx2+vnni" : "avx2");
    } else {
        assert_null(s);
    }
    assert_null(clb_kernels_by_isa("neon"));
#elif defined(__aarch64__)
    assert_non_null(s);
    assert_string_equal(s->isa, cpu->dotprod && cpu->i8mm ? "neon+i8mm" : cpu->dotprod ? "neon+dotprod" : "neon");
    assert_non_null(clb_kernels_by_isa("neon"));
    assert_true((clb_kernels_by_isa("neon+dotprod") != NULL) == cpu->dotprod);
    assert_true((clb_kernels_by_isa("neon+i8mm") != NULL) == (cpu->dotprod && cpu->i8mm));
    /* every NEON level computes the packable types on packed rows */
    assert_true(clb_kernels_packs(clb_kernels_by_isa("neon"), CLB_DT_Q4_0));
    assert_true(clb_kernels_packs(clb_kernels_by_isa("neon"), CLB_DT_Q8_0));
    assert_true(clb_kernels_packs(clb_kernels_by_isa("neon"), CLB_DT_Q4_K));
    print_message("aarch64 CPU: %s\n", clb_cpu_describe());
    if (cpu->dotprod) /* the two variants really are different code */
        assert_true(clb_kernels_by_isa("neon")->vec_dot[CLB_DT_Q8_0] !=
                    clb_kernels_by_isa("neon+dotprod")->vec_dot[CLB_DT_Q8_0]);
#endif
    /* every table is complete: SIMD tables inherit what they do not override */
    for (size_t i = 0; i < sizeof(simd_isas) / sizeof(simd_isas[0]); i++) {
        const clb_kernels *k = clb_kernels_by_isa(simd_isas[i]);
        if (!k) continue;
        assert_non_null(k->axpy_f32);
        for (int t = 0; t < CLB_DT_COUNT; t++) {
            assert_true((k->vec_dot[t] != NULL) == (g->vec_dot[t] != NULL));
            assert_true((k->dequantize[t] != NULL) == (g->dequantize[t] != NULL));
            assert_true((k->quantize[t] != NULL) == (g->quantize[t] != NULL));
        }
    }
    assert_int_equal(child_default_ok, 1);
}

int main(void) {
    /* Default selection, checked in a child before this process builds its tables. */
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("COLIBRI_ISA");
        const clb_kernels *s = clb_kernels_simd();
        _exit(clb_kernels_get() == (s ? s : clb_kernels_generic()) ? 0 : 1);
    }
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid) child_default_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    setenv("COLIBRI_ISA", "generic", 1);
    for (size_t i = 0; i < sizeof(simd_isas) / sizeof(simd_isas[0]); i++)
        if (clb_kernels_by_isa(simd_isas[i])) n_simd_tables++;

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_simd_vec_dot),
        cmocka_unit_test(test_simd_quantize),
        cmocka_unit_test(test_axpy),
        cmocka_unit_test(test_generic_matches_dequant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
