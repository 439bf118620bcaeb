/* cpu.h — run-time CPU feature detection. */
#ifndef CLB_CPU_H
#define CLB_CPU_H

#include <stdbool.h>

typedef struct clb_cpu_features {
    bool avx2, fma, f16c, avx512f; /* x86-64 */
    bool avx512bw, avx512vl, avx512vnni, avx512vbmi;
    bool neon, dotprod, fp16, i8mm; /* aarch64 (i8mm: FEAT_I8MM, HWCAP2_I8MM) */
} clb_cpu_features;

const clb_cpu_features *clb_cpu(void);
/* "avx2+fma", "neon+dotprod", "generic", ... for diagnostics */
const char *clb_cpu_describe(void);

#endif
