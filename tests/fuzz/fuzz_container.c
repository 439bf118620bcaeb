/* fuzz_container.c — libFuzzer target: the input becomes a file (a memfd, reached through
   /proc/self/fd) and goes through clb_container_open + clb_container_verify, then every
   accepted tensor's first and last byte is read.
   Random mutations almost never keep the header and metadata CRC32s valid, which would
   stop nearly every input at the CRC check; so each input is tried twice: as given, and
   with the metadata, data and header CRCs recomputed (field offsets from docs/FORMAT.md),
   which lets mutations reach the JSON and tensor-table validation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "core/common.h"
#include "format/container.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

/* Header fields (docs/FORMAT.md): u64 meta offset/size at 16/24, data offset/size at
   32/40, u32 metadata CRC at 56, data CRC at 64, header CRC (of bytes 0..123) at 124. */
enum { F_META_OFF = 16, F_META_SIZE = 24, F_DATA_OFF = 32, F_DATA_SIZE = 40, F_META_CRC = 56,
       F_DATA_CRC = 64, F_HEADER_CRC = 124 };

static uint32_t crc_of(const uint8_t *p, uint64_t off, uint64_t len, uint64_t size) {
    if (!clb_range_ok(off, len, size)) return 0;
    return (uint32_t)crc32_z(0, p + off, (size_t)len);
}

static void one_input(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    if (size < CLB_CONTAINER_HEADER_SIZE) return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed) return 0;
    memcpy(fixed, data, size);
    clb_wr_u32(fixed + F_META_CRC, crc_of(fixed, clb_rd_u64(fixed + F_META_OFF),
                                          clb_rd_u64(fixed + F_META_SIZE), size));
    clb_wr_u32(fixed + F_DATA_CRC, crc_of(fixed, clb_rd_u64(fixed + F_DATA_OFF),
                                          clb_rd_u64(fixed + F_DATA_SIZE), size));
    clb_wr_u32(fixed + F_HEADER_CRC, (uint32_t)crc32_z(0, fixed, F_HEADER_CRC));
    if (memcmp(fixed, data, size) != 0) one_input(fixed, size);
    free(fixed);
    return 0;
}

static void one_input(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    clb_container c;
    if (clb_container_open(path, &c) != COLIBRI_OK) {
        if (!clb_last_error()[0]) __builtin_trap();
        return;
    }
    for (int i = 0; i < c.n_tensors; i++) {
        const clb_tensor *t = &c.tensors[i];
        if (!clb_range_ok(t->offset, t->size, c.map.size)) __builtin_trap();
        if (t->size) sink += t->data[0] + t->data[t->size - 1];
        if (clb_container_find(&c, t->name) == NULL) __builtin_trap();
    }
    uint64_t checked = 0;
    (void)clb_container_verify(&c, &checked);
    clb_container_close(&c);
}
