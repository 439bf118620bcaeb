/* x86_avx2.c — AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; only called
 * when clb_cpu() reports all three).
 *
 * Integer block dot products use the maddubs idiom: |w| (unsigned) times sign(x, w)
 * (signed) -> int16 pairs -> madd with ones -> 8 x int32 -> float, then one FMA per block
 * with the product of the two block scales. This is exact for any weight byte, including
 * -128, as long as the activation quants are in [-127, 127] (what every quantizer here
 * produces).
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_impl.h"

/* ---- helpers ------------------------------------------------------------------------- */

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

static inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

/* 8 x int32 partial sums of w[i]*x[i] over 32 int8 pairs (w any int8, x in [-127,127]). */
static inline __m256i dot_i8(__m256i w, __m256i x) {
    const __m256i aw = _mm256_sign_epi8(w, w);
    const __m256i sx = _mm256_sign_epi8(x, w);
    const __m256i p16 = _mm256_maddubs_epi16(aw, sx);
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Same with w known unsigned (0..255 read as u8, but here at most 31) and x signed. */
static inline __m256i dot_u8i8(__m256i w, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

/* 16 packed bytes of nibbles -> 32 bytes: low nibbles first (weights 0..15), then high. */
static inline __m256i unpack_nibbles(const uint8_t *p) {
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* ---- float rows ---------------------------------------------------------------------- */

static void vec_dot_f32(int64_t n, float *out, const void *w, const void *x) {
    const float *a = w, *b = x;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    *out = s;
}

static void axpy_f32(int64_t n, float a, const float *x, float *y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8)));
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void vec_dot_f16(int64_t n, float *out, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#define LD16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(LD16(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(LD16(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(LD16(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(LD16(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LD16(a + i), _mm256_loadu_ps(b + i), s0);
#undef LD16
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += fp16(a[i]) * b[i];
    *out = s;
}

static void vec_dot_bf16(int64_t n, float *out, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#define LDB(p) _mm256_castsi256_ps(_mm256_slli_epi32( \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(LDB(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(LDB(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(LDB(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(LDB(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LDB(a + i), _mm256_loadu_ps(b + i), s0);
#undef LDB
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += clb_bf16_to_fp32(a[i]) * b[i];
    *out = s;
}

/* ---- 32-weight blocks x Q8_0 --------------------------------------------------------- */

#define LD256(p) _mm256_loadu_si256((const __m256i *)(p))

/* 32 bits -> 32 bytes: byte i is 0xFF when bit i of bits is set, else 0. */
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                            0x0202020202020202, 0x0303030303030303);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf); /* byte i <- bits byte i/8 */
    b = _mm256_or_si256(b, _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeull)); /* all but bit i%8 */
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

static inline uint32_t rd_le32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* sum of the 32 int8 activations as 8 x int32 */
static inline __m256i sum_i8(__m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), x), _mm256_set1_epi16(1));
}

/* Q4_1 / Q5_1 (x = d*q + m): d*dx*sum(q*qx) + m*dx*sum(qx). */
static void vec_dot_q4_1(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_1 *a = w;
    const clb_block_q8_0 *b = x;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        const float dx = fp16(b[i].d);
        const __m256i y = LD256(b[i].qs);
        const __m256i p = dot_u8i8(unpack_nibbles(a[i].qs), y);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(a[i].d) * dx), _mm256_cvtepi32_ps(p), acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(fp16(a[i].m) * dx), _mm256_cvtepi32_ps(sum_i8(y)), accm);
    }
    *out = hsum_ps(_mm256_add_ps(acc, accm));
}

static void vec_dot_q5_0(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_0 *a = w;
    const clb_block_q8_0 *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        /* q - 16 = nibble when the 5th bit is set, nibble - 16 (0xF0 | nibble) when clear */
        const __m256i hi = _mm256_andnot_si256(bits_to_bytes(rd_le32(a[i].qh)), _mm256_set1_epi8((char)0xF0));
        const __m256i q = _mm256_or_si256(unpack_nibbles(a[i].qs), hi);
        const __m256 d = _mm256_set1_ps(fp16(a[i].d) * fp16(b[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, LD256(b[i].qs))), acc);
    }
    *out = hsum_ps(acc);
}

static void vec_dot_q5_1(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_1 *a = w;
    const clb_block_q8_0 *b = x;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        const float dx = fp16(b[i].d);
        const __m256i hi = _mm256_and_si256(bits_to_bytes(rd_le32(a[i].qh)), _mm256_set1_epi8(0x10));
        const __m256i q = _mm256_or_si256(unpack_nibbles(a[i].qs), hi);
        const __m256i y = LD256(b[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(a[i].d) * dx), _mm256_cvtepi32_ps(dot_u8i8(q, y)), acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(fp16(a[i].m) * dx), _mm256_cvtepi32_ps(sum_i8(y)), accm);
    }
    *out = hsum_ps(_mm256_add_ps(acc, accm));
}

/* 4-bit codebook formats: nibble -> int8 value by pshufb. */
static inline __m256i lut16(const int8_t *tab) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tab));
}

/* ---- 256-weight blocks x Q8_K -------------------------------------------------------- */

/* int16 vector: scale a for lanes 0..7, scale b for lanes 8..15 (two 16-weight sub-blocks) */
static inline __m256i scale_pair(int a, int b) {
    return _mm256_setr_m128i(_mm_set1_epi16((short)a), _mm_set1_epi16((short)b));
}

static void vec_dot_q2_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q2_k *a = w;
    const clb_block_q8_k *b = x;
    const __m256i m3 = _mm256_set1_epi8(3);
    float s = 0.0f;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        /* mins: sum_j (scales[j] >> 4) * bsums[j] */
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)a[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0F)));
        const int32_t summ = hsum_epi32(_mm256_madd_epi16(mins, LD256(b[i].bsums)));
        const uint8_t *sc = a[i].scales;
        const int8_t *qx = b[i].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            const __m256i qs = LD256(a[i].qs + 32 * half);
            for (int p = 0; p < 4; p++, qx += 32, sc += 2) {
                const __m256i q = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * p)), m3);
                const __m256i prod = _mm256_maddubs_epi16(q, LD256(qx));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, scale_pair(sc[0] & 0xF, sc[1] & 0xF)));
            }
        }
        const float dx = b[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * fp16(a[i].d)), _mm256_cvtepi32_ps(isum), acc);
        s -= (dx * fp16(a[i].dmin)) * (float)summ;
    }
    *out = hsum_ps(acc) + s;
}

static void vec_dot_q3_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q3_k *a = w;
    const clb_block_q8_k *b = x;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        int8_t sc8[16];
        clb_q3k_scales(a[i].scales, sc8);
        int16_t sc[16];
        for (int j = 0; j < 16; j++) sc[j] = (int16_t)(sc8[j] - 32);
        /* q = (2 low bits | high bit << 2) - 4: sum (q+4)*x by maddubs, minus 4*sum(x) */
        const __m256i scv = LD256(sc);
        __m256i isum = _mm256_mullo_epi32(_mm256_madd_epi16(scv, LD256(b[i].bsums)), _mm256_set1_epi32(-4));
        const __m256i hm = LD256(a[i].hmask);
        const int8_t *qx = b[i].qs;
        int k = 0;
        for (int half = 0; half < 2; half++) {
            const __m256i qs = LD256(a[i].qs + 32 * half);
            for (int p = 0; p < 4; p++, k++, qx += 32) {
                const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * p)), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(k)), one);
                const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
                const __m256i prod = _mm256_maddubs_epi16(q, LD256(qx));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, scale_pair(sc[2 * k], sc[2 * k + 1])));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(b[i].d * fp16(a[i].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    *out = hsum_ps(acc);
}

static void vec_dot_iq4_xs(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_iq4_xs *a = w;
    const clb_block_q8_k *b = x;
    const __m256i tab = lut16(clb_kvalues_iq4nl);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((a[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((a[i].scales_h >> (2 * ib)) & 3) << 4);
            const __m256i q = _mm256_shuffle_epi8(tab, unpack_nibbles(a[i].qs + 16 * ib));
            const __m256i y = LD256(b[i].qs + 32 * ib);
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)(ls - 32))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(b[i].d * fp16(a[i].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- activation quantizer ------------------------------------------------------------ */

/* roundf semantics (half away from zero), then clamp to [-127, 127] with NaN -> -127:
   bit-identical to quant.c's round_q8. */
static inline __m256i round_q8(__m256 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign));
    t = _mm256_add_ps(t, _mm256_and_ps(up, one));
    t = _mm256_max_ps(t, _mm256_set1_ps(-127.0f));
    t = _mm256_min_ps(t, _mm256_set1_ps(127.0f));
    return _mm256_cvttps_epi32(t);
}

/* F16C rounds to nearest even, to infinity from 65520 and into subnormals as
   clb_fp32_to_fp16 does; NaNs become sign | 0x7e00 as there (F16C keeps the payload). */
static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(src + i);
        __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(v), abs), inf);
        if (!_mm256_testz_si256(nan, nan)) {
            const __m128i n16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
            const __m128i q = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
            h = _mm_blendv_epi8(h, q, n16);
        }
        _mm_storeu_si128((__m128i *)(d + i), h);
    }
    for (; i < n; i++) d[i] = clb_fp32_to_fp16(src[i]);
}

static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    clb_block_q8_0 *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        __m256 v0 = _mm256_loadu_ps(src), v1 = _mm256_loadu_ps(src + 8);
        __m256 v2 = _mm256_loadu_ps(src + 16), v3 = _mm256_loadu_ps(src + 24);
        __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
        m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        const float amax = hmax_ps(m);
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        const __m256 mul = _mm256_set1_ps(id);
        const __m256i i0 = round_q8(_mm256_mul_ps(v0, mul)), i1 = round_q8(_mm256_mul_ps(v1, mul));
        const __m256i i2 = round_q8(_mm256_mul_ps(v2, mul)), i3 = round_q8(_mm256_mul_ps(v3, mul));
        /* packs work per 128-bit lane: fix the dword order afterwards */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

/* Q8_K as quant.c's clb_quant_q8_k, bit for bit: the first element of largest magnitude
   sets the scale (-127 / max), rintf (half to even) rounding, clamp to [-128, 127] with NaN
   -> -128, bsums of 16. */
static void quantize_q8_k(const float *src, void *dst, int64_t n) {
    clb_block_q8_k *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / CLB_QK_K; i++, src += CLB_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < CLB_QK_K; j += 8) /* max(|x|, m) keeps m where |x| is NaN */
            m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + j)), m);
        const float amax = hmax_ps(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const __m256 va = _mm256_set1_ps(amax);
        int first = 0;
        for (int j = 0; j < CLB_QK_K; j += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + j)), va, _CMP_EQ_OQ));
            if (hit) {
                first = j + __builtin_ctz((unsigned)hit);
                break;
            }
        }
        const float iscale = -127.0f / src[first];
        const __m256 mul = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
        for (int j = 0; j < CLB_QK_K; j += 32) {
            __m256i q[4];
            for (int u = 0; u < 4; u++) {
                __m256 r = _mm256_round_ps(_mm256_mul_ps(mul, _mm256_loadu_ps(src + j + 8 * u)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
                q[u] = _mm256_cvtps_epi32(r);
            }
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), p);
        }
        const __m128i bias = _mm_set1_epi8((char)0x80);
        for (int j = 0; j < 16; j++) { /* sum of 16 int8 = sum of the biased bytes - 16 * 128 */
            const __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(y[i].qs + 16 * j)), bias);
            const __m128i sad = _mm_sad_epu8(v, _mm_setzero_si128());
            y[i].bsums[j] = (int16_t)(_mm_cvtsi128_si32(sad) + _mm_extract_epi16(sad, 4) - 2048);
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- blocked dot products: nr weight rows x nt activation rows (see kernels_impl.h) --- *
 * A tile keeps R x T float accumulators in registers; each weight block is unpacked once
 * per tile and each activation block loaded once per tile. Unsigned x signed byte dot
 * products are maddubs + madd (AVX2) or one VPDPBUSD (AVX-VNNI, emitted with inline asm
 * so this file needs no extra compiler flags); both are exact here (no int16 saturation:
 * Q4_0 nibbles are <= 15, |Q8_0 weights| <= 128 against |x| <= 127), so the two variants
 * give bit-identical results. */

#define MD_INLINE static inline __attribute__((always_inline))
/* the R x T loops must be unrolled so the accumulators stay in registers (GCC -O2 keeps
   them in a stack array otherwise and every FMA goes through a store and a reload) */
#define CLB_UNROLL _Pragma("GCC unroll 4")

/* acc + VPDPBUSD(u, s), the AVX-VNNI (VEX) form */
MD_INLINE __m256i dpbusd_acc(__m256i acc, __m256i u, __m256i s) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    return acc;
}

MD_INLINE __m256i dot_us(__m256i u, __m256i s, const int vnni) {
    if (vnni) return dpbusd_acc(_mm256_setzero_si256(), u, s);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

MD_INLINE __m256 bcast_fp16(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16((short)h)); }

/* Q4_0 x Q8_0: sum (q - 8) x = sum q x - 8 sum x, q the unsigned nibble. */
MD_INLINE void tile_q4_0(int64_t nb, const int R, const int T, const uint8_t *w, uint64_t ws, const uint8_t *x,
                         uint64_t xs, float *y, int64_t ys, const int vnni) {
    __m256 acc[4][4];
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4);
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[4], cx[4];
        __m256 dx[4];
        CLB_UNROLL
        for (int t = 0; t < T; t++) {
            const clb_block_q8_0 *xb = (const clb_block_q8_0 *)(x + (uint64_t)t * xs) + b;
            xv[t] = LD256(xb->qs);
            cx[t] = dot_us(eight, xv[t], vnni);
            dx[t] = bcast_fp16(xb->d);
        }
        CLB_UNROLL
        for (int r = 0; r < R; r++) {
            const clb_block_q4_0 *wb = (const clb_block_q4_0 *)(w + (uint64_t)r * ws) + b;
            const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)wb->qs));
            const __m256i q = _mm256_and_si256(_mm256_srlv_epi64(raw, shift), m4);
            const __m256 dw = bcast_fp16(wb->d);
            CLB_UNROLL
            for (int t = 0; t < T; t++) {
                const __m256i p = _mm256_sub_epi32(dot_us(q, xv[t], vnni), cx[t]);
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, dx[t]), acc[r][t]);
            }
        }
    }
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) y[(int64_t)t * ys + r] = hsum_ps(acc[r][t]);
}

/* Signed int8 weights x Q8_0: |w| (unsigned) times x with w's sign. Q8_0 (kind 0) loads
   them; the 4-bit codebooks IQ4_NL (1: fp16 d first) and MXFP4 (2: an E8M0 exponent first)
   index their signed int8 values with the nibbles (laid out as Q4_0's) by one byte shuffle.
   Exact: |w| <= 127, no int16 saturation. */
MD_INLINE float e8m0_half(uint8_t e) { /* clb_e8m0_to_fp32_half, inline */
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

MD_INLINE void tile_s8(int64_t nb, const int R, const int T, const uint8_t *w, uint64_t ws, const uint8_t *x,
                       uint64_t xs, float *y, int64_t ys, const int vnni, const int kind) {
    const int mx = kind == 2;
    const uint64_t bb = kind == 0 ? sizeof(clb_block_q8_0) : mx ? sizeof(clb_block_mxfp4) : sizeof(clb_block_iq4_nl);
    const uint64_t qo = mx ? 1 : 2;
    __m256 acc[4][4];
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    const __m256i tab = lut16(mx ? clb_kvalues_mxfp4 : clb_kvalues_iq4nl), m4 = _mm256_set1_epi8(0x0F);
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4);
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[4];
        __m256 dx[4];
        CLB_UNROLL
        for (int t = 0; t < T; t++) {
            const clb_block_q8_0 *xb = (const clb_block_q8_0 *)(x + (uint64_t)t * xs) + b;
            xv[t] = LD256(xb->qs);
            dx[t] = bcast_fp16(xb->d);
        }
        CLB_UNROLL
        for (int r = 0; r < R; r++) {
            const uint8_t *wb = w + (uint64_t)r * ws + (uint64_t)b * bb;
            const __m256i q = kind == 0 ? LD256(wb + qo)
                                        : _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srlv_epi64(
                                              _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + qo))), shift), m4));
            const __m256i aq = _mm256_sign_epi8(q, q);
            uint16_t h;
            memcpy(&h, wb, 2);
            const __m256 dw = mx ? _mm256_set1_ps(e8m0_half(wb[0])) : bcast_fp16(h);
            CLB_UNROLL
            for (int t = 0; t < T; t++) {
                const __m256i p = dot_us(aq, _mm256_sign_epi8(xv[t], q), vnni);
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, dx[t]), acc[r][t]);
            }
        }
    }
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) y[(int64_t)t * ys + r] = hsum_ps(acc[r][t]);
}

/* Q4_K x Q8_K: d * sum_j sc_j sum(q x) - dmin * sum_j m_j (bsums of sub-block j), the
   12-byte 6-bit scales unpacked with four 32-bit operations. */
MD_INLINE void k4_scales(const uint8_t *s, __m256i *sc16, __m256i *mins16) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    const uint32_t sc_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
    const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    const __m128i sc8 = _mm_cvtsi64_si128((long long)((uint64_t)sc_lo | (uint64_t)sc_hi << 32));
    const __m128i m8 = _mm_cvtsi64_si128((long long)((uint64_t)m_lo | (uint64_t)m_hi << 32));
    /* sc16: the 8 scales as int16 in both 128-bit lanes; mins16: m0 m0 m1 m1 ... m7 m7 */
    *sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
    *mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(m8, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
}

MD_INLINE void tile_q4_k(int64_t nb, const int R, const int T, const uint8_t *w, uint64_t ws, const uint8_t *x,
                         uint64_t xs, float *y, int64_t ys, const int vnni) {
    (void)vnni; /* the per-sub-block scale multiply needs the int16 madd path */
    __m256 acc[4][4];
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        CLB_UNROLL
        for (int r = 0; r < R; r++) {
            const clb_block_q4_k *wb = (const clb_block_q4_k *)(w + (uint64_t)r * ws) + i;
            __m256i sc16, mins16;
            k4_scales(wb->scales, &sc16, &mins16);
            __m256i isum[4];
            CLB_UNROLL
            for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
            CLB_UNROLL
            for (int c = 0; c < 4; c++) {
                const __m256i q = LD256(wb->qs + 32 * c);
                const __m256i q0 = _mm256_and_si256(q, m4);
                const __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                const __m256i s0 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0101 * (4 * c) + 0x0100)));
                const __m256i s1 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0101 * (4 * c + 2) + 0x0100)));
                CLB_UNROLL
                for (int t = 0; t < T; t++) {
                    const clb_block_q8_k *xb = (const clb_block_q8_k *)(x + (uint64_t)t * xs) + i;
                    const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q0, LD256(xb->qs + 64 * c)), s0);
                    const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, LD256(xb->qs + 64 * c + 32)), s1);
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p0, p1));
                }
            }
            const float d = fp16(wb->d), dmin = fp16(wb->dmin);
            CLB_UNROLL
            for (int t = 0; t < T; t++) {
                const clb_block_q8_k *xb = (const clb_block_q8_k *)(x + (uint64_t)t * xs) + i;
                const __m256i msum = _mm256_madd_epi16(mins16, LD256(xb->bsums));
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * xb->d), acc[r][t]);
                acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmin * xb->d), acc[r][t]);
            }
        }
    }
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) y[(int64_t)t * ys + r] = hsum_ps(acc[r][t]);
}

/* Q6_K, one row's block against T tokens: the row's 6-bit weights and scale pairs unpacked once;
   per token the integer sums (q - 32 as q by maddubs, q unsigned 0..63, minus 32 * sum_k sc_k *
   bsums_k) and one FMA, those of the former single dot product */
MD_INLINE void kblk_q6_k(const uint8_t *blk, const clb_block_q8_k *const *xb, const int T, __m256 *acc) {
    const clb_block_q6_k *a = (const clb_block_q6_k *)(const void *)blk;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i scv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a->scales));
    /* scale pair c of a half (lanes 0..7 scale 2c, lanes 8..15 scale 2c + 1) by one byte shuffle
       of that half's 8 int16 scales in both 128-bit lanes, not from scalars (the GPR -> vector
       moves of _mm_set1_epi16 were the T = 1 kernel's bound) */
    const __m256i scq[2] = {_mm256_permute4x64_epi64(scv, 0x44), _mm256_permute4x64_epi64(scv, 0xEE)};
    __m256i isum[4];
    CLB_UNROLL
    for (int t = 0; t < T; t++)
        isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(scv, LD256(xb[t]->bsums)), 5));
    CLB_UNROLL
    for (int half = 0; half < 2; half++) {
        const __m256i la = LD256(a->ql + 64 * half), lb = LD256(a->ql + 64 * half + 32);
        const __m256i h = LD256(a->qh + 32 * half);
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(la, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)),
            _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), _mm256_and_si256(h, m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30))};
        __m256i sp[4];
        CLB_UNROLL
        for (int c = 0; c < 4; c++)
            sp[c] = _mm256_shuffle_epi8(scq[half], _mm256_setr_m128i(_mm_set1_epi16((short)(0x0101 * (4 * c) + 0x0100)),
                                                                   _mm_set1_epi16((short)(0x0101 * (4 * c + 2) + 0x0100))));
        CLB_UNROLL
        for (int t = 0; t < T; t++) {
            const int8_t *qx = xb[t]->qs + 128 * half;
            CLB_UNROLL
            for (int c = 0; c < 4; c++)
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], LD256(qx + 32 * c)), sp[c]));
        }
    }
    const float d = fp16(a->d);
    CLB_UNROLL
    for (int t = 0; t < T; t++) acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(xb[t]->d * d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
}

/* Q5_K, one row's block against T tokens: scales, mins, high bits and 5-bit weights unpacked
   once; per token the integer sums, the FMA and the scalar mins sum of the former single dot
   product */
MD_INLINE void kblk_q5_k(const uint8_t *blk, const clb_block_q8_k *const *xb, const int T, __m256 *acc, float *sm) {
    const clb_block_q5_k *a = (const clb_block_q5_k *)(const void *)blk;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256i sc16, mins; /* unpacked in registers (Q4_K's packing), not by scalars */
    k4_scales(a->scales, &sc16, &mins);
    const __m256i h = LD256(a->qh);
    __m256i isum[4];
    CLB_UNROLL
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    CLB_UNROLL
    for (int c = 0; c < 4; c++) {
        const __m256i q = LD256(a->qs + 32 * c);
        const __m256i b0 = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * c)), one);
        const __m256i b1 = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * c + 1)), one);
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(b0, 4));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(b1, 4));
        const __m256i s0 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0101 * (4 * c) + 0x0100)));
        const __m256i s1 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0101 * (4 * c + 2) + 0x0100)));
        CLB_UNROLL
        for (int t = 0; t < T; t++) {
            const int8_t *qx = xb[t]->qs + 64 * c;
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q0, LD256(qx)), s0));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q1, LD256(qx + 32)), s1));
        }
    }
    const float d = fp16(a->d), dmin = fp16(a->dmin);
    CLB_UNROLL
    for (int t = 0; t < T; t++) {
        const int32_t summ = hsum_epi32(_mm256_madd_epi16(mins, LD256(xb[t]->bsums)));
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(xb[t]->d * d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
        sm[t] -= (xb[t]->d * dmin) * (float)summ;
    }
}

/* Q5_K (K5 = 1) / Q6_K rows against tokens, R x T <= 4 x 4 (R = 1 in use): each row's block
   unpacked once for all the tokens, where every product used to run one row x one token per
   call; per (row, token) the arithmetic of that single dot product, so every tile size gives
   the bits of the _1 kernel */
MD_INLINE void tile_k56(int64_t nb, const int R, const int T, const int K5, const uint8_t *w, uint64_t ws,
                        const uint8_t *x, uint64_t xs, float *y, int64_t ys) {
    const uint64_t bb = K5 ? sizeof(clb_block_q5_k) : sizeof(clb_block_q6_k);
    __m256 acc[4][4];
    float sm[4][4];
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps(), sm[r][t] = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const clb_block_q8_k *xb[4];
        CLB_UNROLL
        for (int t = 0; t < T; t++) xb[t] = (const clb_block_q8_k *)(const void *)(x + (uint64_t)t * xs) + i;
        CLB_UNROLL
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (uint64_t)r * ws + (uint64_t)i * bb;
            if (K5) kblk_q5_k(blk, xb, T, acc[r], sm[r]);
            else kblk_q6_k(blk, xb, T, acc[r]);
        }
    }
    CLB_UNROLL
    for (int r = 0; r < R; r++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) y[(int64_t)t * ys + r] = K5 ? hsum_ps(acc[r][t]) + sm[r][t] : hsum_ps(acc[r][t]);
}

/* the tiles with the dot-product flavour bound, as CLB_DEFINE_MDOT wants them */
#define TILE_Q4_0(...) tile_q4_0(__VA_ARGS__, 0)
#define TILE_Q4_0_VNNI(...) tile_q4_0(__VA_ARGS__, 1)
#define TILE_Q8_0(...) tile_s8(__VA_ARGS__, 0, 0)
#define TILE_Q8_0_VNNI(...) tile_s8(__VA_ARGS__, 1, 0)
#define TILE_Q4_K(...) tile_q4_k(__VA_ARGS__, 0)
#define TILE_Q5_K(nb, R, T, ...) tile_k56(nb, R, T, 1, __VA_ARGS__)
#define TILE_Q6_K(nb, R, T, ...) tile_k56(nb, R, T, 0, __VA_ARGS__)
#define TILE_IQ4_NL(...) tile_s8(__VA_ARGS__, 0, 1)
#define TILE_IQ4_NL_VNNI(...) tile_s8(__VA_ARGS__, 1, 1)
#define TILE_MXFP4(...) tile_s8(__VA_ARGS__, 0, 2)
#define TILE_MXFP4_VNNI(...) tile_s8(__VA_ARGS__, 1, 2)

CLB_DEFINE_MDOT(mdot_q4_0, TILE_Q4_0, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_q4_0_vnni, TILE_Q4_0_VNNI, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_q8_0, TILE_Q8_0, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_q8_0_vnni, TILE_Q8_0_VNNI, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_q4_k, TILE_Q4_K, CLB_QK_K, 2)
/* Q5_K, Q6_K: several tokens in tiles of 1 row x up to 4 tokens (Q6_K, kbench --isa avx2 --tok 4,
   4096 x 2048, one thread: 28-35 GMAC/s, against 11 with tiles of 2 rows, whose accumulators,
   weights and scale pairs spill); one token: one row per tile for the same reason */
#define MDOT_ROW1(NAME, TILE)                                                                            \
    CLB_DEFINE_MDOT(NAME##_rt, TILE, CLB_QK_K, 1)                                                        \
    static void NAME(int64_t n, int nr, int nt, const void *w, uint64_t ws, const void *x, uint64_t xs,   \
                     float *y, int64_t ys) {                                                              \
        if (nt > 1) {                                                                                     \
            NAME##_rt(n, nr, nt, w, ws, x, xs, y, ys);                                                    \
            return;                                                                                       \
        }                                                                                                 \
        for (int r = 0; r < nr; r++)                                                                      \
            TILE(n / CLB_QK_K, 1, 1, (const uint8_t *)w + (uint64_t)r * ws, ws, x, xs, y + r, ys);       \
    }
MDOT_ROW1(mdot_q5_k, TILE_Q5_K)
MDOT_ROW1(mdot_q6_k, TILE_Q6_K)
#define mdot_q5_k_1 mdot_q5_k_rt_1
#define mdot_q6_k_1 mdot_q6_k_rt_1
CLB_DEFINE_MDOT(mdot_iq4_nl, TILE_IQ4_NL, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_iq4_nl_vnni, TILE_IQ4_NL_VNNI, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_mxfp4, TILE_MXFP4, CLB_QK, 2)
CLB_DEFINE_MDOT(mdot_mxfp4_vnni, TILE_MXFP4_VNNI, CLB_QK, 2)

/* ---- flash attention (fa_body_impl.h) ------------------------------------------------ */

static inline __m256 fa_ld_q4(const uint8_t *qs, int g) { /* g: 0/1 low nibbles of bytes 0-7 / 8-15, 2/3 high */
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + (g & 1) * 8)));
    const __m256i q = g & 2 ? _mm256_srli_epi32(b, 4) : _mm256_and_si256(b, _mm256_set1_epi32(0xF));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(8)));
}
#define FA_FN(x) x##_avx2
#define FA_VL 8
#define FA_V __m256
#define FA_ZERO() _mm256_setzero_ps()
#define FA_SET1(x) _mm256_set1_ps(x)
#define FA_LOAD(p) _mm256_loadu_ps(p)
#define FA_STORE(p, v) _mm256_storeu_ps(p, v)
#define FA_ADD _mm256_add_ps
#define FA_SUB _mm256_sub_ps
#define FA_MUL _mm256_mul_ps
#define FA_MAX _mm256_max_ps
#define FA_HMAX(v) hmax_ps(v)
#define FA_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FA_HSUM(v) hsum_ps(v)
#define FA_LD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define FA_LD_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define FA_LD_I8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define FA_LD_Q4(qs, g) fa_ld_q4(qs, g)
#define FA_FLOOR(v) _mm256_floor_ps(v)
#define FA_POW2(y, n) \
    _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))
#define FA_KEEP_ABOVE(x, t, y) _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(t), _CMP_GT_OQ), y)
#define FA_TQ 4
#define FA_TK 2
#define FA_VR 4
#define FA_VC 2
#define FA_VRB 2
#define FA_F16_1(h) _cvtsh_ss(h) /* F16C: the block scale without a call */
#include "kernels/fa_body_impl.h"

CLB_FA_SCORES_MDOT(fa_scores_mdot_q4_0_avx2, mdot_q4_0)
CLB_FA_SCORES_MDOT(fa_scores_mdot_q4_0_vnni, mdot_q4_0_vnni)
CLB_FA_SCORES_MDOT(fa_scores_mdot_q8_0_avx2, mdot_q8_0)
CLB_FA_SCORES_MDOT(fa_scores_mdot_q8_0_vnni, mdot_q8_0_vnni)

/* Scores on Q8_0 and Q4_0 keys, 8 keys to a register (a lane per key), so no horizontal
   sum per (query, key): the AVX-512 table's fa_scores_q8_0_512 in 256 bits. Per block and
   group of 8 keys: their 32 quants (Q4_0: the unsigned nibbles, 0..15) transposed into 8
   vectors (lane j: dword c of key j) and their 8 scales; per query, 8 dot products of 4
   bytes with the query's dword c broadcast. Q8_0 with AVX-VNNI: VPDPBUSD on the keys + 128
   (unsigned) seeded with -128 * sum(q) of the query's block; AVX2: maddubs of |k| with q
   carrying k's sign, then madd (no int16 saturation: |k| <= 128, |q| <= 127). Q4_0: the
   nibbles are unsigned already (VPDPBUSD, or maddubs + madd: |pair| <= 2 * 15 * 127), seeded
   with -8 * sum(q). Each lane gets the exact integer dot product of the block, so the two
   variants agree bit for bit. A score is one chain over the blocks in order,
   s = fma(float(i_b), dk_b * dq_b, s) from s = 0: the same operations for a (query, key)
   whatever its lane, group and tile. */
enum { FA8_K = 8, FA8_Q = 8, FA8_MAXB = 64 }; /* keys per register, queries per pass, d <= 2048 */

MD_INLINE __m256i bcast_dword(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* z[j]: 8 dwords of key j -> out[c] lane j = dword c of key j */
MD_INLINE void dwords8x8_t(const __m256i z[8], __m256i out[8]) {
    __m256i t[8], u[8];
    CLB_UNROLL
    for (int m = 0; m < 4; m++) { /* t[2m] = z2m[0] z2m+1[0] z2m[1] z2m+1[1] | the same of dwords 4, 5 */
        t[2 * m] = _mm256_unpacklo_epi32(z[2 * m], z[2 * m + 1]);
        t[2 * m + 1] = _mm256_unpackhi_epi32(z[2 * m], z[2 * m + 1]);
    }
    CLB_UNROLL
    for (int h = 0; h < 2; h++) { /* u[4h + e]: keys 4h..4h+3 of dword e | dword e + 4 */
        u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    CLB_UNROLL
    for (int e = 0; e < 4; e++) {
        out[e] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x20);
        out[e + 4] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x31);
    }
}

/* QT queries (their scales dq and seeds cq, fa8_query_blocks) against nj <= 8 keys from k
   (lanes past nj repeat the last key; not stored) */
MD_INLINE void fa8_tile(int64_t nb, const int QT, int nj, const uint8_t *q, uint64_t qs, const float *dq,
                        const int32_t *cq, const uint8_t *k, uint64_t ks, float *s, int64_t ss,
                        const int vnni, const int q4) {
    const uint64_t bb = q4 ? sizeof(clb_block_q4_0) : sizeof(clb_block_q8_0);
    uint64_t off[FA8_K];
    for (int j = 0; j < FA8_K; j++) off[j] = (uint64_t)(j < nj ? j : nj - 1) * ks;
    __m256 acc[FA8_Q];
    _Pragma("GCC unroll 8") for (int a = 0; a < QT; a++) acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *kb = k + (uint64_t)b * bb;
        __m256i z[8], kt[8], ak[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) z[j] = q4 ? unpack_nibbles(kb + off[j] + 2) : LD256(kb + off[j] + 2);
        dwords8x8_t(z, kt);
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++)
            ak[c] = q4 ? kt[c] : vnni ? _mm256_xor_si256(kt[c], _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(kt[c], kt[c]);
        uint16_t h[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) memcpy(&h[j], kb + off[j], 2);
        const __m256 dk = _mm256_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4],
                                                         (short)h[5], (short)h[6], (short)h[7]));
        _Pragma("GCC unroll 8") for (int a = 0; a < QT; a++) {
            const uint8_t *qa = q + (uint64_t)a * qs + (uint64_t)b * sizeof(clb_block_q8_0) + 2;
            __m256i p0, p1; /* two chains (exact integers: their sum is the same) */
            if (vnni) {
                p0 = _mm256_set1_epi32(cq[a * FA8_MAXB + b]);
                p1 = _mm256_setzero_si256();
                _Pragma("GCC unroll 8") for (int c = 0; c < 8; c += 2) {
                    p0 = dpbusd_acc(p0, ak[c], bcast_dword(qa + 4 * c));
                    p1 = dpbusd_acc(p1, ak[c + 1], bcast_dword(qa + 4 * c + 4));
                }
            } else {
                p0 = q4 ? _mm256_set1_epi32(cq[a * FA8_MAXB + b]) : _mm256_setzero_si256();
                p1 = _mm256_setzero_si256();
                _Pragma("GCC unroll 8") for (int c = 0; c < 8; c += 2) {
                    const __m256i q0 = bcast_dword(qa + 4 * c), q1 = bcast_dword(qa + 4 * c + 4);
                    const __m256i s0 = q4 ? q0 : _mm256_sign_epi8(q0, kt[c]);
                    const __m256i s1 = q4 ? q1 : _mm256_sign_epi8(q1, kt[c + 1]);
                    p0 = _mm256_add_epi32(p0, _mm256_madd_epi16(_mm256_maddubs_epi16(ak[c], s0), _mm256_set1_epi16(1)));
                    p1 = _mm256_add_epi32(p1, _mm256_madd_epi16(_mm256_maddubs_epi16(ak[c + 1], s1), _mm256_set1_epi16(1)));
                }
            }
            const __m256i p = _mm256_add_epi32(p0, p1);
            acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dk, _mm256_set1_ps(dq[a * FA8_MAXB + b])), acc[a]);
        }
    }
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(nj), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _Pragma("GCC unroll 8") for (int a = 0; a < QT; a++) _mm256_maskstore_ps(s + (int64_t)a * ss, m, acc[a]);
}

/* the query rows' block scales and their sums times -128 (Q8_0 keys, VNNI) or -8 (Q4_0
   keys), [a * FA8_MAXB + b] */
MD_INLINE void fa8_query_blocks(int64_t nb, int nr, const uint8_t *q, uint64_t qs, float *dq, int32_t *cq, const int vnni,
                                const int q4) {
    for (int a = 0; a < nr; a++) {
        const clb_block_q8_0 *x = (const clb_block_q8_0 *)(q + (uint64_t)a * qs);
        for (int64_t b = 0; b < nb; b++) {
            dq[a * FA8_MAXB + b] = _cvtsh_ss(x[b].d);
            if (vnni || q4) cq[a * FA8_MAXB + b] = (q4 ? -8 : -128) * hsum_epi32(sum_i8(LD256(x[b].qs)));
        }
    }
}

/* groups of FA8_Q query rows; a group's rows in tiles of 8, 4, 2 and 1 (the tile size does
   not change a score) */
MD_INLINE void fa_scores_blk_t(int64_t d, int nq, int nk, const void *q, uint64_t qs, const void *k, uint64_t ks,
                               float *s, int64_t ss, const int vnni, const int q4) {
    const int64_t nb = d / CLB_QK;
    for (int j = 0; j < nk; j++) clb_fa_prefetch_row((const uint8_t *)k + (uint64_t)(j + CLB_FA_TK) * ks, ks); /* the next tile */
    float dq[FA8_Q * FA8_MAXB];
    int32_t cq[FA8_Q * FA8_MAXB];
    for (int i = 0; i < nq; i += FA8_Q) {
        const int nr = nq - i < FA8_Q ? nq - i : FA8_Q;
        const uint8_t *qi = (const uint8_t *)q + (uint64_t)i * qs;
        fa8_query_blocks(nb, nr, qi, qs, dq, cq, vnni, q4);
        for (int j = 0; j < nk; j += FA8_K) {
            const int nj = nk - j < FA8_K ? nk - j : FA8_K;
            const uint8_t *kj = (const uint8_t *)k + (uint64_t)j * ks;
            for (int a = 0; a < nr;) {
                const int left = nr - a, o = a * FA8_MAXB;
                float *sa = s + (int64_t)(i + a) * ss + j;
                const uint8_t *qa = qi + (uint64_t)a * qs;
                if (left >= 8) fa8_tile(nb, 8, nj, qa, qs, dq + o, cq + o, kj, ks, sa, ss, vnni, q4), a += 8;
                else if (left >= 4) fa8_tile(nb, 4, nj, qa, qs, dq + o, cq + o, kj, ks, sa, ss, vnni, q4), a += 4;
                else if (left >= 2) fa8_tile(nb, 2, nj, qa, qs, dq + o, cq + o, kj, ks, sa, ss, vnni, q4), a += 2;
                else fa8_tile(nb, 1, nj, qa, qs, dq + o, cq + o, kj, ks, sa, ss, vnni, q4), a += 1;
            }
        }
    }
}

#define FA8_SCORES(NAME, FALLBACK, VNNI, Q4)                                                                 \
    static void NAME(int64_t d, int nq, int nk, const void *q, uint64_t qs, const void *k, uint64_t ks, float *s,  \
                     int64_t ss) {                                                                                 \
        if (d / CLB_QK > FA8_MAXB) FALLBACK(d, nq, nk, q, qs, k, ks, s, ss);                                       \
        else fa_scores_blk_t(d, nq, nk, q, qs, k, ks, s, ss, VNNI, Q4);                                            \
    }
FA8_SCORES(fa_scores_q8_0_avx2, fa_scores_mdot_q8_0_avx2, 0, 0)
FA8_SCORES(fa_scores_q8_0_vnni, fa_scores_mdot_q8_0_vnni, 1, 0)
FA8_SCORES(fa_scores_q4_0_avx2, fa_scores_mdot_q4_0_avx2, 0, 1)
FA8_SCORES(fa_scores_q4_0_vnni, fa_scores_mdot_q4_0_vnni, 1, 1)

/* Values of 32-value blocks (Q8_0, Q4_0): the body's fa_vacc_q8_0 / fa_vacc_q4_0 (FA_VRB =
   2 rows a pass, what 16 registers allow) dequantize each value row again for every pair of
   query rows. Here a tile's rows are dequantized once, FAV_C columns at a time into
   32 x FAV_C floats (16 KB, in L1), and fa_vacc_f32 runs on those for all query rows. The
   same operations per element as the body's: each value d * q exactly (an 11-bit scale
   times an integer of at most 8 bits), then one FMA chain over the keys in order. */
enum { FAV_C = 128 };
MD_INLINE void fa_vacc_blocks_deq(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *v, uint64_t vs,
                                  float *acc, int64_t as, const float *alpha, const int q4) {
    const uint8_t *vb = v;
    const uint64_t bb = q4 ? sizeof(clb_block_q4_0) : sizeof(clb_block_q8_0);
    float x[CLB_FA_TK * FAV_C] __attribute__((aligned(32)));
    for (int j = 0; j < nk; j++) clb_fa_prefetch_row(vb + (uint64_t)(j + CLB_FA_TK) * vs, vs); /* the next tile */
    for (int64_t c0 = 0; c0 < d; c0 += FAV_C) {
        const int64_t w = d - c0 < FAV_C ? d - c0 : FAV_C; /* a multiple of 32 */
        for (int j = 0; j < nk; j++) {
            const uint8_t *row = vb + (uint64_t)j * vs + (uint64_t)(c0 / CLB_QK) * bb;
            float *xj = x + (int64_t)j * w;
            for (int64_t b = 0; b < w / CLB_QK; b++) {
                const uint8_t *blk = row + (uint64_t)b * bb; /* the fp16 scale, then the quants */
                uint16_t h;
                memcpy(&h, blk, 2);
                const __m256 dj = _mm256_set1_ps(_cvtsh_ss(h));
                _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++)
                    _mm256_store_ps(xj + b * CLB_QK + u * 8,
                                    _mm256_mul_ps(dj, q4 ? FA_LD_Q4(blk + 2, u) : FA_LD_I8(blk + 2 + u * 8)));
            }
        }
        fa_vacc_f32_avx2(w, nq, nk, p, ps, x, (uint64_t)w * sizeof(float), acc + c0, as, alpha); /* each column once */
    }
}

/* The shared loop pays off from 8 query rows (fabench: 8 rows 3.95 -> 3.6, 16 rows 4.0 ->
   3.15 ns/pair) in groups of fa_vacc_f32's 4 rows: its rows past a multiple of 4 take a
   one-accumulator path that is latency bound (2 rows 4.0 -> 12 ns/pair). So rows in groups
   of 4 from 8 rows on go through it, the others through the body's loop: the same bits. */
/* the body's loops kept out of line: inlined into the caller below they ran 15% slower */
static __attribute__((noinline)) void fa_vacc_q8_0_body(int64_t d, int nq, int nk, const float *p, int64_t ps,
                                                         const void *v, uint64_t vs, float *acc, int64_t as,
                                                         const float *alpha) {
    fa_vacc_q8_0_avx2(d, nq, nk, p, ps, v, vs, acc, as, alpha);
}
static __attribute__((noinline)) void fa_vacc_q4_0_body(int64_t d, int nq, int nk, const float *p, int64_t ps,
                                                         const void *v, uint64_t vs, float *acc, int64_t as,
                                                         const float *alpha) {
    fa_vacc_q4_0_avx2(d, nq, nk, p, ps, v, vs, acc, as, alpha);
}

MD_INLINE void fa_vacc_blocks(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *v, uint64_t vs,
                              float *acc, int64_t as, const float *alpha, const int q4) {
    const int n4 = nq >= 8 ? nq / 4 * 4 : 0;
    if (n4) fa_vacc_blocks_deq(d, n4, nk, p, ps, v, vs, acc, as, alpha, q4);
    if (n4 == nq) return;
    p += (int64_t)n4 * ps, acc += (int64_t)n4 * as;
    if (alpha) alpha += n4;
    if (q4) fa_vacc_q4_0_body(d, nq - n4, nk, p, ps, v, vs, acc, as, alpha);
    else fa_vacc_q8_0_body(d, nq - n4, nk, p, ps, v, vs, acc, as, alpha);
}

static void fa_vacc_q8_0_deq_avx2(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *v, uint64_t vs,
                                  float *acc, int64_t as, const float *alpha) {
    fa_vacc_blocks(d, nq, nk, p, ps, v, vs, acc, as, alpha, 0);
}

static void fa_vacc_q4_0_deq_avx2(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *v, uint64_t vs,
                                  float *acc, int64_t as, const float *alpha) {
    fa_vacc_blocks(d, nq, nk, p, ps, v, vs, acc, as, alpha, 1);
}

/* ---- packed rows (kernels.h) ---------------------------------------------------------- *
 * A 16-row group is two halves of 8 rows, one 32-bit lane of a ymm register per row (the
 * AVX-512 kernels take the 16 at once). Per block and half: the 8 dwords of a 32-weight
 * block (Q8_0: 8 words of bytes; Q4_0 / IQ4_NL / MXFP4: 4 words of nibbles, low and high)
 * are one vector each, from the packed layout (one load) or from 8 row-major rows (loads
 * and a 4 x 8 transpose in registers: the same operands, so both give the same bits).
 * Dot products against the token's dword k broadcast: Q4_0 as unsigned nibbles, seeded with
 * the activation's -8 * sum(q), and MXFP4 the same way with its codebook values + 12 (0..24,
 * by one byte shuffle) and -12 * sum(q); the signed weights (Q8_0, IQ4_NL's codebook values)
 * as |w| times x with w's sign. maddubs + madd (AVX2) and VPDPBUSD (AVX-VNNI) give the same
 * exact integer sums (int16 sums of maddubs pairs stay below 32767: 8 of <= 2 x 15 x 128 for
 * Q4_0, 4 of <= 2 x 24 x 128 for MXFP4; signed: |w| <= 128, each pair widened at once); then
 * one conversion and one FMA by the 8 row scales times the token's block scale. The int16
 * sums are saturating adds: the same values (nothing saturates, by those bounds), but GCC
 * cannot reassociate them into wider trees of live products, which spilled to the stack. */
enum { PK2_Q4_0, PK2_Q8_0, PK2_IQ4_NL, PK2_MXFP4 };
#define PK2_PREFETCH 2048
#define CLB_UNROLL_8 _Pragma("GCC unroll 8")

/* 8 E8M0 exponents -> clb_e8m0_to_fp32_half of each, as e8m0_half */
MD_INLINE __m256 pk2_e8m0(__m128i e8) {
    const __m256i e = _mm256_cvtepu8_epi32(e8);
    const __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(big, small, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

/* dword k of the quants at q, in every lane */
MD_INLINE __m256i pk2_bx(const uint8_t *q, int k) {
    int32_t v;
    memcpy(&v, q + 4 * k, 4);
    return _mm256_set1_epi32(v);
}

/* the 16 bytes at p of the 8 rows rs bytes apart: out[k] lane j = dword k of row j */
MD_INLINE void pk2_rm8(const uint8_t *p, uint64_t rs, __m256i out[4]) {
    __m256i v[4];
    CLB_UNROLL
    for (int i = 0; i < 4; i++)
        v[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + (uint64_t)i * rs))),
                                       _mm_loadu_si128((const __m128i *)(p + (uint64_t)(i + 4) * rs)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* pk2_tile's packed Q4_0 / MXFP4 group against 3 or 4 tokens without VNNI: both 8-row halves
   per pass, so that each broadcast of a token's dword feeds both halves' maddubs (llvm-mca,
   znver3: the vector pipes were the bound, a third of their work the broadcasts); the low
   nibbles' 8 weight vectors against every token, then the high nibbles', the tokens' int16
   sums of the low nibbles kept on the stack between the two. Each (row, token) gets the same
   integer sums and the same FMA per block as the other tiles, so the same bits. */
MD_INLINE void pk2_tile_u34(int64_t nb, const int T, const int MX, const uint8_t *w, const uint8_t *x, uint64_t xs,
                            float *y, int64_t ys) {
    const uint64_t xoff = clb_q8x_offset(nb * CLB_QK);
    const uint64_t bb = MX ? sizeof(clb_block_mxfp4) : sizeof(clb_block_q4_0);
    const uint64_t head = MX ? 1 : 2, bstride = CLB_PACK_ROWS * bb;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i lut = _mm256_add_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)clb_kvalues_mxfp4)),
        _mm256_set1_epi8(12));
    __m256 acc[2][4];
    CLB_UNROLL
    for (int h = 0; h < 2; h++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + (uint64_t)b * bstride;
        for (uint64_t o = 0; o < bstride; o += 64) _mm_prefetch((const char *)(wb + PK2_PREFETCH + o), _MM_HINT_T0);
        const uint8_t *xq[4];
        CLB_UNROLL
        for (int t = 0; t < T; t++) xq[t] = x + (uint64_t)t * xs + (uint64_t)b * sizeof(clb_block_q8_0) + 2;
        __m256 dw[2];
        CLB_UNROLL
        for (int h = 0; h < 2; h++)
            dw[h] = MX ? pk2_e8m0(_mm_loadl_epi64((const __m128i *)(wb + 8 * h)))
                       : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16 * h)));
        __m256i st[4][2];
        CLB_UNROLL
        for (int g = 0; g < 2; g++) {
            __m256i V[2][4];
            CLB_UNROLL
            for (int h = 0; h < 2; h++)
                CLB_UNROLL
                for (int k = 0; k < 4; k++) {
                    const __m256i r = LD256(wb + 16 * head + 64 * k + 32 * h);
                    V[h][k] = _mm256_and_si256(g ? _mm256_srli_epi16(r, 4) : r, m4);
                    if (MX) V[h][k] = _mm256_shuffle_epi8(lut, V[h][k]);
                }
            CLB_UNROLL
            for (int t = 0; t < T; t++) {
                __m256i s[2];
                __m256i bx = pk2_bx(xq[t], 4 * g);
                s[0] = _mm256_maddubs_epi16(V[0][0], bx);
                s[1] = _mm256_maddubs_epi16(V[1][0], bx);
                CLB_UNROLL
                for (int k = 1; k < 4; k++) {
                    bx = pk2_bx(xq[t], 4 * g + k);
                    s[0] = _mm256_adds_epi16(s[0], _mm256_maddubs_epi16(V[0][k], bx));
                    s[1] = _mm256_adds_epi16(s[1], _mm256_maddubs_epi16(V[1][k], bx));
                }
                if (!g) {
                    CLB_UNROLL
                    for (int h = 0; h < 2; h++) st[t][h] = MX ? _mm256_madd_epi16(s[h], ones) : s[h];
                    continue;
                }
                float dx;
                int32_t corr;
                memcpy(&dx, x + (uint64_t)t * xs + xoff + 4 * (uint64_t)b, 4);
                memcpy(&corr, x + (uint64_t)t * xs + xoff + 4 * (uint64_t)(nb + b), 4);
                if (MX) corr = corr / 2 * 3;
                CLB_UNROLL
                for (int h = 0; h < 2; h++) {
                    /* MXFP4: 4 of <= 2 x 24 x 127 per int16 sum; Q4_0: 8 of <= 2 x 15 x 127 */
                    const __m256i a = _mm256_add_epi32(
                        MX ? _mm256_add_epi32(st[t][h], _mm256_madd_epi16(s[h], ones))
                           : _mm256_madd_epi16(_mm256_adds_epi16(st[t][h], s[h]), ones),
                        _mm256_set1_epi32(corr));
                    acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(dw[h], _mm256_set1_ps(dx)), acc[h][t]);
                }
            }
        }
    }
    CLB_UNROLL
    for (int h = 0; h < 2; h++)
        CLB_UNROLL
        for (int t = 0; t < T; t++) _mm256_storeu_ps(y + (int64_t)t * ys + 8 * h, acc[h][t]);
}

/* one group (PK: packed at w; else row-major rows rs bytes apart) against T <= 4 tokens */
MD_INLINE void pk2_tile(int64_t nb, const int T, const int kind, const int PK, const uint8_t *w, uint64_t rs,
                        const uint8_t *x, uint64_t xs, float *y, int64_t ys, const int vnni) {
    if (PK && (kind == PK2_Q4_0 || kind == PK2_MXFP4) && !vnni && T >= 3) {
        pk2_tile_u34(nb, T, kind == PK2_MXFP4, w, x, xs, y, ys);
        return;
    }
    const uint64_t xoff = clb_q8x_offset(nb * CLB_QK);
    const int Q8 = kind == PK2_Q8_0, MX = kind == PK2_MXFP4, CB = kind == PK2_IQ4_NL || MX;
    const uint64_t bb = Q8 ? sizeof(clb_block_q8_0) : MX ? sizeof(clb_block_mxfp4) : sizeof(clb_block_q4_0);
    const uint64_t head = MX ? 1 : 2, bstride = CLB_PACK_ROWS * bb; /* bytes of a row's block scale */
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    /* U: unsigned weights against the token's quants plus a correction: Q4_0 nibbles (-8 sum(q)),
       MXFP4 codebook values + 12 (0..24; -12 sum(q) = 3/2 of Q4_0's) */
    const int U = kind == PK2_Q4_0 || MX;
    const __m256i lut = _mm256_add_epi8(
        _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(const void *)(MX ? clb_kvalues_mxfp4 : clb_kvalues_iq4nl))),
        _mm256_set1_epi8(MX ? 12 : 0));
    /* HS halves (8 rows each) per pass over the blocks: with 1 or 2 tokens both halves at once
       (the weights' loads and the token's broadcasts shared), with 3 or 4 one half per pass, so
       that its 8 weight vectors, the T accumulators and a token's partial sums fit the 16
       registers (both halves of 4 tokens spilled the products to the stack); the second pass
       reads the group from L1 / L2. (Packed Q4_0 / MXFP4 without VNNI: pk2_tile_u34.) */
    const int HS = T >= 3 ? 1 : 2;
    for (int hp = 0; hp < 2; hp += HS) {
        __m256 acc[2][4];
        CLB_UNROLL
        for (int hh = 0; hh < HS; hh++)
            CLB_UNROLL
            for (int t = 0; t < T; t++) acc[hh][t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *wb = PK ? w + (uint64_t)b * bstride : w + (uint64_t)b * bb;
            if (PK && hp == 0)
                for (uint64_t o = 0; o < bstride; o += 64) _mm_prefetch((const char *)(wb + PK2_PREFETCH + o), _MM_HINT_T0);
            const uint8_t *xq[4]; /* the token's 32 quants of block b: broadcast from there, not from a copy */
            int32_t corr[4];
            float dx[4];
            CLB_UNROLL
            for (int t = 0; t < T; t++) {
                const uint8_t *xt = x + (uint64_t)t * xs;
                xq[t] = xt + (uint64_t)b * sizeof(clb_block_q8_0) + 2;
                memcpy(&dx[t], xt + xoff + 4 * (uint64_t)b, 4);
                memcpy(&corr[t], xt + xoff + 4 * (uint64_t)(nb + b), 4);
                if (MX) corr[t] = corr[t] / 2 * 3;
            }
            CLB_UNROLL
            for (int hh = 0; hh < HS; hh++) {
                const int h = hp + hh;
                __m256 dw;
                __m256i W[8];
                if (PK) {
                    dw = MX ? pk2_e8m0(_mm_loadl_epi64((const __m128i *)(wb + 8 * h)))
                            : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + 16 * h)));
                    CLB_UNROLL_8
                    for (int k = 0; k < 8; k++)
                        if (Q8 || k < 4) W[k] = LD256(wb + 16 * head + 64 * k + 32 * h);
                    if (Q8) /* stored + 128 */
                        CLB_UNROLL_8
                        for (int k = 0; k < 8; k++) W[k] = _mm256_xor_si256(W[k], _mm256_set1_epi8((char)0x80));
                } else {
                    const uint8_t *r0 = wb + (uint64_t)(8 * h) * rs;
                    if (MX) {
                        uint8_t e[8];
                        for (int i = 0; i < 8; i++) e[i] = r0[(uint64_t)i * rs];
                        dw = pk2_e8m0(_mm_loadl_epi64((const __m128i *)e));
                    } else {
                        uint16_t d16[8];
                        for (int i = 0; i < 8; i++) memcpy(&d16[i], r0 + (uint64_t)i * rs, 2);
                        dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d16));
                    }
                    pk2_rm8(r0 + head, rs, W);
                    if (Q8) pk2_rm8(r0 + head + 16, rs, W + 4);
                }
                if (!Q8)
                    CLB_UNROLL
                    for (int g = 3; g >= 0; g--) {
                        W[g + 4] = _mm256_and_si256(_mm256_srli_epi16(W[g], 4), m4);
                        W[g] = _mm256_and_si256(W[g], m4);
                        if (CB) W[g + 4] = _mm256_shuffle_epi8(lut, W[g + 4]), W[g] = _mm256_shuffle_epi8(lut, W[g]);
                    }
                __m256i A[8];
                if (!U)
                    CLB_UNROLL_8
                    for (int k = 0; k < 8; k++) A[k] = _mm256_abs_epi8(W[k]);
                CLB_UNROLL
                for (int t = 0; t < T; t++) {
                    __m256i a;
                    if (U && vnni) {
                        a = _mm256_set1_epi32(corr[t]);
                        CLB_UNROLL_8
                        for (int k = 0; k < 8; k++) a = dpbusd_acc(a, W[k], pk2_bx(xq[t], k));
                    } else if (U) { /* int16 sums of maddubs pairs: 8 of <= 2 x 15 x 127 (Q4_0), 4 of <= 2 x 24 x 127 */
                        __m256i s[2];
                        CLB_UNROLL
                        for (int g = 0; g < 2; g++) {
                            s[g] = _mm256_maddubs_epi16(W[4 * g], pk2_bx(xq[t], 4 * g));
                            CLB_UNROLL
                            for (int k = 4 * g + 1; k < 4 * g + 4; k++)
                                s[g] = _mm256_adds_epi16(s[g], _mm256_maddubs_epi16(W[k], pk2_bx(xq[t], k)));
                        }
                        a = MX ? _mm256_add_epi32(_mm256_madd_epi16(s[0], ones), _mm256_madd_epi16(s[1], ones))
                               : _mm256_madd_epi16(_mm256_adds_epi16(s[0], s[1]), ones);
                        a = _mm256_add_epi32(a, _mm256_set1_epi32(corr[t]));
                    } else {
                        a = _mm256_setzero_si256();
                        CLB_UNROLL_8
                        for (int k = 0; k < 8; k++) {
                            const __m256i sx = _mm256_sign_epi8(pk2_bx(xq[t], k), W[k]);
                            a = vnni ? dpbusd_acc(a, A[k], sx)
                                     : _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(A[k], sx), ones));
                        }
                    }
                    acc[hh][t] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(dw, _mm256_set1_ps(dx[t])), acc[hh][t]);
                }
            }
        }
        CLB_UNROLL
        for (int hh = 0; hh < HS; hh++)
            CLB_UNROLL
            for (int t = 0; t < T; t++) _mm256_storeu_ps(y + (int64_t)t * ys + 8 * (hp + hh), acc[hh][t]);
    }
}

/* the packed (P) and row-major (R) kernels of one kind, AVX2 and AVX-VNNI */
#define PK2_DEFINE(NAME, K)                                                                                     \
    MD_INLINE void pk2p_##NAME(int64_t nb, const int T, const uint8_t *w, uint64_t rs, const uint8_t *x,          \
                              uint64_t xs, float *y, int64_t ys) { pk2_tile(nb, T, K, 1, w, rs, x, xs, y, ys, 0); } \
    MD_INLINE void pk2r_##NAME(int64_t nb, const int T, const uint8_t *w, uint64_t rs, const uint8_t *x,          \
                              uint64_t xs, float *y, int64_t ys) { pk2_tile(nb, T, K, 0, w, rs, x, xs, y, ys, 0); } \
    MD_INLINE void pk2pv_##NAME(int64_t nb, const int T, const uint8_t *w, uint64_t rs, const uint8_t *x,         \
                               uint64_t xs, float *y, int64_t ys) { pk2_tile(nb, T, K, 1, w, rs, x, xs, y, ys, 1); } \
    MD_INLINE void pk2rv_##NAME(int64_t nb, const int T, const uint8_t *w, uint64_t rs, const uint8_t *x,         \
                               uint64_t xs, float *y, int64_t ys) { pk2_tile(nb, T, K, 0, w, rs, x, xs, y, ys, 1); } \
    CLB_DEFINE_PGEMM(pgemm2_##NAME, CLB_QK, 4, pk2p_##NAME)                                                     \
    CLB_DEFINE_PGEMM(rgemm2_##NAME, CLB_QK, 2, pk2r_##NAME)                                                     \
    CLB_DEFINE_PGEMM(pgemm2_##NAME##_vnni, CLB_QK, 2, pk2pv_##NAME)                                             \
    CLB_DEFINE_PGEMM(rgemm2_##NAME##_vnni, CLB_QK, 2, pk2rv_##NAME)
PK2_DEFINE(q4_0, PK2_Q4_0)
PK2_DEFINE(q8_0, PK2_Q8_0)
PK2_DEFINE(iq4_nl, PK2_IQ4_NL)
PK2_DEFINE(mxfp4, PK2_MXFP4)

/* Q4_K on packed rows (the AVX-512 layout, x86_avx512.c: per super-block the dwords d | dmin,
 * u0, u1, u2 of rows 0..15, then the 32 quant dwords of rows 0..15), one half of 8 rows per
 * ymm as above, up to 4 tokens. Per sub-block pair of a 64-weight chunk: the low / high nibble dot
 * products exactly (maddubs pairs of <= 2 x 15 x 128, 8 of them below 32767, then one madd;
 * or VPDPBUSD), the mins' sum by madd of the (m, m) int16 pairs against the token's bsums
 * pair; then the AVX-512 kernel's float steps in its order, so the same bits. */
MD_INLINE __m256i pk2_dot8(const __m256i *q, const uint8_t *xq, const int shift, const int vnni) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (vnni) {
        __m256i a = _mm256_setzero_si256();
        CLB_UNROLL_8
        for (int k = 0; k < 8; k++) a = dpbusd_acc(a, _mm256_and_si256(_mm256_srli_epi16(q[k], shift), m4), pk2_bx(xq, k));
        return a;
    }
    /* 8 of <= 2 x 15 x 128: saturating adds that never saturate (see above) */
    __m256i s = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q[0], shift), m4), pk2_bx(xq, 0));
    CLB_UNROLL_8
    for (int k = 1; k < 8; k++)
        s = _mm256_adds_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q[k], shift), m4), pk2_bx(xq, k)));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

/* the fp16 value in the low 16 bits of each 32-bit lane (the high bits zero), as floats */
MD_INLINE __m256 pk2_fp16_lanes(__m256i v) {
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

/* Q4_K: one group against T <= 2 tokens (more spill: the group's scales, 8 weight vectors
   and each token's partial sums are live at once); each token's sums in the order of one */
MD_INLINE void pk2_tile_q4k(int64_t nsb, const int T, const int PK, const uint8_t *w, uint64_t rs, const uint8_t *x,
                            uint64_t xs, float *y, int64_t ys, const int vnni) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
    const __m256i byte = _mm256_set1_epi32(0xFF);
    __m256 acc[4][2];
    CLB_UNROLL
    for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *wb = w + (uint64_t)i * (PK ? CLB_PACK_ROWS * sizeof(clb_block_q4_k) : sizeof(clb_block_q4_k));
        if (PK)
            for (uint64_t o = 0; o < CLB_PACK_ROWS * sizeof(clb_block_q4_k); o += 64)
                _mm_prefetch((const char *)(wb + PK2_PREFETCH + o), _MM_HINT_T0);
        const clb_block_q8_k *xb[4];
        CLB_UNROLL
        for (int t = 0; t < T; t++) xb[t] = (const clb_block_q8_k *)(const void *)(x + (uint64_t)t * xs) + i;
        CLB_UNROLL
        for (int h = 0; h < 2; h++) {
            const uint8_t *r0 = wb + (uint64_t)(8 * h) * rs;
            __m256i hd[4];
            if (PK) {
                CLB_UNROLL
                for (int c = 0; c < 4; c++) hd[c] = LD256(wb + 64 * c + 32 * h);
            } else {
                pk2_rm8(r0, rs, hd);
            }
            const __m256i dd = hd[0], u0 = hd[1], u1 = hd[2], u2 = hd[3];
            const __m256 d = pk2_fp16_lanes(_mm256_and_si256(dd, _mm256_set1_epi32(0xFFFF)));
            const __m256 dmin = pk2_fp16_lanes(_mm256_srli_epi32(dd, 16));
            const __m256i sc4[2] = {_mm256_and_si256(u0, m6), _mm256_or_si256(_mm256_and_si256(u2, m4),
                                                                            _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30))};
            const __m256i mn4[2] = {_mm256_and_si256(u1, m6),
                                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4),
                                                    _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30))};
            __m256 part[4];
            __m256i msum[4];
            CLB_UNROLL
            for (int t = 0; t < T; t++) part[t] = _mm256_setzero_ps(), msum[t] = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i q[8];
                if (PK) {
                    CLB_UNROLL_8
                    for (int k = 0; k < 8; k++) q[k] = LD256(wb + 256 + 64 * (8 * c + k) + 32 * h);
                } else {
                    pk2_rm8(r0 + 16 + 32 * (uint64_t)c, rs, q);
                    pk2_rm8(r0 + 32 + 32 * (uint64_t)c, rs, q + 4);
                }
                const int j0 = 2 * c, j1 = 2 * c + 1;
                const __m256i s0 = _mm256_and_si256(_mm256_srlv_epi32(sc4[j0 / 4], _mm256_set1_epi32(8 * (j0 % 4))), byte);
                const __m256i s1 = _mm256_and_si256(_mm256_srlv_epi32(sc4[j1 / 4], _mm256_set1_epi32(8 * (j1 % 4))), byte);
                const __m256 ds0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s0)), ds1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(s1));
                __m256i mm0 = _mm256_and_si256(_mm256_srlv_epi32(mn4[j0 / 4], _mm256_set1_epi32(8 * (j0 % 4))), byte);
                __m256i mm1 = _mm256_and_si256(_mm256_srlv_epi32(mn4[j1 / 4], _mm256_set1_epi32(8 * (j1 % 4))), byte);
                mm0 = _mm256_or_si256(mm0, _mm256_slli_epi32(mm0, 16)); /* (m, m) int16 pairs */
                mm1 = _mm256_or_si256(mm1, _mm256_slli_epi32(mm1, 16));
                CLB_UNROLL
                for (int t = 0; t < T; t++) {
                    int32_t bs[2];
                    memcpy(bs, xb[t]->bsums + 2 * j0, 8);
                    const __m256i a0 = pk2_dot8(q, (const uint8_t *)xb[t]->qs + 64 * c, 0, vnni);
                    const __m256i a1 = pk2_dot8(q, (const uint8_t *)xb[t]->qs + 64 * c + 32, 4, vnni);
                    part[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a0), ds0, part[t]);
                    part[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1), ds1, part[t]);
                    msum[t] = _mm256_add_epi32(msum[t], _mm256_madd_epi16(mm0, _mm256_set1_epi32(bs[0])));
                    msum[t] = _mm256_add_epi32(msum[t], _mm256_madd_epi16(mm1, _mm256_set1_epi32(bs[1])));
                }
            }
            CLB_UNROLL
            for (int t = 0; t < T; t++) {
                const __m256 dx = _mm256_set1_ps(xb[t]->d);
                acc[t][h] = _mm256_fmadd_ps(part[t], dx, acc[t][h]);
                acc[t][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[t]), _mm256_mul_ps(dmin, dx), acc[t][h]);
            }
        }
    }
    CLB_UNROLL
    for (int t = 0; t < T; t++) {
        _mm256_storeu_ps(y + (int64_t)t * ys, acc[t][0]);
        _mm256_storeu_ps(y + (int64_t)t * ys + 8, acc[t][1]);
    }
}

#define PK2_Q4K(NAME, PK, VNNI)                                                                                  \
    MD_INLINE void NAME(int64_t nb, const int T, const uint8_t *w, uint64_t rs, const uint8_t *x, uint64_t xs,   \
                        float *y, int64_t ys) {                                                                 \
        pk2_tile_q4k(nb, T, PK, w, rs, x, xs, y, ys, VNNI);                                                     \
    }
PK2_Q4K(pk2p_q4_k, 1, 0)
PK2_Q4K(pk2r_q4_k, 0, 0)
PK2_Q4K(pk2pv_q4_k, 1, 1)
PK2_Q4K(pk2rv_q4_k, 0, 1)
/* packed, without VNNI: 4 tokens per pass (the group's scales and weight vectors unpacked once
   for all 4; kbench --isa avx2 --packed --tok 4, 2 threads from DRAM, 47-66 -> 54-81 GMAC/s
   against passes of 2); the others keep 2 (not measured with 4: no VNNI here, and the
   row-major twin's transposes take registers) */
CLB_DEFINE_PGEMM(pgemm2_q4_k, CLB_QK_K, 4, pk2p_q4_k)
CLB_DEFINE_PGEMM(rgemm2_q4_k, CLB_QK_K, 2, pk2r_q4_k)
CLB_DEFINE_PGEMM(pgemm2_q4_k_vnni, CLB_QK_K, 2, pk2pv_q4_k)
CLB_DEFINE_PGEMM(rgemm2_q4_k_vnni, CLB_QK_K, 2, pk2rv_q4_k)

void clb_kernels_fill_avx2_pack(clb_pgemm_fn *pgemm, clb_pgemm_fn *rgemm, bool vnni) {
    pgemm[CLB_DT_Q4_K] = vnni ? pgemm2_q4_k_vnni : pgemm2_q4_k;
    rgemm[CLB_DT_Q4_K] = vnni ? rgemm2_q4_k_vnni : rgemm2_q4_k;
    pgemm[CLB_DT_Q4_0] = vnni ? pgemm2_q4_0_vnni : pgemm2_q4_0;
    rgemm[CLB_DT_Q4_0] = vnni ? rgemm2_q4_0_vnni : rgemm2_q4_0;
    pgemm[CLB_DT_Q8_0] = vnni ? pgemm2_q8_0_vnni : pgemm2_q8_0;
    rgemm[CLB_DT_Q8_0] = vnni ? rgemm2_q8_0_vnni : rgemm2_q8_0;
    pgemm[CLB_DT_IQ4_NL] = vnni ? pgemm2_iq4_nl_vnni : pgemm2_iq4_nl;
    rgemm[CLB_DT_IQ4_NL] = vnni ? rgemm2_iq4_nl_vnni : rgemm2_iq4_nl;
    pgemm[CLB_DT_MXFP4] = vnni ? pgemm2_mxfp4_vnni : pgemm2_mxfp4;
    rgemm[CLB_DT_MXFP4] = vnni ? rgemm2_mxfp4_vnni : rgemm2_mxfp4;
}

void clb_kernels_fill_avx2_mdot(clb_kernels *k, clb_mdot_fn *mdot, bool vnni) {
    mdot[CLB_DT_Q4_0] = vnni ? mdot_q4_0_vnni : mdot_q4_0;
    mdot[CLB_DT_Q8_0] = vnni ? mdot_q8_0_vnni : mdot_q8_0;
    mdot[CLB_DT_Q4_K] = mdot_q4_k;
    mdot[CLB_DT_Q5_K] = mdot_q5_k;
    mdot[CLB_DT_Q6_K] = mdot_q6_k;
    mdot[CLB_DT_IQ4_NL] = vnni ? mdot_iq4_nl_vnni : mdot_iq4_nl;
    mdot[CLB_DT_MXFP4] = vnni ? mdot_mxfp4_vnni : mdot_mxfp4;
    k->vec_dot[CLB_DT_IQ4_NL] = vnni ? mdot_iq4_nl_vnni_1 : mdot_iq4_nl_1;
    k->vec_dot[CLB_DT_MXFP4] = vnni ? mdot_mxfp4_vnni_1 : mdot_mxfp4_1;
    k->vec_dot[CLB_DT_Q4_0] = vnni ? mdot_q4_0_vnni_1 : mdot_q4_0_1;
    k->vec_dot[CLB_DT_Q8_0] = vnni ? mdot_q8_0_vnni_1 : mdot_q8_0_1;
    k->vec_dot[CLB_DT_Q4_K] = mdot_q4_k_1;
    k->vec_dot[CLB_DT_Q5_K] = mdot_q5_k_1;
    k->vec_dot[CLB_DT_Q6_K] = mdot_q6_k_1;
    k->fa_scores[CLB_DT_Q4_0] = vnni ? fa_scores_q4_0_vnni : fa_scores_q4_0_avx2;
    k->fa_scores[CLB_DT_Q8_0] = vnni ? fa_scores_q8_0_vnni : fa_scores_q8_0_avx2;
    if (vnni) k->isa = "avx2+vnni";
}

/* ---- table --------------------------------------------------------------------------- */

void clb_kernels_fill_avx2(clb_kernels *k) {
    k->isa = "avx2";
    k->vec_dot[CLB_DT_F32] = vec_dot_f32;
    k->axpy_f32 = axpy_f32;
    k->vec_dot[CLB_DT_F16] = vec_dot_f16;
    k->vec_dot[CLB_DT_BF16] = vec_dot_bf16;
    k->vec_dot[CLB_DT_Q4_1] = vec_dot_q4_1;
    k->vec_dot[CLB_DT_Q5_0] = vec_dot_q5_0;
    k->vec_dot[CLB_DT_Q5_1] = vec_dot_q5_1;
    k->vec_dot[CLB_DT_Q2_K] = vec_dot_q2_k;
    k->vec_dot[CLB_DT_Q3_K] = vec_dot_q3_k;
    k->vec_dot[CLB_DT_IQ4_XS] = vec_dot_iq4_xs;
    k->quantize[CLB_DT_F16] = quantize_f16;
    k->quantize[CLB_DT_Q8_0] = quantize_q8_0;
    k->quantize[CLB_DT_Q8_K] = quantize_q8_k;
    fa_fill_avx2(k);
    k->fa_vacc[CLB_DT_Q8_0] = fa_vacc_q8_0_deq_avx2;
    k->fa_vacc[CLB_DT_Q4_0] = fa_vacc_q4_0_deq_avx2;
    /* Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, MXFP4: the blocked kernels (clb_kernels_fill_avx2_mdot) */
}

#else
typedef int clb_x86_avx2_empty_tu; /* ISO C forbids an empty translation unit */
#endif /* __x86_64__ */
