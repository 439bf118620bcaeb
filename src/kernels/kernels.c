/* kernels.c — run-time selection of the kernel table.
 *
 * Tables are built once (pthread_once): generic first, then each SIMD file overrides the
 * entries it implements, so a type without a SIMD kernel keeps the portable one.
 * COLIBRI_ISA=generic forces the portable table; COLIBRI_ISA=<name> (avx2, neon,
 * neon+dotprod) picks that table when the CPU supports it, else the best one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/kernels_impl.h"

enum { ISA_GENERIC, ISA_AVX2, ISA_NEON, ISA_NEON_DOT, ISA_COUNT };

static clb_kernels tables[ISA_COUNT];
static bool available[ISA_COUNT];
static const clb_kernels *selected;
static const clb_kernels *best_simd;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) {
    clb_kernels_fill_generic(&tables[ISA_GENERIC]);
    available[ISA_GENERIC] = true;
    const clb_cpu_features *cpu = clb_cpu();
    (void)cpu;
#if defined(__x86_64__)
    if (cpu->avx2 && cpu->fma && cpu->f16c) {
        clb_kernels_fill_generic(&tables[ISA_AVX2]);
        clb_kernels_fill_avx2(&tables[ISA_AVX2]);
        available[ISA_AVX2] = true;
        best_simd = &tables[ISA_AVX2];
    }
#endif
#if defined(__aarch64__)
    if (cpu->neon) {
        clb_kernels_fill_generic(&tables[ISA_NEON]);
        clb_kernels_fill_neon(&tables[ISA_NEON], false);
        available[ISA_NEON] = true;
        best_simd = &tables[ISA_NEON];
        if (cpu->dotprod) {
            clb_kernels_fill_generic(&tables[ISA_NEON_DOT]);
            clb_kernels_fill_neon(&tables[ISA_NEON_DOT], true);
            available[ISA_NEON_DOT] = true;
            best_simd = &tables[ISA_NEON_DOT];
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
