/* kernels.c — run-time selection of the kernel table.
 *
 * Tables are built once (pthread_once): generic first, then each SIMD file overrides the
 * entries it implements, so a type without a SIMD kernel keeps the portable one.
 * COLIBRI_ISA=generic forces the portable table; COLIBRI_ISA=<name> (avx2, avx2+vnni,
 * neon, neon+dotprod) picks that table when the CPU supports it, else the best one.
 * "avx2+vnni" is the AVX2 table with the integer dot products on VPDPBUSD (AVX-VNNI,
 * CPUID.(EAX=7,ECX=1):EAX bit 4, with the OS saving YMM state, which AVX2 already needs).
 * "avx512" is that table with the Q4_0 and Q8_0 products on 512-bit VNNI/VBMI kernels
 * (AVX-512 F, BW, VL, VNNI and VBMI, with the OS saving the ZMM state).
 * On AArch64 every NEON table also computes Q4_0, Q8_0 and Q4_K on packed rows
 * (arm_neon_pack.c): "neon" with base Advanced SIMD, "neon+dotprod" with SDOT, and
 * "neon+i8mm" (FEAT_DotProd and FEAT_I8MM, HWCAP2_I8MM) with USDOT for Q8_0.
 */
#include <pthread.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/cpu.h"
#include "kernels/kernels_impl.h"

enum { ISA_GENERIC, ISA_AVX2, ISA_AVX2_VNNI, ISA_AVX512, ISA_NEON, ISA_NEON_DOT, ISA_NEON_I8MM, ISA_COUNT };

static clb_kernels tables[ISA_COUNT];
static clb_mdot_fn mdots[ISA_COUNT][CLB_DT_COUNT]; /* blocked kernels per table (kernels_impl.h) */
static clb_pgemm_fn pgemms[ISA_COUNT][CLB_DT_COUNT]; /* kernels on packed rows per table */
static clb_pgemm_fn rgemms[ISA_COUNT][CLB_DT_COUNT]; /* their row-major twins */
static bool available[ISA_COUNT];
static const clb_kernels *selected;
static const clb_kernels *best_simd;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
static bool cpu_has_avx_vnni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 4) & 1;
}
#endif

static void build(void) {
    clb_kernels_fill_generic(&tables[ISA_GENERIC]);
    available[ISA_GENERIC] = true;
    const clb_cpu_features *cpu = clb_cpu();
    (void)cpu;
#if defined(__x86_64__)
    if (cpu->avx2 && cpu->fma && cpu->f16c) {
        clb_kernels_fill_generic(&tables[ISA_AVX2]);
        clb_kernels_fill_avx2(&tables[ISA_AVX2]);
        clb_kernels_fill_avx2_mdot(&tables[ISA_AVX2], mdots[ISA_AVX2], false);
        clb_kernels_fill_avx2_pack(pgemms[ISA_AVX2], rgemms[ISA_AVX2], false);
        available[ISA_AVX2] = true;
        best_simd = &tables[ISA_AVX2];
        if (cpu_has_avx_vnni()) {
            clb_kernels_fill_generic(&tables[ISA_AVX2_VNNI]);
            clb_kernels_fill_avx2(&tables[ISA_AVX2_VNNI]);
            clb_kernels_fill_avx2_mdot(&tables[ISA_AVX2_VNNI], mdots[ISA_AVX2_VNNI], true);
            clb_kernels_fill_avx2_pack(pgemms[ISA_AVX2_VNNI], rgemms[ISA_AVX2_VNNI], true);
            available[ISA_AVX2_VNNI] = true;
            best_simd = &tables[ISA_AVX2_VNNI];
        }
        if (cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512vnni && cpu->avx512vbmi) {
            clb_kernels_fill_generic(&tables[ISA_AVX512]);
            clb_kernels_fill_avx2(&tables[ISA_AVX512]);
            clb_kernels_fill_avx2_mdot(&tables[ISA_AVX512], mdots[ISA_AVX512], available[ISA_AVX2_VNNI]);
            clb_kernels_fill_avx512_mdot(&tables[ISA_AVX512], mdots[ISA_AVX512], pgemms[ISA_AVX512], rgemms[ISA_AVX512]);
            available[ISA_AVX512] = true;
            best_simd = &tables[ISA_AVX512];
        }
    }
#endif
#if defined(__aarch64__)
    if (cpu->neon) {
        clb_kernels_fill_generic(&tables[ISA_NEON]);
        clb_kernels_fill_neon(&tables[ISA_NEON], false);
        clb_kernels_fill_neon_pack(&tables[ISA_NEON], pgemms[ISA_NEON], rgemms[ISA_NEON], 0);
        available[ISA_NEON] = true;
        best_simd = &tables[ISA_NEON];
        if (cpu->dotprod) {
            clb_kernels_fill_generic(&tables[ISA_NEON_DOT]);
            clb_kernels_fill_neon(&tables[ISA_NEON_DOT], true);
            clb_kernels_fill_neon_pack(&tables[ISA_NEON_DOT], pgemms[ISA_NEON_DOT], rgemms[ISA_NEON_DOT], 1);
            available[ISA_NEON_DOT] = true;
            best_simd = &tables[ISA_NEON_DOT];
            if (cpu->i8mm) {
                clb_kernels_fill_generic(&tables[ISA_NEON_I8MM]);
                clb_kernels_fill_neon(&tables[ISA_NEON_I8MM], true);
                clb_kernels_fill_neon_pack(&tables[ISA_NEON_I8MM], pgemms[ISA_NEON_I8MM], rgemms[ISA_NEON_I8MM], 2);
                tables[ISA_NEON_I8MM].isa = "neon+i8mm";
                available[ISA_NEON_I8MM] = true;
                best_simd = &tables[ISA_NEON_I8MM];
            }
        }
    }
#endif
    selected = best_simd ? best_simd : &tables[ISA_GENERIC];
    const char *env = getenv("COLIBRI_ISA");
    if (env && *env) {
        for (int i = 0; i < ISA_COUNT; i++) {
            if (available[i] && strcmp(env, tables[i].isa) == 0) selected = &tables[i];
        }
    }
}

const clb_kernels *clb_kernels_get(void) {
    pthread_once(&once, build);
    return selected;
}

const clb_kernels *clb_kernels_generic(void) {
    pthread_once(&once, build);
    return &tables[ISA_GENERIC];
}

const clb_kernels *clb_kernels_simd(void) {
    pthread_once(&once, build);
    return best_simd;
}

const clb_kernels *clb_kernels_by_isa(const char *name) {
    pthread_once(&once, build);
    if (!name) return NULL;
    for (int i = 0; i < ISA_COUNT; i++)
        if (available[i] && strcmp(name, tables[i].isa) == 0) return &tables[i];
    return NULL;
}

/* index of table k, -1 when k is not one of ours or dtype is out of range */
static int table_of(const clb_kernels *k, int dtype) {
    pthread_once(&once, build);
    if (!k || dtype < 0 || dtype >= CLB_DT_COUNT) return -1;
    for (int i = 0; i < ISA_COUNT; i++)
        if (k == &tables[i]) return i;
    return -1;
}

clb_mdot_fn clb_kernels_mdot(const clb_kernels *k, int dtype) {
    const int i = table_of(k, dtype);
    return i < 0 ? NULL : mdots[i][dtype];
}

clb_pgemm_fn clb_kernels_pgemm(const clb_kernels *k, int dtype) {
    const int i = table_of(k, dtype);
    return i < 0 ? NULL : pgemms[i][dtype];
}

clb_pgemm_fn clb_kernels_rgemm(const clb_kernels *k, int dtype) {
    const int i = table_of(k, dtype);
    return i < 0 ? NULL : rgemms[i][dtype];
}

bool clb_kernels_packs(const struct clb_kernels *k, int dtype) {
    return clb_kernels_pgemm(k, dtype) != NULL && clb_kernels_rgemm(k, dtype) != NULL;
}

int64_t clb_kernels_pack_rows(const struct clb_kernels *k, int dtype, int64_t cols, int64_t rows) {
    if (!clb_kernels_packs(k, dtype) || !clb_pack_layout_known(dtype, cols)) return 0;
    return rows / CLB_PACK_ROWS * CLB_PACK_ROWS;
}

void clb_kernels_rows(const clb_kernels *k, int dtype, int64_t cols, int64_t r0, int64_t r1, const void *w,
                      uint64_t row_bytes, int64_t packed_rows, bool interleaved, const void *xq, uint64_t xq_stride,
                      int n_tok, float *y, int64_t y_stride) {
    const uint8_t *wb = w, *xb = xq;
    if (r0 < packed_rows) {
        const clb_pgemm_fn pg = interleaved ? clb_kernels_pgemm(k, dtype) : clb_kernels_rgemm(k, dtype);
        const uint64_t gs = row_bytes * CLB_PACK_ROWS;
        const int64_t pend = CLB_MIN(r1, packed_rows);
        while (r0 < pend) {
            const int64_t g = r0 / CLB_PACK_ROWS, gr0 = g * CLB_PACK_ROWS;
            if (r0 == gr0 && pend - r0 >= CLB_PACK_ROWS) { /* whole groups, straight into y */
                const int64_t ng = (pend - r0) / CLB_PACK_ROWS;
                pg(cols, ng, n_tok, wb + (uint64_t)g * gs, gs, xq, xq_stride, y + r0, y_stride);
                r0 += ng * CLB_PACK_ROWS;
                continue;
            }
            /* part of a group: through a buffer, 4 tokens at a time */
            const int64_t ge = CLB_MIN(pend, gr0 + CLB_PACK_ROWS);
            float tmp[4 * CLB_PACK_ROWS];
            for (int t = 0; t < n_tok; t += 4) {
                const int nt = n_tok - t < 4 ? n_tok - t : 4;
                pg(cols, 1, nt, wb + (uint64_t)g * gs, gs, xb + (uint64_t)t * xq_stride, xq_stride, tmp, CLB_PACK_ROWS);
                for (int u = 0; u < nt; u++)
                    for (int64_t r = r0; r < ge; r++) y[(int64_t)(t + u) * y_stride + r] = tmp[u * CLB_PACK_ROWS + r - gr0];
            }
            r0 = ge;
        }
        if (r0 >= r1) return;
    }
    const clb_mdot_fn md = clb_kernels_mdot(k, dtype);
    if (!md) {
        const clb_vec_dot_fn dot = k->vec_dot[dtype];
        for (int64_t r = r0; r < r1; r++)
            for (int t = 0; t < n_tok; t++)
                dot(cols, &y[(int64_t)t * y_stride + r], wb + (uint64_t)r * row_bytes, xb + (uint64_t)t * xq_stride);
        return;
    }
    /* a block of CLB_MDOT_MAX rows (a few KiB) stays in L1 while every token passes over it */
    for (int64_t r = r0; r < r1; r += CLB_MDOT_MAX) {
        const int nr = r1 - r < CLB_MDOT_MAX ? (int)(r1 - r) : CLB_MDOT_MAX;
        for (int t = 0; t < n_tok; t += CLB_MDOT_MAX) {
            const int nt = n_tok - t < CLB_MDOT_MAX ? n_tok - t : CLB_MDOT_MAX;
            md(cols, nr, nt, wb + (uint64_t)r * row_bytes, row_bytes, xb + (uint64_t)t * xq_stride, xq_stride,
               y + (int64_t)t * y_stride + r, y_stride);
        }
    }
}
