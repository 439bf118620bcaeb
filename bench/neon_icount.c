/* neon_icount.c — the driver bench/neon_icount.sh counts instructions of under qemu: one
 * group of 16 weight rows against one Q8 activation row, `reps` times, through the kernel
 * table of one ISA (internal API):
 *
 *   neon_icount ISA DTYPE MODE COLS REPS      MODE: row (per-row vec_dot), packed
 *                                             (interleaved in memory), rowmajor (packed
 *                                             kernels on row-major rows)
 * Everything but the REPS products is the same for a given (ISA, DTYPE, MODE, COLS), so
 * the difference between two REPS is the instructions of the products alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "bench_util.h"

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: neon_icount ISA DTYPE row|packed|rowmajor COLS REPS\n");
        return 2;
    }
    const clb_kernels *k = clb_kernels_by_isa(argv[1]);
    clb_dtype t;
    const int64_t cols = atoll(argv[4]), reps = atoll(argv[5]), rows = CLB_PACK_ROWS;
    const int mode = !strcmp(argv[3], "row") ? 0 : !strcmp(argv[3], "packed") ? 1 : !strcmp(argv[3], "rowmajor") ? 2 : -1;
    uint64_t rb, xb;
    if (!k || clb_dtype_from_name(argv[2], &t) != 0 || mode < 0 || !clb_row_bytes(t, cols, &rb) ||
        !clb_pack_layout_known(t, cols) || reps < 0 || (mode && !clb_kernels_packs(k, t))) {
        fprintf(stderr, "neon_icount: unknown or unsupported ISA, type, mode or size\n");
        return 2;
    }
    const clb_dtype vt = clb_type(t)->vec_dot_type;
    clb_row_bytes(vt, cols, &xb);
    if (vt == CLB_DT_Q8_0) xb = clb_q8x_offset(cols) + clb_q8x_bytes(cols);
    float *f = malloc(sizeof(float) * (size_t)cols);
    uint8_t *w = malloc(rb * rows), *x = calloc(1, xb), *scratch = malloc(clb_pack_scratch_bytes(t, cols));
    /* one quantized row copied to all 16 (the kernels do the same instructions whatever
       the values: no data-dependent branch), so the setup stays small */
    for (int64_t c = 0; c < cols; c++) f[c] = bench_rndf();
    clb_quantize_row_ref(t, f, w, cols);
    for (int64_t r = 1; r < rows; r++) memcpy(w + (uint64_t)r * rb, w, rb);
    for (int64_t c = 0; c < cols; c++) f[c] = bench_rndf();
    k->quantize[vt](f, x, cols);
    if (vt == CLB_DT_Q8_0) clb_q8_fill_extras(x, cols);
    const int64_t packed = mode ? rows : 0;
    if (mode == 1) clb_pack_rows(t, cols, rows, w, scratch);
    float y[CLB_PACK_ROWS], sum = 0.0f;
    for (int64_t i = 0; i < reps; i++) {
        clb_kernels_rows(k, t, cols, 0, rows, w, rb, packed, mode == 1, x, xb, 1, y, rows);
        sum += y[i % rows];
    }
    printf("%g\n", (double)sum);
    free(f);
    free(w);
    free(x);
    free(scratch);
    return 0;
}
