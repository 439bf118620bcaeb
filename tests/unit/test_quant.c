/* test_quant.c — dtype table, fp16/bf16 conversions, block layouts (dequantizers checked
 * against blocks built byte by byte from the documented ggml layouts), quantizer error
 * bounds, and bit-exactness with llama-quantize on the mixtral fixture. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kernels.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float rnd_f(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* ---- type table ---------------------------------------------------------------------- */

static void test_type_table(void **state) {
    (void)state;
    const clb_type_info *t = clb_type(CLB_DT_Q4_0);
    assert_non_null(t);
    assert_string_equal(t->name, "q4_0");
    assert_int_equal(t->block_size, 32);
    assert_int_equal(t->block_bytes, 18);
    assert_int_equal(t->vec_dot_type, CLB_DT_Q8_0);
    assert_true(t->is_quantized);
    struct { int id, bs, bb, vdt; } want[] = {
        {CLB_DT_F32, 1, 4, CLB_DT_F32},      {CLB_DT_F16, 1, 2, CLB_DT_F32},
        {CLB_DT_BF16, 1, 2, CLB_DT_F32},     {CLB_DT_Q4_1, 32, 20, CLB_DT_Q8_0},
        {CLB_DT_Q5_0, 32, 22, CLB_DT_Q8_0},  {CLB_DT_Q5_1, 32, 24, CLB_DT_Q8_0},
        {CLB_DT_Q8_0, 32, 34, CLB_DT_Q8_0},  {CLB_DT_Q2_K, 256, 84, CLB_DT_Q8_K},
        {CLB_DT_Q3_K, 256, 110, CLB_DT_Q8_K}, {CLB_DT_Q4_K, 256, 144, CLB_DT_Q8_K},
        {CLB_DT_Q5_K, 256, 176, CLB_DT_Q8_K}, {CLB_DT_Q6_K, 256, 210, CLB_DT_Q8_K},
        {CLB_DT_Q8_K, 256, 292, CLB_DT_Q8_K}, {CLB_DT_IQ4_NL, 32, 18, CLB_DT_Q8_0},
        {CLB_DT_IQ4_XS, 256, 136, CLB_DT_Q8_K}, {CLB_DT_MXFP4, 32, 17, CLB_DT_Q8_0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        t = clb_type(want[i].id);
        assert_non_null(t);
        assert_int_equal(t->block_size, want[i].bs);
        assert_int_equal(t->block_bytes, want[i].bb);
        assert_int_equal(t->vec_dot_type, want[i].vdt);
        assert_int_equal(t->is_quantized, want[i].bs > 1);
    }
    assert_false(clb_type(CLB_DT_F32)->is_quantized);
    assert_null(clb_type(4)); /* removed ggml type ids */
    assert_null(clb_type(5));
    assert_null(clb_type(-1));
    assert_null(clb_type(CLB_DT_COUNT));
    assert_null(clb_type(1000));

    clb_dtype d;
    assert_int_equal(clb_dtype_from_name("Q4_K", &d), 0);
    assert_int_equal(d, CLB_DT_Q4_K);
    assert_int_equal(clb_dtype_from_name("bf16", &d), 0);
    assert_int_equal(d, CLB_DT_BF16);
    assert_int_equal(clb_dtype_from_name("MXFP4", &d), 0);
    assert_int_equal(d, CLB_DT_MXFP4);
    assert_int_equal(clb_dtype_from_name("iq4_nl", &d), 0);
    assert_int_equal(d, CLB_DT_IQ4_NL);
    assert_int_equal(clb_dtype_from_name("q4", &d), -1);
    assert_int_equal(clb_dtype_from_name("q4_0x", &d), -1);
    assert_int_equal(clb_dtype_from_name("", &d), -1);
    assert_int_equal(clb_dtype_from_name(NULL, &d), -1);
    assert_string_equal(clb_dtype_name(CLB_DT_Q6_K), "q6_k");
    assert_string_equal(clb_dtype_name(77), "unknown(77)");
    assert_string_equal(clb_dtype_name(-3), "unknown(-3)");

    assert_true(clb_dtype_is_weight(CLB_DT_Q4_0));
    assert_true(clb_dtype_is_weight(CLB_DT_F16));
    assert_true(clb_dtype_is_weight(CLB_DT_Q6_K));
    assert_true(clb_dtype_is_weight(CLB_DT_MXFP4));
    assert_false(clb_dtype_is_weight(CLB_DT_Q8_K)); /* activation-only */
    assert_false(clb_dtype_is_weight(CLB_DT_Q8_1));
    assert_false(clb_dtype_is_weight(4));
    assert_false(clb_dtype_is_weight(99));
    assert_true(clb_dtype_can_quantize(CLB_DT_Q8_0));
    assert_true(clb_dtype_can_quantize(CLB_DT_Q4_0));
    assert_true(clb_dtype_can_quantize(CLB_DT_BF16));
    assert_true(clb_dtype_can_quantize(CLB_DT_Q4_K));
    assert_true(clb_dtype_can_quantize(CLB_DT_IQ4_XS));
    assert_true(clb_dtype_can_quantize(CLB_DT_MXFP4));
    assert_false(clb_dtype_can_quantize(CLB_DT_Q8_K)); /* activation-only */
    assert_false(clb_dtype_can_quantize(CLB_DT_Q8_1));
    assert_false(clb_dtype_can_quantize(99));
}

static void test_row_bytes(void **state) {
    (void)state;
    uint64_t b = 0;
    assert_true(clb_row_bytes(CLB_DT_Q4_0, 4096, &b));
    assert_int_equal(b, 4096 / 32 * 18);
    assert_true(clb_row_bytes(CLB_DT_F32, 7, &b));
    assert_int_equal(b, 28);
    assert_true(clb_row_bytes(CLB_DT_BF16, 3, &b));
    assert_int_equal(b, 6);
    assert_true(clb_row_bytes(CLB_DT_Q8_K, 512, &b));
    assert_int_equal(b, 584);
    assert_true(clb_row_bytes(CLB_DT_MXFP4, 64, &b));
    assert_int_equal(b, 34);
    assert_true(clb_row_bytes(CLB_DT_Q8_0, 0, &b));
    assert_int_equal(b, 0);
    assert_false(clb_row_bytes(CLB_DT_Q4_0, 33, &b));
    assert_false(clb_row_bytes(CLB_DT_Q4_0, 16, &b));
    assert_false(clb_row_bytes(CLB_DT_Q4_K, 255, &b));
    assert_false(clb_row_bytes(CLB_DT_Q6_K, 288, &b));
    assert_false(clb_row_bytes(CLB_DT_F32, -1, &b));
    assert_false(clb_row_bytes(4, 32, &b));
    assert_false(clb_row_bytes(99, 32, &b));
    assert_false(clb_row_bytes(CLB_DT_F32, INT64_MAX, &b)); /* 4 * (2^63-1) overflows */
    assert_true(clb_row_bytes(CLB_DT_F32, INT64_MAX / 4, &b));
}

/* ---- fp16 / bf16 --------------------------------------------------------------------- */

static void test_fp16_values(void **state) {
    (void)state;
    struct { float f; uint16_t h; } v[] = {
        {0.0f, 0x0000},       {1.0f, 0x3c00},     {-2.0f, 0xc000},     {0.5f, 0x3800},
        {65504.0f, 0x7bff},   {65519.0f, 0x7bff}, {65520.0f, 0x7c00},  {1e9f, 0x7c00},
        {-1e9f, 0xfc00},      {0x1p-14f, 0x0400}, {0x1p-24f, 0x0001},  {0x1p-25f, 0x0000},
        {0x1.0002p-25f, 0x0001}, {0x1.8p-24f, 0x0002}, {0x1.4p-23f, 0x0002}, /* ties to even */
        {1023 * 0x1p-24f, 0x03ff}, {0x1p-26f, 0x0000}, {1.0f + 0x1p-11f, 0x3c00},
        {1.0f + 0x3p-11f, 0x3c02}, {1.0f + 0x1.01p-11f, 0x3c01}, {0.1f, 0x2e66},
        {-0.0f, 0x8000},      {2047 * 0x1p-25f, 0x0400}, {-0x1p-24f, 0x8001},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        if (clb_fp32_to_fp16(v[i].f) != v[i].h)
            fail_msg("fp32_to_fp16(%a) = 0x%04x, want 0x%04x", (double)v[i].f, clb_fp32_to_fp16(v[i].f), v[i].h);
    }
    assert_int_equal(clb_fp32_to_fp16(INFINITY), 0x7c00);
    assert_int_equal(clb_fp32_to_fp16(-INFINITY), 0xfc00);
    uint16_t hn = clb_fp32_to_fp16(NAN);
    assert_int_equal(hn & 0x7c00, 0x7c00);
    assert_true((hn & 0x3ff) != 0);
    assert_true(isnan(clb_fp16_to_fp32(0x7e00)));
    assert_true(isnan(clb_fp16_to_fp32(0xfc01)));
    assert_true(isinf(clb_fp16_to_fp32(0x7c00)) && clb_fp16_to_fp32(0x7c00) > 0);
    assert_true(clb_fp16_to_fp32(0x0001) == 0x1p-24f);
    assert_true(clb_fp16_to_fp32(0x03ff) == 1023 * 0x1p-24f);
    assert_true(clb_fp16_to_fp32(0x7bff) == 65504.0f);
    assert_true(fbits(clb_fp16_to_fp32(0x8000)) == 0x80000000u);
    assert_true(clb_fp16_to_fp32(0x3555) == 0x1.554p-2f);
    /* every half round-trips; NaNs stay NaN */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = clb_fp16_to_fp32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            assert_true(isnan(f));
            assert_true(isnan(clb_fp16_to_fp32(clb_fp32_to_fp16(f))));
        } else if (clb_fp32_to_fp16(f) != h) {
            fail_msg("half 0x%04x does not round-trip", h);
        }
    }
}

/* Independent oracle: nearest representable half (ties to even mantissa) by comparing
   against the neighbours in double. */
static void test_fp16_rounding_random(void **state) {
    (void)state;
    for (int it = 0; it < 200000; it++) {
        /* floats spread over the half range, subnormals included */
        float f = bitsf((uint32_t)(0x33000000u + rnd() % (0x477ff000u - 0x33000000u)));
        if (rnd() & 1) f = -f;
        uint16_t h = clb_fp32_to_fp16(f);
        double got = clb_fp16_to_fp32(h), x = f;
        assert_true(!isinf(got));
        uint16_t mag = h & 0x7fff;
        double up = clb_fp16_to_fp32((uint16_t)((h & 0x8000) | (mag + 1)));
        double dn = mag ? clb_fp16_to_fp32((uint16_t)((h & 0x8000) | (mag - 1))) : -got;
        double e = fabs(got - x);
        if (!(e <= fabs(up - x) && e <= fabs(dn - x)))
            fail_msg("fp16(%a) = 0x%04x not nearest", (double)f, h);
        if ((e == fabs(up - x) || e == fabs(dn - x)) && (h & 1))
            fail_msg("fp16(%a) = 0x%04x tie not even", (double)f, h);
    }
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(clb_fp32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(clb_fp32_to_bf16(-2.0f), 0xc000);
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x3f808000u)), 0x3f80); /* tie -> even */
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x3f818000u)), 0x3f82); /* tie -> even */
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x3f808001u)), 0x3f81);
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x3f807fffu)), 0x3f80);
    assert_int_equal(clb_fp32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(clb_fp32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds up */
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x00000001u)), 0x0000); /* tiny subnormal */
    assert_int_equal(clb_fp32_to_bf16(bitsf(0x00018000u)), 0x0002); /* subnormal tie */
    uint16_t n = clb_fp32_to_bf16(bitsf(0x7f800001u)); /* signalling NaN, payload in low bits */
    assert_true((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    assert_true(isnan(clb_bf16_to_fp32(n)));
    assert_true(clb_bf16_to_fp32(0x3f80) == 1.0f);
    assert_true(clb_bf16_to_fp32(0x0001) == bitsf(0x00010000u));
    for (uint32_t h = 0; h < 65536; h++) {
        float f = clb_bf16_to_fp32((uint16_t)h);
        if (isnan(f)) assert_true(isnan(clb_bf16_to_fp32(clb_fp32_to_bf16(f))));
        else if (clb_fp32_to_bf16(f) != h) fail_msg("bf16 0x%04x does not round-trip", h);
    }
}

/* ---- dequantizers against hand-built blocks ------------------------------------------ */

static void deq(clb_dtype t, const void *blk, float *out, int64_t n) { clb_dequantize_row_ref(t, blk, out, n); }

static void test_dequant_float_types(void **state) {
    (void)state;
    uint8_t f16[6], bf[6];
    put16(f16, 0x3c00); put16(f16 + 2, 0xc500); put16(f16 + 4, 0x0001);
    put16(bf, 0x3f80); put16(bf + 2, 0xc0a0); put16(bf + 4, 0x4049);
    float o[3];
    deq(CLB_DT_F16, f16, o, 3);
    assert_true(o[0] == 1.0f && o[1] == -5.0f && o[2] == 0x1p-24f);
    deq(CLB_DT_BF16, bf, o, 3);
    assert_true(o[0] == 1.0f && o[1] == -5.0f && o[2] == bitsf(0x40490000u));
    float src[3] = {1.5f, -0.25f, 3e38f}, o2[3];
    deq(CLB_DT_F32, src, o2, 3);
    assert_memory_equal(src, o2, sizeof(src));
}

static void test_dequant_q8_0(void **state) {
    (void)state;
    uint8_t b[2 * 34];
    put16(b, 0x3400);      /* d = 0.25 */
    put16(b + 34, 0xc000); /* d = -2 */
    for (int j = 0; j < 32; j++) {
        b[2 + j] = (uint8_t)(j * 8);      /* int8: 0, 8, ..., 120, -128, ..., -8 */
        b[36 + j] = (uint8_t)(j - 16);
    }
    float o[64];
    deq(CLB_DT_Q8_0, b, o, 64);
    for (int j = 0; j < 32; j++) {
        assert_true(o[j] == (float)(int8_t)(uint8_t)(j * 8) * 0.25f);
        assert_true(o[32 + j] == (float)(j - 16) * -2.0f);
    }
    assert_true(o[16] == -32.0f); /* byte 128 = int8 -128 */
}

static void test_dequant_q4_0(void **state) {
    (void)state;
    uint8_t b[18];
    put16(b, 0x3800); /* d = 0.5 */
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float o[32];
    deq(CLB_DT_Q4_0, b, o, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(o[j] == (float)(j - 8) * 0.5f);           /* low nibble -> weight j */
        assert_true(o[j + 16] == (float)(7 - j) * 0.5f);      /* high nibble -> weight j+16 */
    }
}

static const int8_t kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

/* Scales are powers of two and quants small integers, so every expected value below is
   exact in float and the comparisons are exact. */
static void test_dequant_legacy_32(void **state) {
    (void)state;
    float o[32];
    uint8_t b[24];
    /* Q4_1: d = 0.5, m = -1 */
    put16(b, 0x3800); put16(b + 2, 0xbc00);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    deq(CLB_DT_Q4_1, b, o, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(o[j] == (float)j * 0.5f - 1.0f);
        assert_true(o[j + 16] == (float)(15 - j) * 0.5f - 1.0f);
    }
    /* Q5_0: d = 0.25, qh = bytes 0f f0 55 aa = le u32 0xaa55f00f; bit i is weight i's 5th bit */
    const uint32_t qh = 0xaa55f00fu;
    put16(b, 0x3400);
    b[2] = 0x0f; b[3] = 0xf0; b[4] = 0x55; b[5] = 0xaa;
    for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)(j | (((3 * j) & 15) << 4));
    deq(CLB_DT_Q5_0, b, o, 32);
    for (int j = 0; j < 16; j++) {
        int q0 = j + 16 * (int)((qh >> j) & 1), q1 = ((3 * j) & 15) + 16 * (int)((qh >> (j + 16)) & 1);
        assert_true(o[j] == (float)(q0 - 16) * 0.25f);
        assert_true(o[j + 16] == (float)(q1 - 16) * 0.25f);
    }
    assert_true(o[0] == 0.25f * (0 + 16 - 16));   /* bit 0 set */
    assert_true(o[4] == 0.25f * (4 - 16));        /* bit 4 clear */
    /* Q5_1: d = 0.5, m = 0.25, same qh */
    put16(b, 0x3800); put16(b + 2, 0x3400);
    b[4] = 0x0f; b[5] = 0xf0; b[6] = 0x55; b[7] = 0xaa;
    for (int j = 0; j < 16; j++) b[8 + j] = (uint8_t)(j | (((3 * j) & 15) << 4));
    deq(CLB_DT_Q5_1, b, o, 32);
    for (int j = 0; j < 16; j++) {
        int q0 = j + 16 * (int)((qh >> j) & 1), q1 = ((3 * j) & 15) + 16 * (int)((qh >> (j + 16)) & 1);
        assert_true(o[j] == (float)q0 * 0.5f + 0.25f);
        assert_true(o[j + 16] == (float)q1 * 0.5f + 0.25f);
    }
    /* IQ4_NL: d = 2 */
    put16(b, 0x4000);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    deq(CLB_DT_IQ4_NL, b, o, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(o[j] == 2.0f * kv_iq4nl[j]);
        assert_true(o[j + 16] == 2.0f * kv_iq4nl[15 - j]);
    }
}

static void test_dequant_mxfp4(void **state) {
    (void)state;
    /* E8M0 scale 2^(e-127) times the E2M1 value of each nibble */
    const uint8_t es[4] = {127, 130, 1, 0};
    const float scale[4] = {1.0f, 8.0f, 0x1p-126f, 0x1p-127f};
    uint8_t b[4 * 17];
    for (int k = 0; k < 4; k++) {
        b[17 * k] = es[k];
        for (int j = 0; j < 16; j++) b[17 * k + 1 + j] = (uint8_t)(((j + k) & 15) | ((15 - j) << 4));
    }
    float o[128];
    deq(CLB_DT_MXFP4, b, o, 128);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 16; j++) {
            if (o[32 * k + j] != e2m1[(j + k) & 15] * scale[k] || o[32 * k + j + 16] != e2m1[15 - j] * scale[k])
                fail_msg("mxfp4 block %d weight %d: %a", k, j, (double)o[32 * k + j]);
        }
    assert_true(o[32 + 6] == 6.0f * 8.0f); /* block 1, weight 6: nibble 7 at scale 8 */
    assert_true(o[7] == 6.0f);  /* nibble 7 -> 6.0 at scale 1 */
    assert_true(o[16] == -6.0f); /* nibble 15 -> -6.0 */
}

/* expected K-quant values, written per weight index straight from the layout description */
static int bits(int v, int shift, int n) { return (v >> shift) & ((1 << n) - 1); }

static void test_dequant_q2_k_q3_k(void **state) {
    (void)state;
    float o[256];
    uint8_t b[110];
    /* Q2_K: scales[16] (scale low nibble, min high nibble), qs[64], d = 0.5, dmin = 0.25.
       Weight e: half h = e/128, plane p = (e%128)/32, l = e%32: q = (qs[32h+l] >> 2p) & 3,
       sub-block e/16. */
    for (int j = 0; j < 16; j++) b[j] = (uint8_t)((j & 15) | (((7 * j + 3) & 15) << 4));
    for (int k = 0; k < 64; k++) b[16 + k] = (uint8_t)(37 * k + 11);
    put16(b + 80, 0x3800); put16(b + 82, 0x3400);
    deq(CLB_DT_Q2_K, b, o, 256);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, p = (e % 128) / 32, l = e % 32, sb = e / 16;
        int q = bits(b[16 + 32 * h + l], 2 * p, 2);
        float want = 0.5f * (float)(b[sb] & 15) * (float)q - 0.25f * (float)(b[sb] >> 4);
        if (o[e] != want) fail_msg("q2_k weight %d: %g want %g", e, (double)o[e], (double)want);
    }
    /* Q3_K: hmask[32], qs[64], scales[12], d = 0.25. High bit of weight e is bit 4h+p of
       hmask[l]; clear means q - 4. 6-bit scale j: low 4 bits in byte j (j<8, low nibble) or
       byte j-8 (high nibble), high 2 bits in byte 8 + j%4 at bit 2*(j/4); minus 32. */
    int sc6[16] = {0, 1, 31, 32, 33, 63, 17, 48, 5, 40, 22, 60, 9, 32, 44, 2};
    memset(b, 0, sizeof(b));
    for (int k = 0; k < 32; k++) b[k] = (uint8_t)(29 * k + 5);
    for (int k = 0; k < 64; k++) b[32 + k] = (uint8_t)(53 * k + 7);
    for (int j = 0; j < 16; j++) {
        b[96 + (j % 8)] |= (uint8_t)((sc6[j] & 15) << (j < 8 ? 0 : 4));
        b[96 + 8 + j % 4] |= (uint8_t)((sc6[j] >> 4) << (2 * (j / 4)));
    }
    put16(b + 108, 0x3400);
    deq(CLB_DT_Q3_K, b, o, 256);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, p = (e % 128) / 32, l = e % 32, sb = e / 16;
        int q = bits(b[32 + 32 * h + l], 2 * p, 2) - (bits(b[l], 4 * h + p, 1) ? 0 : 4);
        float want = 0.25f * (float)(sc6[sb] - 32) * (float)q;
        if (o[e] != want) fail_msg("q3_k weight %d: %g want %g", e, (double)o[e], (double)want);
    }
}

/* Q4_K/Q5_K 6-bit scale+min packing: j<4: byte j (scale), byte j+4 (min), low 6 bits;
   j>=4: low 4 bits in byte j+4 (scale low nibble, min high nibble), high 2 bits in the top
   bits of byte j-4 (scale) and byte j (min). */
static void pack_k4_scales(const int *sc, const int *mn, uint8_t *p) {
    memset(p, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            p[j] |= (uint8_t)sc[j];
            p[j + 4] |= (uint8_t)mn[j];
        } else {
            p[j + 4] = (uint8_t)((sc[j] & 15) | ((mn[j] & 15) << 4));
            p[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            p[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

static void test_dequant_q4_k_q5_k(void **state) {
    (void)state;
    const int sc[8] = {1, 63, 17, 32, 5, 60, 33, 48}, mn[8] = {0, 7, 63, 40, 12, 1, 55, 30};
    uint8_t b[176];
    float o[256];
    /* Q4_K: d, dmin, scales[12], qs[128]. Weight e: chunk c = e/64, r = e%64: q = low nibble
       of qs[32c+r] (r<32) or high nibble of qs[32c+r-32]; sub-block e/32. */
    put16(b, 0x3800); put16(b + 2, 0x3000); /* d = 0.5, dmin = 0.125 */
    pack_k4_scales(sc, mn, b + 4);
    for (int k = 0; k < 128; k++) b[16 + k] = (uint8_t)(71 * k + 3);
    deq(CLB_DT_Q4_K, b, o, 256);
    for (int e = 0; e < 256; e++) {
        int c = e / 64, r = e % 64, sb = e / 32;
        int q = r < 32 ? bits(b[16 + 32 * c + r], 0, 4) : bits(b[16 + 32 * c + r - 32], 4, 4);
        float want = 0.5f * (float)sc[sb] * (float)q - 0.125f * (float)mn[sb];
        if (o[e] != want) fail_msg("q4_k weight %d: %g want %g", e, (double)o[e], (double)want);
    }
    /* Q5_K: d, dmin, scales[12], qh[32], qs[128]; 5th bit of weight e is bit (e/32) of
       qh[e%32]. */
    put16(b, 0x3800); put16(b + 2, 0x3000);
    pack_k4_scales(sc, mn, b + 4);
    for (int k = 0; k < 32; k++) b[16 + k] = (uint8_t)(91 * k + 17);
    for (int k = 0; k < 128; k++) b[48 + k] = (uint8_t)(71 * k + 3);
    deq(CLB_DT_Q5_K, b, o, 256);
    for (int e = 0; e < 256; e++) {
        int c = e / 64, r = e % 64, sb = e / 32;
        int q = r < 32 ? bits(b[48 + 32 * c + r], 0, 4) : bits(b[48 + 32 * c + r - 32], 4, 4);
        q += 16 * bits(b[16 + e % 32], sb, 1);
        float want = 0.5f * (float)sc[sb] * (float)q - 0.125f * (float)mn[sb];
        if (o[e] != want) fail_msg("q5_k weight %d: %g want %g", e, (double)o[e], (double)want);
    }
}

static void test_dequant_q6_k_iq4_xs(void **state) {
    (void)state;
    uint8_t b[210];
    float o[256];
    /* Q6_K: ql[128], qh[64], int8 scales[16], d. Weight e: half h = e/128, group g =
       (e%128)/32, l = e%32: low 4 bits from ql[64h + l + 32*(g&1)] (low nibble for g<2,
       high for g>=2), high 2 bits = bits 2g..2g+1 of qh[32h+l]; q - 32; scale e/16. */
    for (int k = 0; k < 128; k++) b[k] = (uint8_t)(113 * k + 9);
    for (int k = 0; k < 64; k++) b[128 + k] = (uint8_t)(57 * k + 201);
    const int8_t s6[16] = {1, -1, 127, -128, 5, 64, -7, 3, 0, 100, -50, 2, 9, -9, 33, -33};
    memcpy(b + 192, s6, 16);
    put16(b + 208, 0x3000); /* 0.125 */
    deq(CLB_DT_Q6_K, b, o, 256);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, g = (e % 128) / 32, l = e % 32;
        int lo = bits(b[64 * h + l + 32 * (g & 1)], g < 2 ? 0 : 4, 4);
        int q = (lo | (bits(b[128 + 32 * h + l], 2 * g, 2) << 4)) - 32;
        float want = 0.125f * (float)s6[e / 16] * (float)q;
        if (o[e] != want) fail_msg("q6_k weight %d: %g want %g", e, (double)o[e], (double)want);
    }
    /* IQ4_XS: d, scales_h (le u16), scales_l[4], qs[128]. Sub-block ib (32 weights): scale
       = (nibble ib of scales_l) | (bits 2ib..2ib+1 of scales_h) << 4, minus 32; nibbles as
       IQ4_NL within each 16-byte group. */
    const int ls[8] = {0, 63, 32, 31, 1, 40, 17, 50};
    uint16_t sh = 0;
    uint8_t sl[4] = {0};
    for (int ib = 0; ib < 8; ib++) {
        sl[ib / 2] |= (uint8_t)((ls[ib] & 15) << (4 * (ib % 2)));
        sh |= (uint16_t)((ls[ib] >> 4) << (2 * ib));
    }
    put16(b, 0x3800); /* 0.5 */
    put16(b + 2, sh);
    memcpy(b + 4, sl, 4);
    for (int k = 0; k < 128; k++) b[8 + k] = (uint8_t)(45 * k + 6);
    deq(CLB_DT_IQ4_XS, b, o, 256);
    for (int e = 0; e < 256; e++) {
        int ib = e / 32, r = e % 32;
        int nib = r < 16 ? bits(b[8 + 16 * ib + r], 0, 4) : bits(b[8 + 16 * ib + r - 16], 4, 4);
        float want = 0.5f * (float)(ls[ib] - 32) * (float)kv_iq4nl[nib];
        if (o[e] != want) fail_msg("iq4_xs weight %d: %g want %g", e, (double)o[e], (double)want);
    }
}

/* ---- quantizers ---------------------------------------------------------------------- */

static void test_quant_q8_0_known(void **state) {
    (void)state;
    /* amax 127 -> d = 1 exactly, id = 1: quants are roundf() of the inputs, ties away */
    float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.6f, 3.5f, 0.0f, -0.0f};
    for (int j = 10; j < 32; j++) x[j] = (float)(j - 20) * 1.25f;
    uint8_t b[34];
    clb_quantize_row_ref(CLB_DT_Q8_0, x, b, 32);
    assert_int_equal(b[0] | (b[1] << 8), 0x3c00);
    const int8_t *q = (const int8_t *)(b + 2);
    int8_t want[10] = {127, 3, -3, 1, -1, 1, -127, 4, 0, 0};
    for (int j = 0; j < 10; j++) assert_int_equal(q[j], want[j]);
    for (int j = 10; j < 32; j++) assert_int_equal(q[j], (int)roundf((float)(j - 20) * 1.25f));
    /* all-zero block: d = 0, quants 0 */
    float z[32] = {0};
    memset(b, 0xAA, sizeof(b));
    clb_quantize_row_ref(CLB_DT_Q8_0, z, b, 32);
    for (int j = 0; j < 34; j++) assert_int_equal(b[j], 0);
}

static void test_quant_q4_0_known(void **state) {
    (void)state;
    /* x = j - 16: the largest magnitude is -16 -> d = -16 / -8 = 2, id = 0.5;
       code = trunc(x * 0.5 + 8.5) clamped to 15 */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    uint8_t b[18];
    clb_quantize_row_ref(CLB_DT_Q4_0, x, b, 32);
    assert_int_equal(b[0] | (b[1] << 8), 0x4000); /* d = 2 */
    for (int j = 0; j < 16; j++) {
        int lo = (int)((float)(j - 16) * 0.5f + 8.5f);
        int hi = (int)((float)j * 0.5f + 8.5f);
        if (hi > 15) hi = 15;
        assert_int_equal(b[2 + j] & 0xF, lo);
        assert_int_equal(b[2 + j] >> 4, hi);
    }
    assert_int_equal(b[2] & 0xF, 0);   /* -16 -> code 0 -> (0-8)*2 */
    assert_int_equal(b[17] >> 4, 15);  /* 15 -> 16 clamped to 15 -> 14 */
    /* the sign of d follows the largest-magnitude value */
    for (int j = 0; j < 32; j++) x[j] = (float)j * 0.25f; /* max +7.75 -> d = -0.96875 */
    clb_quantize_row_ref(CLB_DT_Q4_0, x, b, 32);
    assert_true(clb_fp16_to_fp32((uint16_t)(b[0] | (b[1] << 8))) == -0.96875f);
    assert_int_equal(b[2 + 15] >> 4, 0); /* x[31] = 7.75 -> code 0 */
}

static void test_quant_error_bounds(void **state) {
    (void)state;
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t buf[N * 4];
    for (int i = 0; i < N; i++) x[i] = rnd_f() * (i % 97 == 0 ? 30.0f : 3.0f);
    for (int i = 0; i < 32; i++) x[i] = 0.0f; /* one all-zero block */

    clb_quantize_row_ref(CLB_DT_Q8_0, x, buf, N);
    clb_dequantize_row_ref(CLB_DT_Q8_0, buf, y, N);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        float d = amax / 127;
        for (int j = 0; j < 32; j++) {
            float e = fabsf(y[32 * b + j] - x[32 * b + j]);
            if (e > 0.5f * d * 1.0001f + amax * 0x1p-11f) fail_msg("q8_0 err %g at %d", (double)e, 32 * b + j);
        }
    }
    clb_quantize_row_ref(CLB_DT_Q4_0, x, buf, N);
    clb_dequantize_row_ref(CLB_DT_Q4_0, buf, y, N);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        float d = amax / 8;
        for (int j = 0; j < 32; j++) {
            /* half a step, except values of the other sign than the largest one beyond
               7 steps: code 16 is clamped to 15, a full step */
            float e = fabsf(y[32 * b + j] - x[32 * b + j]);
            float lim = fabsf(x[32 * b + j]) > 7.5f * d ? d : 0.5f * d;
            if (e > lim * 1.0001f + amax * 0x1p-10f) fail_msg("q4_0 err %g at %d", (double)e, 32 * b + j);
        }
    }
    clb_quantize_row_ref(CLB_DT_F16, x, buf, N);
    clb_dequantize_row_ref(CLB_DT_F16, buf, y, N);
    for (int i = 0; i < N; i++) assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-11f + 0x1p-25f);
    clb_quantize_row_ref(CLB_DT_BF16, x, buf, N);
    clb_dequantize_row_ref(CLB_DT_BF16, buf, y, N);
    for (int i = 0; i < N; i++) assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-8f);
    clb_quantize_row_ref(CLB_DT_F32, x, buf, N);
    assert_memory_equal(buf, x, sizeof(x));
}

static void test_quant_q8_k(void **state) {
    (void)state;
    enum { N = 512 };
    float x[N], y[N];
    uint8_t buf[2 * 292];
    for (int i = 0; i < 256; i++) x[i] = rnd_f() * 5.0f;
    x[77] = -9.0f; /* largest magnitude, negative */
    for (int i = 256; i < N; i++) x[i] = 0.0f;
    memset(buf, 0x55, sizeof(buf));
    clb_quantize_row_ref(CLB_DT_Q8_K, x, buf, N);
    float d;
    memcpy(&d, buf, 4);
    assert_true(d == 1.0f / (-127.0f / -9.0f));
    const int8_t *q = (const int8_t *)(buf + 4);
    assert_int_equal(q[77], -127);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += q[16 * g + l];
        int16_t bs;
        memcpy(&bs, buf + 4 + 256 + 2 * g, 2);
        assert_int_equal(bs, s);
    }
    clb_dequantize_row_ref(CLB_DT_Q8_K, buf, y, N);
    for (int i = 0; i < 256; i++) assert_true(fabsf(y[i] - x[i]) <= 0.5f * fabsf(d) * 1.0001f);
    for (int i = 256; i < N; i++) assert_true(y[i] == 0.0f);
    for (int j = 0; j < 292; j++) assert_int_equal(buf[292 + j], 0); /* zero block fully zeroed */
}


/* rms(dequant(quant(x)) - x) / rms(x) for one type on n values */
static double rel_rms(clb_dtype t, const float *x, int n) {
    static uint8_t buf[4096 * 4];
    static float y[4096];
    clb_quantize_row_ref(t, x, buf, n);
    clb_dequantize_row_ref(t, buf, y, n);
    double se = 0, ss = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) return INFINITY;
        se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        ss += (double)x[i] * x[i];
    }
    return ss > 0 ? sqrt(se / ss) : sqrt(se);
}

/* The super-block and non-linear quantizers: bounded error on random rows, exact zeros on
   zero blocks, no NaN or crash on degenerate blocks (constant, one outlier, values near the
   smallest floats, a whole row of zeros); MXFP4 reproduces E2M1 values exactly. */
static void test_quant_k_iq_mxfp4(void **state) {
    (void)state;
    enum { N = 4096 };
    static float x[N];
    static uint8_t buf[N * 4];
    static float y[N];
    const struct { clb_dtype t; double lim; } types[] = {
        {CLB_DT_Q2_K, 0.40}, {CLB_DT_Q3_K, 0.22}, {CLB_DT_Q4_K, 0.11}, {CLB_DT_Q5_K, 0.055},
        {CLB_DT_Q6_K, 0.028}, {CLB_DT_IQ4_NL, 0.12}, {CLB_DT_IQ4_XS, 0.12}, {CLB_DT_MXFP4, 0.20},
    };
    for (int i = 0; i < N; i++) x[i] = rnd_f() * (i % 97 == 0 ? 30.0f : 3.0f);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        double e = rel_rms(types[k].t, x, N);
        if (!(e < types[k].lim)) fail_msg("%s: relative rms error %g", clb_dtype_name(types[k].t), e);
    }
    /* degenerate blocks: 256 zeros, 256 equal values, one outlier among tiny values,
       magnitudes around 1e-30 and 1e-40 (subnormal) */
    for (int i = 0; i < 256; i++) x[i] = 0.0f;
    for (int i = 256; i < 512; i++) x[i] = 0.75f;
    for (int i = 512; i < 768; i++) x[i] = i == 600 ? 1000.0f : 1e-3f * rnd_f();
    for (int i = 768; i < 1024; i++) x[i] = 1e-30f * rnd_f();
    for (int i = 1024; i < 1280; i++) x[i] = 1e-40f * (float)(i % 7);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint64_t rb;
        assert_true(clb_row_bytes(types[k].t, 1280, &rb));
        memset(buf, 0x5A, sizeof buf);
        clb_quantize_row_ref(types[k].t, x, buf, 1280);
        clb_dequantize_row_ref(types[k].t, buf, y, 1280);
        for (int i = 0; i < 1280; i++) {
            if (!isfinite(y[i])) fail_msg("%s: non-finite output at %d", clb_dtype_name(types[k].t), i);
            if (i < 256 && y[i] != 0.0f) fail_msg("%s: zero block gives %g", clb_dtype_name(types[k].t), (double)y[i]);
            if (i >= 256 && i < 512 && fabsf(y[i] - 0.75f) > 0.75f * 0.07f)
                fail_msg("%s: constant 0.75 block gives %g", clb_dtype_name(types[k].t), (double)y[i]);
            if (i >= 768 && fabsf(y[i]) > 1e-29f)
                fail_msg("%s: tiny block gives %g", clb_dtype_name(types[k].t), (double)y[i]);
        }
        /* MXFP4's scale is 2^(floor(log2 amax) - 2) (the MX rule ggml follows): 1000 clips to
           6 * 128 = 768 */
        const float olim = types[k].t == CLB_DT_MXFP4 ? 0.25f : 0.1f;
        if (!(fabsf(y[600] - 1000.0f) < 1000.0f * olim)) fail_msg("%s: outlier 1000 gives %g", clb_dtype_name(types[k].t), (double)y[600]);
    }
    /* MXFP4: every E2M1 value times a power of two survives exactly */
    static const float fp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int b = 0; b < 8; b++) {
        float scale = ldexpf(1.0f, b * 5 - 20);
        for (int j = 0; j < 32; j++) x[32 * b + j] = (j & 1 ? -1.0f : 1.0f) * fp4[(j + b) % 8] * scale;
        x[32 * b + 31] = 6.0f * scale; /* the block maximum */
    }
    clb_quantize_row_ref(CLB_DT_MXFP4, x, buf, 256);
    clb_dequantize_row_ref(CLB_DT_MXFP4, buf, y, 256);
    for (int i = 0; i < 256; i++)
        if (y[i] != x[i]) fail_msg("mxfp4: %g came back as %g", (double)x[i], (double)y[i]);
    /* NaN and infinities: defined bytes, no trap (the sanitizers check the conversions) */
    for (int i = 0; i < 256; i++) x[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -1.0f;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) clb_quantize_row_ref(types[k].t, x, buf, 256);
}

/* ---- llama-quantize bit-exactness on the mixtral fixture ------------------------------ */

typedef struct { char name[96]; int type; uint64_t ne0, nel, off; } gg_tensor;
typedef struct { uint8_t *data; size_t size; size_t pos; int ok; } gg_reader;

static uint64_t gg_u(gg_reader *r, int bytes) {
    if (!r->ok || r->size - r->pos < (size_t)bytes || r->pos > r->size) { r->ok = 0; return 0; }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->data[r->pos + i] << (8 * i);
    r->pos += (size_t)bytes;
    return v;
}
static void gg_skip(gg_reader *r, uint64_t n) {
    if (!r->ok || n > r->size - r->pos) { r->ok = 0; return; }
    r->pos += (size_t)n;
}
static void gg_skip_val(gg_reader *r, uint32_t t, int depth) {
    static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t == 8) gg_skip(r, gg_u(r, 8));
    else if (t == 9 && depth == 0) {
        uint32_t et = (uint32_t)gg_u(r, 4);
        uint64_t n = gg_u(r, 8);
        for (uint64_t i = 0; i < n && r->ok; i++) gg_skip_val(r, et, 1);
    } else if (t < 13 && sz[t]) gg_skip(r, (uint64_t)sz[t]);
    else r->ok = 0;
}

/* Returns tensor count (<= max) with data offsets made absolute, or -1. */
static int gg_load(const char *path, gg_reader *r, gg_tensor *ts, int max) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    r->data = malloc((size_t)sz);
    r->size = (size_t)sz;
    r->pos = 0;
    r->ok = r->data && fread(r->data, 1, (size_t)sz, f) == (size_t)sz;
    fclose(f);
    if (!r->ok || memcmp(r->data, "GGUF", 4) != 0) return -1;
    r->pos = 4;
    gg_u(r, 4);
    uint64_t nt = gg_u(r, 8), nkv = gg_u(r, 8);
    uint64_t align = 32;
    for (uint64_t i = 0; i < nkv && r->ok; i++) {
        uint64_t kl = gg_u(r, 8);
        int is_align = r->ok && kl == 17 && kl <= r->size - r->pos &&
                       memcmp(r->data + r->pos, "general.alignment", 17) == 0;
        gg_skip(r, kl);
        uint32_t t = (uint32_t)gg_u(r, 4);
        if (is_align && t == 4) align = gg_u(r, 4);
        else gg_skip_val(r, t, 0);
    }
    if (nt > (uint64_t)max) return -1;
    for (uint64_t i = 0; i < nt && r->ok; i++) {
        uint64_t nl = gg_u(r, 8);
        if (nl >= sizeof(ts[i].name) || nl > r->size - r->pos) return -1;
        memcpy(ts[i].name, r->data + r->pos, (size_t)nl);
        ts[i].name[nl] = 0;
        gg_skip(r, nl);
        uint32_t nd = (uint32_t)gg_u(r, 4);
        if (nd == 0 || nd > 4) return -1;
        ts[i].nel = 1;
        for (uint32_t k = 0; k < nd; k++) {
            uint64_t ne = gg_u(r, 8);
            if (k == 0) ts[i].ne0 = ne;
            ts[i].nel *= ne;
        }
        ts[i].type = (int)gg_u(r, 4);
        ts[i].off = gg_u(r, 8);
    }
    if (!r->ok) return -1;
    uint64_t base = (r->pos + align - 1) / align * align;
    for (uint64_t i = 0; i < nt; i++) {
        uint64_t rb;
        if (!clb_row_bytes(ts[i].type, (int64_t)ts[i].ne0, &rb)) return -1;
        ts[i].off += base;
        if (ts[i].off > r->size || rb * (ts[i].nel / ts[i].ne0) > r->size - ts[i].off) return -1;
    }
    return (int)nt;
}

static void check_against_llama_quantize(const char *qpath, int *n_exact, int *n_deq) {
    static gg_tensor tf[64], tq[64];
    gg_reader rf, rq;
    int nf = gg_load("tests/fixtures/mixtral/model-f32.gguf", &rf, tf, 64);
    int nq = gg_load(qpath, &rq, tq, 64);
    assert_true(nf > 0);
    assert_int_equal(nf, nq);
    for (int i = 0; i < nq; i++) {
        const gg_tensor *q = &tq[i], *f = NULL;
        for (int k = 0; k < nf; k++)
            if (strcmp(tf[k].name, q->name) == 0) f = &tf[k];
        assert_non_null(f);
        assert_int_equal(f->type, CLB_DT_F32);
        assert_int_equal(f->nel, q->nel);
        if (q->type == CLB_DT_F32) continue;
        const float *src = (const float *)(rf.data + f->off);
        uint64_t qbytes;
        assert_true(clb_row_bytes(q->type, (int64_t)q->nel, &qbytes));
        if (clb_dtype_can_quantize(q->type)) {
            uint8_t *mine = malloc((size_t)qbytes);
            clb_quantize_row_ref((clb_dtype)q->type, src, mine, (int64_t)q->nel);
            if (memcmp(mine, rq.data + q->off, (size_t)qbytes) != 0)
                fail_msg("%s: %s quantization differs from llama-quantize", q->name, clb_dtype_name(q->type));
            free(mine);
            (*n_exact)++;
        }
        /* every quantized tensor dequantizes close to the f32 original */
        float *back = malloc((size_t)q->nel * sizeof(float));
        clb_dequantize_row_ref((clb_dtype)q->type, rq.data + q->off, back, (int64_t)q->nel);
        double se = 0, ss = 0;
        for (uint64_t k = 0; k < q->nel; k++) {
            se += ((double)back[k] - src[k]) * ((double)back[k] - src[k]);
            ss += (double)src[k] * src[k];
        }
        double rel = sqrt(se / ss);
        double lim = q->type == CLB_DT_Q8_0 ? 0.01 : q->type == CLB_DT_Q6_K ? 0.03
                   : q->type == CLB_DT_Q5_K ? 0.06 : q->type == CLB_DT_Q2_K ? 0.45
                   : q->type == CLB_DT_Q3_K ? 0.25 : 0.15;
        if (!(rel < lim)) fail_msg("%s (%s): relative rms error %g", q->name, clb_dtype_name(q->type), rel);
        free(back);
        (*n_deq)++;
    }
    free(rf.data);
    free(rq.data);
}

static void test_llama_quantize_exact(void **state) {
    (void)state;
    FILE *f = fopen("tests/fixtures/mixtral/model-f32.gguf", "rb");
    if (!f) {
        print_message("fixtures not found (run from the repository root)\n");
        skip();
    }
    fclose(f);
    /* llama-quantize outputs of model-f32.gguf (ORACLE-README.md, quant/README.md): every
       quantized tensor, whatever its type, must be byte-identical to ours */
    static const char *const files[] = {
        "tests/fixtures/mixtral/model-q8_0.gguf",   "tests/fixtures/mixtral/model-q4_0.gguf",
        "tests/fixtures/mixtral/model-q4_k_m.gguf", "tests/fixtures/mixtral/model-q6_k.gguf",
        "tests/fixtures/quant/mixtral-Q2_K.gguf",   "tests/fixtures/quant/mixtral-Q3_K_M.gguf",
        "tests/fixtures/quant/mixtral-Q4_K_S.gguf", "tests/fixtures/quant/mixtral-Q5_K_M.gguf",
        "tests/fixtures/quant/mixtral-IQ4_NL.gguf", "tests/fixtures/quant/mixtral-IQ4_XS.gguf",
    };
    int exact = 0, dq = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) check_against_llama_quantize(files[i], &exact, &dq);
    /* 16 quantized tensors per file (token_embd, output, 2 x (q, k, v, o, 3 experts)) */
    assert_int_equal(dq, 16 * (int)(sizeof files / sizeof files[0]));
    assert_int_equal(exact, dq);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_row_bytes),
        cmocka_unit_test(test_fp16_values),
        cmocka_unit_test(test_fp16_rounding_random),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_dequant_float_types),
        cmocka_unit_test(test_dequant_q8_0),
        cmocka_unit_test(test_dequant_q4_0),
        cmocka_unit_test(test_dequant_legacy_32),
        cmocka_unit_test(test_dequant_mxfp4),
        cmocka_unit_test(test_dequant_q2_k_q3_k),
        cmocka_unit_test(test_dequant_q4_k_q5_k),
        cmocka_unit_test(test_dequant_q6_k_iq4_xs),
        cmocka_unit_test(test_quant_q8_0_known),
        cmocka_unit_test(test_quant_q4_0_known),
        cmocka_unit_test(test_quant_error_bounds),
        cmocka_unit_test(test_quant_q8_k),
        cmocka_unit_test(test_quant_k_iq_mxfp4),
        cmocka_unit_test(test_llama_quantize_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
