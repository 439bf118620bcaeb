/* fuzz_container_v2.c — libFuzzer target: encoded .colibri files (docs/FORMAT.md, version 2).
   The input becomes a file (a memfd through /proc/self/fd) and is opened with the key of the
   encrypted seeds (fuzz_key.h) given by a key callback; every chunk of an accepted file is
   decoded (each expert in segments, as the expert store does) and the file verified. Each
   input is tried twice: as given, and with the header, metadata and data CRCs recomputed and
   each chunk's CRC in the clear JSON rewritten, so mutations get past the CRCs to the JSON,
   the chunk table, the decompressors and the authentication. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "core/common.h"
#include "format/codec.h"
#include "format/container.h"
#include "fuzz_file.h"
#include "fuzz_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static int give_key(const char *p, uint8_t key[32], void *user) {
    (void)p;
    (void)user;
    memcpy(key, FUZZ_KEY, 32);
    return 0;
}

enum { F_META_OFF = 16, F_META_SIZE = 24, F_DATA_OFF = 32, F_DATA_SIZE = 40, F_META_CRC = 56, F_DATA_CRC = 64,
       F_HEADER_CRC = 124 };

static uint32_t crc_of(const uint8_t *p, uint64_t off, uint64_t len, uint64_t size) {
    if (!clb_range_ok(off, len, size)) return 0;
    return (uint32_t)crc32_z(0, p + off, (size_t)len);
}

static void one_input(const uint8_t *data, size_t size) {
    static bool keyed;
    if (!keyed) {
        colibri_set_key_callback(give_key, NULL);
        keyed = true;
    }
    const char *path = fuzz_file(data, size);
    clb_container c;
    if (clb_container_open(path, &c) != COLIBRI_OK) {
        if (!clb_last_error()[0]) __builtin_trap();
        return;
    }
    for (int i = 0; i < c.n_tensors; i++) {
        const clb_tensor *t = &c.tensors[i];
        if (t->data && t->size) sink += t->data[0] + t->data[t->size - 1];
        if (clb_container_find(&c, t->name) == NULL) __builtin_trap();
    }
    if (c.version == 2) {
        struct clb_codec *k = clb_container_codec(&c);
        const uint64_t max_seg = clb_container_max_seg(&c);
        uint8_t *stored = malloc((size_t)max_seg + 1), *plain = malloc(c.seg_size);
        for (int ci = 0; k && stored && plain && ci < c.n_chunks; ci++) /* segment by segment */
            for (int s = 0; s < c.chunks[ci].n_seg; s++) {
                const uint64_t len = c.chunks[ci].seg[s + 1] - c.chunks[ci].seg[s];
                memcpy(stored, c.map.data + c.chunks[ci].offset + c.chunks[ci].seg[s], (size_t)len);
                if (clb_container_decode_seg(&c, ci, s, stored, len, plain, k) == COLIBRI_OK)
                    sink += plain[0];
                else if (!clb_last_error()[0])
                    __builtin_trap();
            }
        free(stored);
        free(plain);
        clb_codec_free(k);
    }
    uint64_t checked = 0;
    (void)clb_container_verify(&c, &checked);
    clb_container_close(&c);
}

/* Rewrites each "crc32":"xxxxxxxx" of the clear JSON's chunk table in order with the CRC of
   the chunk the preceding "offset" and "segments" describe (best effort on mutated JSON). */
static void fix_chunk_crcs(uint8_t *b, size_t size) {
    const uint64_t mo = clb_rd_u64(b + F_META_OFF), data_off = clb_rd_u64(b + F_DATA_OFF);
    if (!clb_range_ok(mo, 8, size)) return;
    const uint64_t len = clb_rd_u64(b + mo);
    if (!clb_range_ok(mo + 8, len, size)) return;
    char *text = (char *)b + mo + 8, *end = text + len;
    for (char *p = text; p < end;) {
        char *o = memmem(p, (size_t)(end - p), "\"offset\":", 9);
        if (!o) break;
        char *cr = memmem(o, (size_t)(end - o), "\"crc32\":\"", 9);
        char *sg = cr ? memmem(cr, (size_t)(end - cr), "\"segments\":[", 12) : NULL;
        if (!sg || cr + 17 > end) break;
        uint64_t off = strtoull(o + 9, NULL, 10), total = 0;
        for (char *q = sg + 12; q < end && *q != ']';) {
            char *e;
            total += strtoull(q, &e, 10);
            if (e == q) break;
            q = e + (*e == ',');
        }
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", crc_of(b, data_off + off, total, size));
        memcpy(cr + 9, hex, 8);
        p = sg + 12;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    if (size < CLB_CONTAINER_HEADER_SIZE) return 0;
    uint8_t *fixed = malloc(size + 1);
    if (!fixed) return 0;
    memcpy(fixed, data, size);
    fix_chunk_crcs(fixed, size);
    clb_wr_u32(fixed + F_DATA_CRC, crc_of(fixed, clb_rd_u64(fixed + F_DATA_OFF), clb_rd_u64(fixed + F_DATA_SIZE), size));
    clb_wr_u32(fixed + F_META_CRC, crc_of(fixed, clb_rd_u64(fixed + F_META_OFF), clb_rd_u64(fixed + F_META_SIZE), size));
    clb_wr_u32(fixed + F_HEADER_CRC, (uint32_t)crc32_z(0, fixed, F_HEADER_CRC));
    if (memcmp(fixed, data, size) != 0) one_input(fixed, size);
    free(fixed);
    return 0;
}
