/* fuzz_codec.c — libFuzzer target: the segment codecs of .colibri version 2 (codec.h).
   Byte 0 picks the codec (none, zstd, zlib), byte 1 encryption and the byte split, bytes
   2..3 the plain size; the rest is (1) decoded as a stored segment of that size — hostile
   compressed data must fail cleanly or decode to exactly that many bytes — and (2) used as
   plain bytes: encode then decode must give them back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static clb_keys *keys;
static clb_codec *coders[3][2];
enum { SEG = 1 << 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    if (!keys) {
        static const uint8_t k[32] = {1}, salt[32] = {2};
        if (clb_keys_derive(k, salt, &keys)) __builtin_trap();
        for (int c = 0; c < 3; c++)
            for (int e = 0; e < 2; e++)
                if (!(coders[c][e] = clb_codec_new(c, 1, e ? keys : NULL, SEG))) __builtin_trap();
    }
    const int codec = data[0] % 3, enc = data[1] & 1;
    const size_t n = 1 + (size_t)(data[2] | data[3] << 8) % SEG;
    const uint8_t aad[] = "fuzz";
    const clb_seg_ref r = {.chunk = data[1] >> 2, .seg = 1, .aad = aad, .aad_len = 4, .split16 = (data[1] & 2) != 0};
    clb_codec *k = coders[codec][enc];
    const uint8_t *body = data + 4;
    const size_t len = size - 4;
    uint8_t *stored = malloc(clb_codec_bound(codec, enc, len > n ? len : n) + 1), *plain = malloc(n);
    if (!stored || !plain) __builtin_trap();
    memcpy(stored, body, len);
    int rc = clb_codec_decode(k, &r, stored, len, plain, n);
    if (rc != COLIBRI_OK && !clb_last_error()[0]) __builtin_trap();
    if (len > 0 && len <= SEG) { /* round trip of the body as plain bytes */
        size_t out_len = 0;
        if (clb_codec_encode(k, &r, body, len, stored, &out_len) != COLIBRI_OK) __builtin_trap();
        uint8_t *back = malloc(len);
        if (!back || clb_codec_decode(k, &r, stored, out_len, back, len) != COLIBRI_OK || memcmp(back, body, len))
            __builtin_trap();
        free(back);
    }
    free(stored);
    free(plain);
    return 0;
}
