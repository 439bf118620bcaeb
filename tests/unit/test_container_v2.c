/* test_container_v2.c — encoded .colibri files (docs/FORMAT.md, version 2) and their segment
 * codecs: byte split, zstd, zlib and AES-256-GCM round trips (raw fallback for incompressible
 * data, multi-segment chunks), authentication failures (wrong chunk, segment, associated
 * data, tag, body), key files and the key sources, and the writer + reader: every tensor's
 * bytes back, in every encoding, out-of-order writes refused, every truncation and every
 * byte flipped in the header and the metadata refused, wrong and missing keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/common.h"
#include "format/codec.h"
#include "format/container.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static char g_dir[64];

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_dir, name); }

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/colibri-v2-test.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- codec ---- */

static void test_split16(void **state) {
    (void)state;
    uint8_t a[64], b[64], c[64];
    for (int i = 0; i < 64; i++) a[i] = (uint8_t)(i * 7 + 1);
    clb_split16(a, b, 64);
    for (int i = 0; i < 32; i++) {
        assert_int_equal(b[i], a[2 * i]);
        assert_int_equal(b[32 + i], a[2 * i + 1]);
    }
    clb_join16(b, c, 64);
    assert_memory_equal(a, c, 64);
}

static const uint8_t g_key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static void test_keys(void **state) {
    (void)state;
    uint8_t salt[32] = {0}, salt2[32] = {0};
    salt2[31] = 1;
    clb_keys *a, *b, *c;
    assert_int_equal(clb_keys_derive(g_key, salt, &a), COLIBRI_OK);
    assert_int_equal(clb_keys_derive(g_key, salt, &b), COLIBRI_OK);
    assert_int_equal(clb_keys_derive(g_key, salt2, &c), COLIBRI_OK);
    assert_memory_equal(a, b, sizeof *a);            /* deterministic */
    assert_memory_not_equal(a->data_key, c->data_key, 32); /* the salt changes everything */
    assert_memory_not_equal(a->key_check, c->key_check, 16);
    assert_memory_not_equal(a->data_key, g_key, 32);
    clb_keys_free(a);
    clb_keys_free(b);
    clb_keys_free(c);
    clb_keys_free(NULL);
}

/* Every codec x encryption x byte split, on compressible, incompressible and short data:
   the bytes come back; raw storage when compression does not help. */
static void test_codec_roundtrip(void **state) {
    (void)state;
    enum { SEG = 1 << 16 };
    static uint8_t plain[SEG], back[SEG], out[SEG + 4096];
    uint8_t salt[32] = {7};
    clb_keys *keys;
    assert_int_equal(clb_keys_derive(g_key, salt, &keys), COLIBRI_OK);
    const uint8_t aad[] = "\x05\x00\x00\x00tname";
    for (int codec = CLB_CODEC_NONE; codec <= CLB_CODEC_ZLIB; codec++)
        for (int enc = 0; enc < 2; enc++)
            for (int data = 0; data < 3; data++) {
                const size_t n = data == 2 ? 1000 : SEG;
                for (size_t i = 0; i < n; i++) /* 0: bf16-like (exponents repeat), 1: random */
                    plain[i] = data == 1 ? (uint8_t)rnd() : (i & 1) ? (uint8_t)(0x3c + (rnd() & 1)) : (uint8_t)rnd();
                clb_codec *k = clb_codec_new(codec, 0, enc ? keys : NULL, SEG);
                assert_non_null(k);
                for (int split = 0; split < 2; split++) {
                    const clb_seg_ref r = {.chunk = 3, .seg = 1, .aad = aad, .aad_len = sizeof aad - 1,
                                           .split16 = split};
                    size_t len = 0;
                    assert_int_equal(clb_codec_encode(k, &r, plain, n, out, &len), COLIBRI_OK);
                    assert_true(len <= clb_codec_bound(codec, enc, n));
                    const size_t body = len - (enc ? CLB_TAG_BYTES : 0);
                    if (codec == CLB_CODEC_NONE || data == 1) assert_int_equal(body, n); /* raw */
                    if (codec != CLB_CODEC_NONE && data == 0) assert_true(body < n);   /* compressed */
                    memset(back, 0xEE, n);
                    assert_int_equal(clb_codec_decode(k, &r, out, len, back, n), COLIBRI_OK);
                    assert_memory_equal(plain, back, n);
                }
                clb_codec_free(k);
            }
    clb_keys_free(keys);
}

/* A segment authenticates only as itself: wrong chunk, segment, associated data, a flipped
   body or tag byte, a truncated segment — each fails and leaves no plain byte behind. */
static void codec_authentication(void) {
    enum { N = 5000 };
    static uint8_t plain[N], back[N], out[N + 1024], t[N + 1024];
    for (int i = 0; i < N; i++) plain[i] = (uint8_t)(i % 13);
    uint8_t salt[32] = {9};
    clb_keys *keys;
    assert_int_equal(clb_keys_derive(g_key, salt, &keys), COLIBRI_OK);
    for (int codec = CLB_CODEC_NONE; codec <= CLB_CODEC_ZLIB; codec++) {
        clb_codec *k = clb_codec_new(codec, 0, keys, 1 << 16);
        const uint8_t aad[] = "names";
        const clb_seg_ref r = {.chunk = 5, .seg = 2, .aad = aad, .aad_len = 5};
        size_t len;
        assert_int_equal(clb_codec_encode(k, &r, plain, N, out, &len), COLIBRI_OK);
        const clb_seg_ref wrong[] = {{.chunk = 6, .seg = 2, .aad = aad, .aad_len = 5},
                                     {.chunk = 5, .seg = 3, .aad = aad, .aad_len = 5},
                                     {.chunk = 5, .seg = 2, .aad = (const uint8_t *)"namez", .aad_len = 5},
                                     {.chunk = 5, .seg = 2, .aad = aad, .aad_len = 4}};
        for (size_t w = 0; w < CLB_ARRAY_LEN(wrong); w++) {
            memcpy(t, out, len);
            memset(back, 0x77, N);
            assert_int_equal(clb_codec_decode(k, &wrong[w], t, len, back, N), COLIBRI_ERR_CORRUPT);
            assert_non_null(strstr(clb_last_error(), "authentication"));
            for (int i = 0; i < N; i++) assert_int_equal(back[i], 0);
        }
        const size_t flips[] = {0, len / 2, len - CLB_TAG_BYTES - 1, len - CLB_TAG_BYTES, len - 1};
        for (size_t f = 0; f < CLB_ARRAY_LEN(flips); f++) {
            memcpy(t, out, len);
            t[flips[f]] ^= 0x40;
            assert_int_equal(clb_codec_decode(k, &r, t, len, back, N), COLIBRI_ERR_CORRUPT);
        }
        memcpy(t, out, len);
        assert_int_equal(clb_codec_decode(k, &r, t, len - 1, back, N), COLIBRI_ERR_CORRUPT);
        assert_int_equal(clb_codec_decode(k, &r, t, 3, back, N), COLIBRI_ERR_CORRUPT);
        clb_codec_free(k);
    }
    /* another key cannot read it */
    clb_keys *other;
    uint8_t k2[32] = {0};
    assert_int_equal(clb_keys_derive(k2, salt, &other), COLIBRI_OK);
    clb_codec *a = clb_codec_new(CLB_CODEC_ZSTD, 0, keys, 1 << 16), *b = clb_codec_new(CLB_CODEC_ZSTD, 0, other, 1 << 16);
    const clb_seg_ref r = {.chunk = 0, .seg = 0};
    size_t len;
    assert_int_equal(clb_codec_encode(a, &r, plain, N, out, &len), COLIBRI_OK);
    assert_int_equal(clb_codec_decode(b, &r, out, len, back, N), COLIBRI_ERR_CORRUPT);
    clb_codec_free(a);
    clb_codec_free(b);
    clb_keys_free(other);
    clb_keys_free(keys);
}

static void test_codec_authentication(void **state) {
    (void)state;
    for (int b = CLB_AES_LIBCRYPTO; b <= CLB_AES_IPSEC_MB; b++) { /* each AES-256-GCM backend of the build */
        clb_aes_force(b);
        codec_authentication();
    }
    clb_aes_force(-1);
}

/* The AES-256-GCM backends write the same bytes and read each other's: segments of every
   length class (empty, shorter than a block, block multiples and not, a 4 MiB segment) with
   no, short and long associated data, encrypted by one and decrypted by the other, in place
   and not. Without ipsec-mb in the build (aarch64) both sides are libcrypto. */
static void test_codec_aes_backends(void **state) {
    (void)state;
    enum { MAXN = 4 << 20 };
    uint8_t *plain = malloc(MAXN), *back = malloc(MAXN), *x = malloc(MAXN + 64), *y = malloc(MAXN + 64);
    assert_non_null(plain && back && x && y);
    for (size_t i = 0; i < MAXN; i++) plain[i] = (uint8_t)rnd();
    uint8_t salt[32] = {11}, aad[300];
    for (size_t i = 0; i < sizeof aad; i++) aad[i] = (uint8_t)(i * 31 + 7);
    clb_keys *keys;
    assert_int_equal(clb_keys_derive(g_key, salt, &keys), COLIBRI_OK);
    clb_aes_force(CLB_AES_LIBCRYPTO);
    clb_codec *lc = clb_codec_new(CLB_CODEC_NONE, 0, keys, 0);
    assert_string_equal(colibri_aes_name(), "libcrypto");
    clb_aes_force(CLB_AES_IPSEC_MB);
    clb_codec *mb = clb_codec_new(CLB_CODEC_NONE, 0, keys, 0);
    print_message("AES-256-GCM backends: libcrypto and %s\n", colibri_aes_name());
    clb_aes_force(-1);
    assert_non_null(lc);
    assert_non_null(mb);
    const size_t sizes[] = {0, 1, 15, 16, 17, 255, 256, 257, 4095, 65536 + 3, MAXN};
    const size_t aads[] = {0, 1, 16, 17, sizeof aad};
    for (size_t si = 0; si < CLB_ARRAY_LEN(sizes); si++)
        for (size_t ai = 0; ai < CLB_ARRAY_LEN(aads); ai++) {
            const size_t n = sizes[si];
            const clb_seg_ref r = {.chunk = (uint32_t)si, .seg = (uint32_t)ai, .aad = aads[ai] ? aad : NULL,
                                   .aad_len = aads[ai]};
            size_t lx = 0, ly = 0;
            assert_int_equal(clb_codec_encode(lc, &r, plain, n, x, &lx), COLIBRI_OK);
            assert_int_equal(clb_codec_encode(mb, &r, plain, n, y, &ly), COLIBRI_OK);
            assert_int_equal(lx, n + CLB_TAG_BYTES);
            assert_int_equal(ly, lx);
            assert_memory_equal(x, y, lx); /* ciphertext and tag */
            if (n) assert_memory_not_equal(x, plain, n);
            for (int dir = 0; dir < 2; dir++) { /* each reads the other's */
                clb_codec *dec = dir ? lc : mb;
                memcpy(y, x, lx);
                memset(back, 0x55, n);
                assert_int_equal(clb_codec_decode(dec, &r, y, lx, back, n), COLIBRI_OK);
                assert_memory_equal(back, plain, n);
                y[lx - 1] ^= 1; /* a flipped tag bit fails both */
                assert_int_equal(clb_codec_decode(dec, &r, y, lx, back, n), COLIBRI_ERR_CORRUPT);
                for (size_t i = 0; i < n; i++)
                    if (back[i]) fail_msg("byte %zu of a failed segment survived", i);
            }
        }
    clb_codec_free(lc);
    clb_codec_free(mb);
    clb_keys_free(keys);
    free(plain);
    free(back);
    free(x);
    free(y);
}

/* Compressed but clear: a corrupt frame is caught by the codec (zstd's checksum, zlib's
   adler32 and stream structure), never returned as data. */
static void test_codec_corrupt_clear(void **state) {
    (void)state;
    enum { N = 20000 };
    static uint8_t plain[N], back[N], out[N + 1024], t[N + 1024];
    for (int i = 0; i < N; i++) plain[i] = (uint8_t)((i * i) % 7);
    for (int codec = CLB_CODEC_ZSTD; codec <= CLB_CODEC_ZLIB; codec++) {
        clb_codec *k = clb_codec_new(codec, 9, NULL, 1 << 16);
        const clb_seg_ref r = {0};
        size_t len;
        assert_int_equal(clb_codec_encode(k, &r, plain, N, out, &len), COLIBRI_OK);
        assert_true(len < N);
        int caught = 0;
        for (size_t f = 0; f < len; f += len / 29 + 1) {
            memcpy(t, out, len);
            t[f] ^= 0x10;
            int rc = clb_codec_decode(k, &r, t, len, back, N);
            caught += rc == COLIBRI_ERR_CORRUPT;
            if (rc == COLIBRI_OK) assert_memory_equal(back, plain, N); /* a flip the format absorbs */
        }
        if (caught < 10) fail_msg("%s: %d of ~30 flipped bytes caught", clb_codec_name(codec), caught);
        clb_codec_free(k);
    }
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static int cb_key(const char *path, uint8_t key[32], void *user) {
    (void)path;
    if (!user) return -1;
    memcpy(key, user, 32);
    return 0;
}

static void test_key_files(void **state) {
    (void)state;
    char p[128];
    uint8_t k[32];
    path_in(p, sizeof p, "raw.key");
    write_file(p, g_key, 32);
    assert_int_equal(clb_key_read_file(p, k), COLIBRI_OK);
    assert_memory_equal(k, g_key, 32);
    char hex[80];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02X", g_key[i]);
    strcat(hex, "\n");
    path_in(p, sizeof p, "hex.key");
    write_file(p, hex, strlen(hex));
    memset(k, 0, 32);
    assert_int_equal(clb_key_read_file(p, k), COLIBRI_OK);
    assert_memory_equal(k, g_key, 32);
    const char *bad[] = {"short", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg"};
    for (size_t i = 0; i < CLB_ARRAY_LEN(bad); i++) {
        path_in(p, sizeof p, "bad.key");
        write_file(p, bad[i], strlen(bad[i]));
        assert_int_equal(clb_key_read_file(p, k), COLIBRI_ERR_ARG);
        assert_non_null(strstr(clb_last_error(), "not a key"));
    }
    path_in(p, sizeof p, "raw33.key");
    uint8_t r33[33] = {0};
    write_file(p, r33, 33);
    assert_int_equal(clb_key_read_file(p, k), COLIBRI_ERR_ARG);
    assert_int_equal(clb_key_read_file("/nonexistent/key", k), COLIBRI_ERR_IO);
    /* sources: the callback first, then colibri_set_key_file, then COLIBRI_KEY_FILE */
    uint8_t other[32];
    memset(other, 0xA5, 32);
    colibri_set_key_callback(cb_key, other);
    assert_int_equal(clb_key_obtain("m.colibri", k), COLIBRI_OK);
    assert_memory_equal(k, other, 32);
    colibri_set_key_callback(cb_key, NULL); /* refuses */
    assert_int_equal(clb_key_obtain("m.colibri", k), COLIBRI_ERR_ARG);
    assert_non_null(strstr(clb_last_error(), "callback"));
    colibri_set_key_callback(NULL, NULL);
    path_in(p, sizeof p, "raw.key");
    assert_int_equal(colibri_set_key_file(p), COLIBRI_OK);
    assert_int_equal(clb_key_obtain("m.colibri", k), COLIBRI_OK);
    assert_memory_equal(k, g_key, 32);
    colibri_set_key_file(NULL);
    unsetenv("COLIBRI_KEY_FILE");
    assert_int_equal(clb_key_obtain("m.colibri", k), COLIBRI_ERR_ARG);
    assert_non_null(strstr(clb_last_error(), "no key"));
    setenv("COLIBRI_KEY_FILE", p, 1);
    assert_int_equal(clb_key_obtain("m.colibri", k), COLIBRI_OK);
    unsetenv("COLIBRI_KEY_FILE");
}

/* ---- container ---- */

typedef struct spec {
    const char *name;
    int dtype;
    int64_t rows, cols;
    int layer, expert;
} spec;

/* dense tensors, then experts given out of (layer, expert) order; an f16 expert spans several
   64 KiB segments, a dense tensor too */
static const spec g_specs[] = {
    {"token_embd.weight", CLB_DT_F16, 300, 128, -1, -1},
    {"blk.0.attn_q.weight", CLB_DT_Q8_0, 64, 64, 0, -1},
    {"output_norm.weight", CLB_DT_F32, 1, 64, -1, -1},
    {"blk.1.ffn_gate.0.weight", CLB_DT_Q4_K, 8, 256, 1, 0},
    {"blk.1.ffn_up.0.weight", CLB_DT_Q4_K, 8, 256, 1, 0},
    {"blk.1.ffn_down.0.weight", CLB_DT_Q4_K, 256, 256, 1, 0},
    {"blk.0.ffn_gate.1.weight", CLB_DT_BF16, 160, 256, 0, 1},
    {"blk.0.ffn_up.1.weight", CLB_DT_BF16, 160, 256, 0, 1},
    {"blk.0.ffn_down.1.weight", CLB_DT_BF16, 256, 160, 0, 1},
};
#define N_SPECS ((int)CLB_ARRAY_LEN(g_specs))

static uint8_t *g_bytes[N_SPECS];
static uint64_t g_size[N_SPECS];

static void make_bytes(void) {
    for (int i = 0; i < N_SPECS; i++) {
        if (g_bytes[i]) continue;
        uint64_t rb;
        assert_true(clb_row_bytes(g_specs[i].dtype, g_specs[i].cols, &rb));
        g_size[i] = rb * (uint64_t)g_specs[i].rows;
        g_bytes[i] = malloc(g_size[i]);
        for (uint64_t j = 0; j < g_size[i]; j++) /* 16-bit: a repeating exponent byte */
            g_bytes[i][j] = (j & 1) && g_specs[i].dtype != CLB_DT_Q4_K ? (uint8_t)(0x3c | (rnd() & 1)) : (uint8_t)rnd();
    }
}

/* Writes g_specs in file order (dense as given, then experts by (layer, expert)). */
static int write_model(const char *path, const clb_cw_encoding *enc) {
    make_bytes();
    clb_cw_tensor d[N_SPECS];
    for (int i = 0; i < N_SPECS; i++) {
        const spec *s = &g_specs[i];
        d[i] = (clb_cw_tensor){.name = s->name, .dtype = s->dtype, .n_dims = s->rows == 1 ? 1 : 2, .layer = s->layer,
                               .expert = s->expert};
        if (s->rows == 1) d[i].shape[0] = s->cols;
        else d[i].shape[0] = s->rows, d[i].shape[1] = s->cols;
    }
    cJSON *cfg = cJSON_Parse("{\"arch\":\"t\",\"n\":1}"), *tok = cJSON_Parse("{\"vocab\":[\"a\",\"b\"]}");
    clb_cwriter *w = clb_cwriter_create_ex(path, cfg, tok, d, N_SPECS, enc);
    cJSON_Delete(cfg);
    cJSON_Delete(tok);
    if (!w) return COLIBRI_ERR_IO;
    static const int order[] = {0, 1, 2, 6, 7, 8, 3, 4, 5};
    int rc = COLIBRI_OK;
    for (int j = 0; j < N_SPECS && !rc; j++) {
        const int i = order[j];
        for (uint64_t off = 0; off < g_size[i] && !rc; off += 3001) /* odd pieces */
            rc = clb_cwriter_write(w, i, g_bytes[i] + off, CLB_MIN((uint64_t)3001, g_size[i] - off));
    }
    if (!rc) rc = clb_cwriter_finish(w);
    clb_cwriter_free(w);
    return rc;
}

/* Every tensor's bytes back: dense from the open container, experts by decoding chunks. */
static void check_model(const char *path) {
    clb_container c;
    assert_int_equal(clb_container_open(path, &c), COLIBRI_OK);
    assert_int_equal(c.version, 2);
    assert_int_equal(c.n_tensors, N_SPECS);
    assert_non_null(c.config);
    assert_non_null(c.tokenizer);
    struct clb_codec *k = clb_container_codec(&c);
    uint8_t *scratch = malloc(clb_container_max_seg(&c) + 64);
    for (int i = 0; i < N_SPECS; i++) {
        const clb_tensor *t = clb_container_find(&c, g_specs[i].name);
        assert_non_null(t);
        assert_int_equal(t->size, g_size[i]);
        if (g_specs[i].expert < 0) {
            assert_non_null(t->data);
            assert_memory_equal(t->data, g_bytes[i], g_size[i]);
        } else {
            assert_null(t->data);
            uint8_t *plain = malloc(c.chunks[t->chunk].plain);
            assert_int_equal(clb_container_read_chunk(&c, t->chunk, plain, scratch, k), COLIBRI_OK);
            assert_memory_equal(plain + t->chunk_off, g_bytes[i], g_size[i]);
            assert_int_equal(t->chunk_off % 64, 0);
            assert_int_equal((c.chunks[t->chunk].offset - c.data_offset) % 4096, 0);
            free(plain);
        }
    }
    uint64_t checked = 0;
    int auth = 0;
    assert_int_equal(clb_container_verify_ex(&c, &checked, &auth), COLIBRI_OK);
    assert_int_equal(auth, 1);
    assert_true(checked >= c.data_size);
    free(scratch);
    clb_codec_free(k);
    clb_container_close(&c);
}

static void test_v2_roundtrip(void **state) {
    (void)state;
    char p[128];
    colibri_set_key_callback(cb_key, (void *)g_key);
    const clb_cw_encoding encs[] = {
        {.codec = CLB_CODEC_ZSTD, .seg_size = 1 << 16, .n_threads = 3},
        {.codec = CLB_CODEC_ZLIB, .level = 9, .seg_size = 1 << 16},
        {.codec = CLB_CODEC_ZSTD, .no_split = true, .seg_size = 1 << 17, .n_threads = 2},
        {.codec = CLB_CODEC_NONE, .encrypt = true, .seg_size = 1 << 16, .n_threads = 2},
        {.codec = CLB_CODEC_ZSTD, .level = 19, .encrypt = true, .seg_size = 1 << 16},
        {.codec = CLB_CODEC_ZLIB, .encrypt = true}, /* default segment: one per chunk */
    };
    for (size_t e = 0; e < CLB_ARRAY_LEN(encs); e++) {
        clb_cw_encoding enc = encs[e];
        if (enc.encrypt) memcpy(enc.key, g_key, 32);
        snprintf(p, sizeof p, "%s/m%zu.colibri", g_dir, e);
        assert_int_equal(write_model(p, &enc), COLIBRI_OK);
        check_model(p);
    }
    /* no key: the clear part only (verify of the stored bytes); a wrong key: refused */
    colibri_set_key_callback(NULL, NULL);
    unsetenv("COLIBRI_KEY_FILE");
    snprintf(p, sizeof p, "%s/m4.colibri", g_dir);
    clb_container c;
    assert_int_equal(clb_container_open(p, &c), COLIBRI_ERR_ARG);
    assert_non_null(strstr(clb_last_error(), "no key"));
    assert_int_equal(clb_container_open_ex(p, CLB_OPEN_KEY_OPTIONAL, &c), COLIBRI_OK);
    assert_true(c.locked);
    assert_int_equal(c.n_tensors, 0);
    assert_null(c.config);
    int auth = 1;
    assert_int_equal(clb_container_verify_ex(&c, NULL, &auth), COLIBRI_OK);
    assert_int_equal(auth, 0);
    clb_container_close(&c);
    uint8_t wrong[32];
    memcpy(wrong, g_key, 32);
    wrong[0] ^= 1;
    colibri_set_key_callback(cb_key, wrong);
    assert_int_equal(clb_container_open(p, &c), COLIBRI_ERR_ARG);
    assert_non_null(strstr(clb_last_error(), "wrong key"));
    colibri_set_key_callback(NULL, NULL);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

/* Every truncation point refused; every header byte and every metadata byte flipped refused
   (CRC, structure or authentication); the file is never read past its checks. */
static void test_v2_truncate_and_flip(void **state) {
    (void)state;
    char p[128], q[128];
    colibri_set_key_callback(cb_key, (void *)g_key);
    snprintf(p, sizeof p, "%s/m4.colibri", g_dir);
    path_in(q, sizeof q, "mut.colibri");
    size_t n;
    uint8_t *b = slurp(p, &n);
    const uint64_t meta_off = clb_rd_u64(b + 16);
    clb_container c;
    write_file(q, b, n);
    size_t cut = n;
    while (cut > 0) { /* every cut in the header and the metadata, every 4093rd in the data */
        cut = cut > meta_off || cut <= 256 ? cut - 1 : cut > 256 + 4093 ? cut - 4093 : 256;
        assert_int_equal(truncate(q, (off_t)cut), 0);
        if (clb_container_open(q, &c) == COLIBRI_OK) fail_msg("a file cut at %zu of %zu bytes opened", cut, n);
    }
    write_file(q, b, n);
    FILE *f = fopen(q, "r+b");
    assert_non_null(f);
    for (size_t i = 0; i < n; i += (i < 128 || i >= meta_off ? 1 : 997)) {
        uint8_t x = b[i] ^ 0x08;
        fseek(f, (long)i, SEEK_SET);
        fwrite(&x, 1, 1, f);
        fflush(f);
        int rc = clb_container_open(q, &c);
        if (rc == COLIBRI_OK) {
            /* a data byte of an expert (decoded on demand): verify finds it */
            uint64_t checked;
            if (!(i >= 4096 && i < meta_off)) fail_msg("a flipped byte %zu (metadata at %llu) was accepted", i,
                                                       (unsigned long long)meta_off);
            assert_int_not_equal(clb_container_verify(&c, &checked), COLIBRI_OK);
            clb_container_close(&c);
        }
        fseek(f, (long)i, SEEK_SET);
        fwrite(&b[i], 1, 1, f);
        fflush(f);
    }
    fclose(f);
    free(b);
    colibri_set_key_callback(NULL, NULL);
}

static void test_v2_writer_order(void **state) {
    (void)state;
    char p[128];
    path_in(p, sizeof p, "order.colibri");
    make_bytes();
    clb_cw_tensor d[2] = {{.name = "a.weight", .dtype = CLB_DT_F32, .n_dims = 1, .shape = {16}, .layer = -1, .expert = -1},
                          {.name = "b.weight", .dtype = CLB_DT_F32, .n_dims = 1, .shape = {16}, .layer = -1, .expert = -1}};
    const clb_cw_encoding enc = {.codec = CLB_CODEC_ZSTD};
    clb_cwriter *w = clb_cwriter_create_ex(p, NULL, NULL, d, 2, &enc);
    assert_non_null(w);
    float v[16] = {1};
    assert_int_equal(clb_cwriter_write(w, 1, v, sizeof v), COLIBRI_ERR_ARG);
    assert_non_null(strstr(clb_last_error(), "order"));
    assert_int_equal(clb_cwriter_write(w, 0, v, 32), COLIBRI_OK);
    assert_int_equal(clb_cwriter_write(w, 1, v, sizeof v), COLIBRI_ERR_ARG); /* a is not complete */
    assert_int_equal(clb_cwriter_finish(w), COLIBRI_ERR_ARG);               /* not everything written */
    clb_cwriter_free(w);
    assert_int_not_equal(access(p, F_OK), 0);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    assert_int_not_equal(access(tmp, F_OK), 0); /* the partial file is gone */
    const clb_cw_encoding bad = {.codec = CLB_CODEC_ZSTD, .seg_size = 1000};
    assert_null(clb_cwriter_create_ex(p, NULL, NULL, d, 2, &bad));
    assert_non_null(strstr(clb_last_error(), "power of two"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split16),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_codec_roundtrip),
        cmocka_unit_test(test_codec_authentication),
        cmocka_unit_test(test_codec_aes_backends),
        cmocka_unit_test(test_codec_corrupt_clear),
        cmocka_unit_test(test_key_files),
        cmocka_unit_test(test_v2_roundtrip),
        cmocka_unit_test(test_v2_truncate_and_flip),
        cmocka_unit_test(test_v2_writer_order),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    for (int i = 0; i < N_SPECS; i++) free(g_bytes[i]);
    return rc;
}
