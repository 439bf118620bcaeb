/* pack.c — the row-interleaved ("packed") weight layouts of kernels.h, and the Q8_0
 * activation extras the packed kernels read. Portable: packing is done once per weight,
 * when it is placed in memory. */
#include <string.h>

#include "kernels/kernels_impl.h"

/* weights per block of the packable dtypes */
static int64_t pack_block(int dtype) { return dtype == CLB_DT_Q4_K ? CLB_QK_K : CLB_QK; }

bool clb_pack_layout_known(int dtype, int64_t cols) {
    const int64_t bs = pack_block(dtype);
    return (dtype == CLB_DT_Q4_0 || dtype == CLB_DT_Q8_0 || dtype == CLB_DT_Q4_K || dtype == CLB_DT_IQ4_NL ||
            dtype == CLB_DT_MXFP4) &&
           cols > 0 && cols % bs == 0 &&
           cols <= CLB_PACK_MAX_COLS;
}

uint64_t clb_pack_scratch_bytes(int dtype, int64_t cols) {
    uint64_t rb = 0;
    if (!clb_pack_layout_known(dtype, cols) || !clb_row_bytes(dtype, cols, &rb)) return 0;
    return rb * CLB_PACK_ROWS;
}

static inline uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* One group, row-major rows (rb bytes apart) at rm -> packed at pk, or back (to_packed
   false), 4-byte words at a time. Q4_0/IQ4_NL/Q8_0/MXFP4 (kernels.h): per block 16 scales, then
   word c of rows 0..15 for each c (Q8_0 words with every byte + 128, xor 0x80). Q4_K
   (x86_avx512.c): per super-block word c = 0..35 of rows 0..15 (d|dmin, the three scale
   words, the 32 quant words). */
static void permute_group(int dtype, int64_t nb, uint64_t rb, uint8_t *rm, uint8_t *pk, bool to_packed) {
    const int q8 = dtype == CLB_DT_Q8_0, qk = dtype == CLB_DT_Q4_K;
    const int mx = dtype == CLB_DT_MXFP4;
    const uint64_t bb = qk   ? sizeof(clb_block_q4_k)
                        : q8 ? sizeof(clb_block_q8_0)
                        : mx ? sizeof(clb_block_mxfp4)
                             : sizeof(clb_block_q4_0); /* = IQ4_NL's */
    const int words = qk ? 36 : q8 ? 8 : 4;
    const uint64_t head = qk ? 0 : mx ? 1 : 2; /* bytes of the scale (fp16, E8M0) before the words */
    const uint32_t flip = q8 ? 0x80808080u : 0;
    for (int r = 0; r < CLB_PACK_ROWS; r++) {
        uint8_t *row = rm + (uint64_t)r * rb;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = row + (uint64_t)b * bb, *pb = pk + (uint64_t)b * bb * CLB_PACK_ROWS;
            uint8_t *pw = pb + head * CLB_PACK_ROWS + 4 * r;
            if (to_packed) {
                memcpy(pb + head * r, blk, head);
                for (int c = 0; c < words; c++) st32(pw + 4 * CLB_PACK_ROWS * c, ld32(blk + head + 4 * c) ^ flip);
            } else {
                memcpy(blk, pb + head * r, head);
                for (int c = 0; c < words; c++) st32(blk + head + 4 * c, ld32(pw + 4 * CLB_PACK_ROWS * c) ^ flip);
            }
        }
    }
}

int64_t clb_pack_rows_to(int dtype, int64_t cols, int64_t rows, const void *src, void *dst) {
    uint64_t rb = 0;
    if (!clb_pack_layout_known(dtype, cols) || !clb_row_bytes(dtype, cols, &rb)) return 0;
    const int64_t groups = rows / CLB_PACK_ROWS;
    const uint64_t gb = rb * CLB_PACK_ROWS;
    for (int64_t g = 0; g < groups; g++)
        permute_group(dtype, cols / pack_block(dtype), rb, (uint8_t *)(uintptr_t)src + (uint64_t)g * gb,
                      (uint8_t *)dst + (uint64_t)g * gb, true);
    memcpy((uint8_t *)dst + (uint64_t)groups * gb, (const uint8_t *)src + (uint64_t)groups * gb,
           (size_t)(rb * (uint64_t)(rows - groups * CLB_PACK_ROWS)));
    return groups * CLB_PACK_ROWS;
}

int64_t clb_pack_rows(int dtype, int64_t cols, int64_t rows, void *data, void *scratch) {
    uint64_t rb = 0;
    if (!clb_pack_layout_known(dtype, cols) || !clb_row_bytes(dtype, cols, &rb)) return 0;
    const int64_t groups = rows / CLB_PACK_ROWS;
    for (int64_t g = 0; g < groups; g++) {
        uint8_t *base = (uint8_t *)data + (uint64_t)g * rb * CLB_PACK_ROWS;
        memcpy(scratch, base, rb * CLB_PACK_ROWS);
        permute_group(dtype, cols / pack_block(dtype), rb, scratch, base, true);
    }
    return groups * CLB_PACK_ROWS;
}

void clb_unpack_rows(int dtype, int64_t cols, int64_t packed_rows, void *data, void *scratch) {
    uint64_t rb = 0;
    if (!clb_pack_layout_known(dtype, cols) || !clb_row_bytes(dtype, cols, &rb)) return;
    for (int64_t g = 0; g < packed_rows / CLB_PACK_ROWS; g++) {
        uint8_t *base = (uint8_t *)data + (uint64_t)g * rb * CLB_PACK_ROWS;
        memcpy(scratch, base, rb * CLB_PACK_ROWS);
        permute_group(dtype, cols / pack_block(dtype), rb, base, scratch, false);
    }
}

void clb_q8_fill_extras(void *row, int64_t cols) { clb_q8_fill_extras_range(row, cols, 0, cols / CLB_QK); }

void clb_q8_fill_extras_range(void *row, int64_t cols, int64_t b0, int64_t b1) {
    const clb_block_q8_0 *b = row;
    const int64_t nb = cols / CLB_QK;
    uint8_t *ex = (uint8_t *)row + clb_q8x_offset(cols);
    for (int64_t i = b0; i < b1; i++) {
        int32_t s = 0;
        for (int j = 0; j < CLB_QK; j++) s += b[i].qs[j];
        const float d = clb_fp16_to_fp32(b[i].d);
        const int32_t n8 = -8 * s, n128 = -128 * s;
        memcpy(ex + 4 * (uint64_t)i, &d, 4);
        memcpy(ex + 4 * (uint64_t)(nb + i), &n8, 4);
        memcpy(ex + 4 * (uint64_t)(2 * nb + i), &n128, 4);
    }
}
