/* crc32.c — the zlib CRC-32 of .colibri files (clb_crc32, container.h).
 *
 * The zlib CRC-32 (IEEE 802.3, reflected, polynomial 0x04C11DB7), computed with the CPU's
 * carry-less multiply (x86-64 PCLMULQDQ) or CRC32 instructions (ARMv8 CRC extension) when
 * present, else zlib. Results are identical; the unit test checks them against zlib.
 *
 * PCLMUL folding: four 128-bit lanes hold the message 64 bytes at a time. A 128-bit chunk
 * C = H x^64 + L (H in the low lane: reflected bit order puts high degrees first) that is
 * followed by N more message bits is replaced by H (x^(N+64) mod P) + L (x^N mod P),
 * which has the same remainder and lines up with the chunk N bits later, so it is XORed
 * into it. The last 128-bit value plus the tail have the same zero-init CRC as the whole
 * message, so zlib finishes them (no Barrett reduction needed). Constants below are
 * x^n mod P bit-reflected into a 64-bit lane and divided by x (a carry-less product of
 * reflected operands comes out multiplied by x). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "format/container.h"

#define CRC_CHUNK ((size_t)1 << 30)

#if defined(__x86_64__)
#include <immintrin.h>
#define CRC_HW_X86 1

__attribute__((target("pclmul,sse2"))) static inline __m128i crc_fold(__m128i x, __m128i k,
                                                                      __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)),
                         next);
}

__attribute__((target("pclmul,sse2"))) static uint32_t crc32_hw(uint32_t crc, const uint8_t *p, size_t n) {
    if (n < 64) return (uint32_t)crc32_z(crc, p, n);
    const __m128i k4 = _mm_set_epi64x((long long)0xcad38e8f00000000ull, (long long)0x653d982200000000ull);
    const __m128i k1 = _mm_set_epi64x((long long)0x9ba54c6f00000000ull, (long long)0x65673b4600000000ull);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p), x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32)), x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc)); /* the initial register value */
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x0 = crc_fold(x0, k4, _mm_loadu_si128((const __m128i *)p));
        x1 = crc_fold(x1, k4, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = crc_fold(x2, k4, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = crc_fold(x3, k4, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x1 = crc_fold(x0, k1, x1);
    x2 = crc_fold(x1, k1, x2);
    x3 = crc_fold(x2, k1, x3);
    for (; n >= 16; p += 16, n -= 16) x3 = crc_fold(x3, k1, _mm_loadu_si128((const __m128i *)p));
    uint8_t r[16];
    _mm_storeu_si128((__m128i *)r, x3);
    return (uint32_t)crc32_z(crc32_z(0xffffffffu, r, 16), p, n);
}

static bool crc32_hw_ok(void) { return __builtin_cpu_supports("pclmul"); }

#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#define CRC_HW_ARM 1
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

__attribute__((target("+crc"))) static uint32_t crc32_hw(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    for (; n && ((uintptr_t)p & 7); n--) crc = __crc32b(crc, *p++);
    for (; n >= 32; p += 32, n -= 32) {
        uint64_t a, b, c, d;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(&c, p + 16, 8);
        memcpy(&d, p + 24, 8);
        crc = __crc32d(__crc32d(__crc32d(__crc32d(crc, a), b), c), d);
    }
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t a;
        memcpy(&a, p, 8);
        crc = __crc32d(crc, a);
    }
    for (; n; n--) crc = __crc32b(crc, *p++);
    return ~crc;
}

static bool crc32_hw_ok(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#endif

#if defined(CRC_HW_X86) || defined(CRC_HW_ARM)
static _Atomic int crc_hw_state; /* 0 unknown, 1 hardware, 2 zlib */
#endif

uint32_t clb_crc32(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
#if defined(CRC_HW_X86) || defined(CRC_HW_ARM)
    int st = crc_hw_state;
    if (!st) {
        const char *isa = getenv("COLIBRI_ISA");
        st = (isa && strcmp(isa, "generic") == 0) || !crc32_hw_ok() ? 2 : 1;
        crc_hw_state = st;
    }
    if (st == 1) {
        while (n > 0) {
            size_t k = n > CRC_CHUNK ? CRC_CHUNK : n;
            crc = crc32_hw(crc, p, k);
            p += k;
            n -= k;
        }
        return crc;
    }
#endif
    while (n > 0) {
        size_t k = n > CRC_CHUNK ? CRC_CHUNK : n;
        crc = (uint32_t)crc32_z(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}


uint32_t clb_crc32_combine(uint32_t a, uint32_t b, uint64_t len_b) {
    return (uint32_t)crc32_combine(a, b, (z_off_t)len_b);
}
