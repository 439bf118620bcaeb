/* codec_bench.c — throughput of the .colibri version 2 segment codecs on one core, and the
 * compression ratio, per chunk kind, of a model's tensors.
 *
 *   bench/build/codec_bench [MODEL] [--seconds S] [--sample MIB]
 *
 * Without MODEL: AES-256-GCM encryption and decryption by each backend of the build (libcrypto,
 * with AES-NI and PCLMULQDQ on x86-64, the ARMv8 AES and PMULL instructions on aarch64, as
 * OpenSSL picks at run time; on x86-64 also Intel's ipsec-mb, VAES-512 where the CPU has it) and zstd / zlib decompression of 4 MiB segments of a synthetic bf16-like
 * buffer, single-threaded, GB/s of plain bytes. With MODEL (any file colibri reads): every
 * tensor, grouped by dtype, is split into 4 MiB segments and encoded as `convert` would
 * (zstd 3, zstd 19, zlib 6; with and without the byte split for 16-bit types); prints the
 * ratio plain / stored and the single-core decode speed, over the first MIB MiB of each dtype
 * (default 1024; zstd 19 encodes at a few MB/s). The figures of docs/benchmarks.md
 * ("Encoded containers") come from here. Times are this thread's CPU time, so the figures are per core
 * even on a busy machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colibri.h"
#include "core/common.h"
#include "format/codec.h"
#include "model/source.h"

enum { SEG = 1 << 22 };

/* This thread's CPU time: a shared machine's other jobs take the core away now and then,
   so wall time would understate what one core does (openssl speed measures CPU time too). */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Repeats decode of one encoded segment for `secs`; returns plain GB/s. */
static double decode_rate(clb_codec *k, const clb_seg_ref *r, const uint8_t *stored, size_t len, size_t n, double secs) {
    uint8_t *tmp = malloc(len), *out = malloc(n);
    double t0 = now(), t;
    long reps = 0;
    do {
        memcpy(tmp, stored, len); /* decryption works in place: a fresh copy each time */
        if (clb_codec_decode(k, r, tmp, len, out, n)) {
            fprintf(stderr, "decode failed: %s\n", colibri_last_error());
            exit(1);
        }
        reps++;
        t = now();
    } while (t - t0 < secs);
    /* the copy is part of what the expert store does too (pread into a staging buffer) */
    free(tmp);
    free(out);
    return (double)n * (double)reps / (t - t0) / 1e9;
}

static void synthetic(double secs) {
    uint8_t *plain = malloc(SEG), *out = malloc(clb_codec_bound(CLB_CODEC_ZSTD, true, SEG));
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < SEG; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        plain[i] = i & 1 ? (uint8_t)(0x3c + (s & 3)) : (uint8_t)s; /* bf16-like: a few exponents */
    }
    uint8_t key[32] = {1}, salt[32] = {2};
    clb_keys *keys;
    if (clb_keys_derive(key, salt, &keys)) exit(1);
    const clb_seg_ref r = {.chunk = 1, .seg = 0, .aad = (const uint8_t *)"aad", .aad_len = 3, .split16 = true};
    printf("one core, %d MiB segments, GB/s of plain bytes\n", SEG >> 20);
    /* encryption alone (raw segments), by each AES-256-GCM backend the build has */
    for (int b = CLB_AES_LIBCRYPTO; b <= CLB_AES_IPSEC_MB; b++) {
        clb_aes_force(b);
        if (b == CLB_AES_IPSEC_MB && strcmp(colibri_aes_name(), "libcrypto") == 0) break; /* not in this build */
        clb_codec *k = clb_codec_new(CLB_CODEC_NONE, 0, keys, SEG);
        size_t len;
        double t0 = now();
        long reps = 0;
        do {
            clb_codec_encode(k, &r, plain, SEG, out, &len);
            reps++;
        } while (now() - t0 < secs);
        printf("aes-256-gcm encrypt  %6.2f GB/s (%s)\n", (double)SEG * (double)reps / (now() - t0) / 1e9, colibri_aes_name());
        printf("aes-256-gcm decrypt  %6.2f GB/s (%s; copy of the stored bytes included)\n",
               decode_rate(k, &r, out, len, SEG, secs), colibri_aes_name());
        clb_codec_free(k);
    }
    clb_aes_force(-1);
    clb_codec *k;
    size_t len;
    for (int codec = CLB_CODEC_ZSTD; codec <= CLB_CODEC_ZLIB; codec++)
        for (int enc = 0; enc < 2; enc++) {
            k = clb_codec_new(codec, 0, enc ? keys : NULL, SEG);
            clb_codec_encode(k, &r, plain, SEG, out, &len);
            printf("%s%s decode %6.2f GB/s (ratio %.3f)\n", clb_codec_name(codec), enc ? "+aes" : "    ",
                   decode_rate(k, &r, out, len, SEG, secs), (double)SEG / (double)len);
            clb_codec_free(k);
        }
    clb_keys_free(keys);
    free(plain);
    free(out);
}

typedef struct acc {
    uint64_t plain, stored[6];
    double dsec[6];
    int n;
} acc;

static void model(const char *path, double secs, uint64_t sample_budget) {
    clb_source s;
    if (clb_source_open(path, &s)) {
        fprintf(stderr, "%s\n", colibri_last_error());
        exit(1);
    }
    static acc by[CLB_DT_COUNT];
    static const struct { int codec, level; bool split; const char *name; } cfg[6] = {
        {CLB_CODEC_ZSTD, 3, true, "zstd:3"},  {CLB_CODEC_ZSTD, 3, false, "zstd:3 nosplit"},
        {CLB_CODEC_ZSTD, 19, true, "zstd:19"}, {CLB_CODEC_ZLIB, 6, true, "zlib:6"},
        {CLB_CODEC_ZLIB, 6, false, "zlib:6 nosplit"}, {CLB_CODEC_ZLIB, 9, true, "zlib:9"},
    };
    clb_codec *k[6];
    for (int c = 0; c < 6; c++) k[c] = clb_codec_new(cfg[c].codec, cfg[c].level, NULL, SEG);
    uint8_t *out = malloc(clb_codec_bound(CLB_CODEC_ZSTD, false, SEG)), *back = malloc(SEG), *tmp = malloc(SEG + 4096);
    for (int i = 0; i < s.n_tensors; i++) {
        const clb_src_tensor *t = &s.tensors[i];
        if (!t->data || t->dtype < 0 || t->dtype >= CLB_DT_COUNT) continue;
        acc *a = &by[t->dtype];
        if (a->plain >= sample_budget) continue;
        a->n++;
        const bool b16 = t->dtype == CLB_DT_F16 || t->dtype == CLB_DT_BF16;
        for (uint64_t off = 0; off < t->size; off += SEG) {
            const size_t n = (size_t)CLB_MIN((uint64_t)SEG, t->size - off);
            a->plain += n;
            for (int c = 0; c < 6; c++) {
                const clb_seg_ref r = {.split16 = b16 && cfg[c].split};
                size_t len;
                clb_codec_encode(k[c], &r, t->data + off, n, out, &len);
                a->stored[c] += len;
                memcpy(tmp, out, len);
                double t0 = now();
                clb_codec_decode(k[c], &r, tmp, len, back, n);
                a->dsec[c] += now() - t0;
            }
        }
    }
    (void)secs;
    printf("%s: ratio plain/stored (single-core decode GB/s), 4 MiB segments, by dtype\n", path);
    printf("%-7s %6s %9s", "dtype", "tensors", "MiB");
    for (int c = 0; c < 6; c++) printf(" %22s", cfg[c].name);
    printf("\n");
    for (int d = 0; d < CLB_DT_COUNT; d++) {
        const acc *a = &by[d];
        if (!a->n) continue;
        printf("%-7s %6d %9.1f", clb_dtype_name(d), a->n, a->plain / 1048576.0);
        for (int c = 0; c < 6; c++)
            printf("        %6.3f (%5.2f)", (double)a->plain / (double)a->stored[c], a->plain / 1e9 / a->dsec[c]);
        printf("\n");
    }
    for (int c = 0; c < 6; c++) clb_codec_free(k[c]);
    free(out);
    free(back);
    free(tmp);
    clb_source_close(&s);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    double secs = 1.0;
    uint64_t sample = (uint64_t)1 << 30; /* per dtype: the ratio settles long before */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--sample") && i + 1 < argc) sample = (uint64_t)atof(argv[++i]) << 20;
        else path = argv[i];
    }
    if (path) model(path, secs, sample);
    else synthetic(secs);
    return 0;
}
