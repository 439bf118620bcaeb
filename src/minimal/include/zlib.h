/* zlib.h — MINIMAL=1 stand-in for the only part of zlib the engine uses without the codecs:
 * the CRC-32 of .colibri files and state files (crc32, crc32_z, crc32_combine), same values as zlib's.
 * Implemented in src/minimal/crc32_sw.c; found first through -Isrc/minimal/include. */
#ifndef CLB_MINIMAL_ZLIB_H
#define CLB_MINIMAL_ZLIB_H

#include <stddef.h>

typedef unsigned char Bytef;
typedef unsigned int uInt;
typedef unsigned long uLong;
typedef size_t z_size_t;
typedef long long z_off_t;

uLong crc32(uLong crc, const Bytef *buf, uInt len);
uLong crc32_z(uLong crc, const Bytef *buf, z_size_t len);
/* the CRC of A then B from crc(A), crc(B) and B's length */
uLong crc32_combine(uLong crc_a, uLong crc_b, z_off_t len_b);

#endif
