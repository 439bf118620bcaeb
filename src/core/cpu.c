/* cpu.c — CPU feature detection (cpuid on x86-64, HWCAP on aarch64). */
#include <stdio.h>
#include <string.h>

#include "core/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#endif

static clb_cpu_features feats;
static int detected;
static char desc[128];

static void detect(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        feats.fma = (c >> 12) & 1;
        feats.f16c = (c >> 29) & 1;
        int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
        unsigned xcr0 = 0;
        if (osxsave) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            xcr0 = lo;
        }
        int ymm_ok = avx && (xcr0 & 6) == 6;
        if (ymm_ok && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            feats.avx2 = (b >> 5) & 1;
            feats.avx512f = ((b >> 16) & 1) && (xcr0 & 0xe6) == 0xe6;
            if (feats.avx512f) {
                feats.avx512bw = (b >> 30) & 1;
                feats.avx512vl = (b >> 31) & 1;
                feats.avx512vbmi = (c >> 1) & 1;
                feats.avx512vnni = (c >> 11) & 1;
            }
        }
        if (!ymm_ok) feats.fma = feats.f16c = 0;
    }
#elif defined(__aarch64__)
    feats.neon = 1;
#if defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP);
    feats.dotprod = (hw & HWCAP_ASIMDDP) != 0;
    feats.fp16 = (hw & HWCAP_FPHP) != 0;
    feats.i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
#endif
    detected = 1;
}

const clb_cpu_features *clb_cpu(void) {
    if (!detected) detect(); /* idempotent: a race writes the same values */
    return &feats;
}

const char *clb_cpu_describe(void) {
    const clb_cpu_features *f = clb_cpu();
    desc[0] = 0;
    if (f->avx2) strcat(desc, "avx2 ");
    if (f->fma) strcat(desc, "fma ");
    if (f->f16c) strcat(desc, "f16c ");
    if (f->avx512f) strcat(desc, "avx512f ");
    if (f->avx512bw) strcat(desc, "avx512bw ");
    if (f->avx512vl) strcat(desc, "avx512vl ");
    if (f->avx512vnni) strcat(desc, "avx512vnni ");
    if (f->avx512vbmi) strcat(desc, "avx512vbmi ");
    if (f->neon) strcat(desc, "neon ");
    if (f->dotprod) strcat(desc, "dotprod ");
    if (f->i8mm) strcat(desc, "i8mm ");
    if (f->fp16) strcat(desc, "fp16 ");
    size_t n = strlen(desc);
    if (n) desc[n - 1] = 0;
    else strcpy(desc, "generic");
    return desc;
}
