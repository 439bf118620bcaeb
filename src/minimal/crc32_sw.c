/* crc32_sw.c — the zlib CRC-32 (reflected, polynomial 0xEDB88320) one byte at a time from a
 * 256-entry table built on first use, for the minimal build (src/minimal/include/zlib.h).
 * crc32.c still takes the PCLMUL / ARMv8 CRC paths where the CPU has them. */
#include <pthread.h>
#include <stdint.h>

#include "zlib.h"

static uint32_t table[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
}

uLong crc32_z(uLong crc, const Bytef *buf, z_size_t len) {
    if (!buf) return 0;
    pthread_once(&once, build);
    uint32_t c = (uint32_t)crc ^ 0xffffffffu;
    for (z_size_t i = 0; i < len; i++) c = table[(c ^ buf[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uLong crc32(uLong crc, const Bytef *buf, uInt len) { return crc32_z(crc, buf, len); }

/* a(x) b(x) mod P in the reflected representation (bit 31 is x^0) */
static uint32_t mul_mod_p(uint32_t a, uint32_t b) {
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m) p ^= b;
        b = b & 1 ? (b >> 1) ^ 0xEDB88320u : b >> 1; /* b *= x */
    }
    return p;
}

/* crc(A B) = crc(A) x^(8 len_b) + crc(B) mod P: the pre- and post-inversions cancel */
uLong crc32_combine(uLong crc_a, uLong crc_b, z_off_t len_b) {
    uint32_t sq = 1u << 30, r = 1u << 31; /* x^1, x^0 */
    for (int k = 0; k < 3; k++) sq = mul_mod_p(sq, sq); /* x^8: one byte */
    for (unsigned long long n = len_b > 0 ? (unsigned long long)len_b : 0; n; n >>= 1) {
        if (n & 1) r = mul_mod_p(r, sq);
        sq = mul_mod_p(sq, sq);
    }
    return mul_mod_p(r, (uint32_t)crc_a) ^ (uint32_t)crc_b;
}
