/* codec.c — segment encodings of .colibri v2 (codec.h): byte split, zstd / zlib, AES-256-GCM,
 * HKDF-SHA256 key derivation and where the user's key comes from.
 *
 * The nonce of segment s of chunk c is nonce_prefix (4 bytes) || c (u32 le) || s (u32 le):
 * unique per (file key, segment) because the data key is derived from the file's random
 * salt, so no two files share a key even when the user's key is the same. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>
#include <zstd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#ifdef CLB_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif

#include "core/common.h"
#include "core/platform.h"
#include "format/codec.h"

const char *clb_codec_name(int codec) {
    return codec == CLB_CODEC_ZSTD ? "zstd" : codec == CLB_CODEC_ZLIB ? "zlib" : codec == CLB_CODEC_NONE ? "none" : "?";
}

void clb_wipe(void *p, size_t n) {
    if (p && n) OPENSSL_cleanse(p, n);
}

int clb_random_bytes(uint8_t *buf, size_t n) {
    if (RAND_bytes(buf, (int)n) != 1) return clb_err(COLIBRI_ERR_INTERNAL, "the system gave no random bytes for a salt");
    return COLIBRI_OK;
}

/* ---- keys ---- */

int clb_keys_derive(const uint8_t master[CLB_KEY_BYTES], const uint8_t salt[CLB_SALT_BYTES], clb_keys **out) {
    *out = NULL;
    /* one page, locked so the derived key is not swapped out (best effort: RLIMIT_MEMLOCK) */
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return clb_err(COLIBRI_ERR_NOMEM, "out of memory for key material");
    (void)mlock(page, 4096);
    (void)madvise(page, 4096, MADV_DONTDUMP);
    clb_keys *k = page;
    uint8_t okm[CLB_KEY_BYTES + 4 + CLB_KEY_CHECK_BYTES];
    int rc = COLIBRI_OK;
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kc = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    static const char info[] = "colibri v2 aes-256-gcm";
    OSSL_PARAM params[5] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)master, CLB_KEY_BYTES),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, CLB_SALT_BYTES),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, sizeof info - 1),
        OSSL_PARAM_construct_end(),
    };
    if (!kc || EVP_KDF_derive(kc, okm, sizeof okm, params) != 1)
        rc = clb_err(COLIBRI_ERR_INTERNAL, "HKDF-SHA256 is not available from libcrypto");
    EVP_KDF_CTX_free(kc);
    EVP_KDF_free(kdf);
    if (rc) {
        clb_wipe(okm, sizeof okm);
        munmap(page, 4096);
        return rc;
    }
    memcpy(k->data_key, okm, CLB_KEY_BYTES);
    memcpy(k->nonce_prefix, okm + CLB_KEY_BYTES, 4);
    memcpy(k->key_check, okm + CLB_KEY_BYTES + 4, CLB_KEY_CHECK_BYTES);
    clb_wipe(okm, sizeof okm);
    *out = k;
    return COLIBRI_OK;
}

void clb_keys_free(clb_keys *k) {
    if (!k) return;
    clb_wipe(k, sizeof *k);
    munlock(k, 4096);
    munmap(k, 4096);
}

static colibri_key_fn key_fn;
static void *key_user;
static char *key_file; /* colibri_set_key_file */
static pthread_mutex_t key_mu = PTHREAD_MUTEX_INITIALIZER;

int colibri_set_key_file(const char *path) {
    char *p = path ? clb_strdup(path) : NULL;
    if (path && !p) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&key_mu);
    clb_free(key_file);
    key_file = p;
    pthread_mutex_unlock(&key_mu);
    return COLIBRI_OK;
}

void colibri_set_key_callback(colibri_key_fn fn, void *user) {
    pthread_mutex_lock(&key_mu);
    key_fn = fn;
    key_user = user;
    pthread_mutex_unlock(&key_mu);
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int clb_key_read_file(const char *path, uint8_t key[CLB_KEY_BYTES]) {
    FILE *f = fopen(path, "rb");
    if (!f) return clb_err(COLIBRI_ERR_IO, "key file %s: %s", path, strerror(errno));
    uint8_t buf[160];
    size_t n = fread(buf, 1, sizeof buf, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    int rc = COLIBRI_OK;
    if (n == CLB_KEY_BYTES && !more) {
        memcpy(key, buf, CLB_KEY_BYTES);
    } else {
        size_t a = 0, b = n;
        while (a < b && (buf[a] == ' ' || buf[a] == '\n' || buf[a] == '\r' || buf[a] == '\t')) a++;
        while (b > a && (buf[b - 1] == ' ' || buf[b - 1] == '\n' || buf[b - 1] == '\r' || buf[b - 1] == '\t')) b--;
        bool ok = !more && b - a == 2 * CLB_KEY_BYTES;
        for (size_t i = 0; ok && i < CLB_KEY_BYTES; i++) {
            int hi = hexval(buf[a + 2 * i]), lo = hexval(buf[a + 2 * i + 1]);
            if (hi < 0 || lo < 0) ok = false;
            else key[i] = (uint8_t)(hi << 4 | lo);
        }
        if (!ok) {
            clb_wipe(key, CLB_KEY_BYTES);
            rc = clb_err(COLIBRI_ERR_ARG, "key file %s: not a key (want exactly 32 bytes, or 64 hex digits)", path);
        }
    }
    clb_wipe(buf, sizeof buf);
    return rc;
}

int clb_key_obtain(const char *path, uint8_t key[CLB_KEY_BYTES]) {
    pthread_mutex_lock(&key_mu);
    colibri_key_fn fn = key_fn;
    void *user = key_user;
    pthread_mutex_unlock(&key_mu);
    if (fn) {
        int rc = fn(path, key, user);
        if (rc != 0) {
            clb_wipe(key, CLB_KEY_BYTES);
            return clb_err(COLIBRI_ERR_ARG, "%s: the key callback gave no key (status %d)", path, rc);
        }
        return COLIBRI_OK;
    }
    char kf[4096] = {0};
    pthread_mutex_lock(&key_mu);
    if (key_file) snprintf(kf, sizeof kf, "%s", key_file);
    pthread_mutex_unlock(&key_mu);
    if (!kf[0] && getenv("COLIBRI_KEY_FILE")) snprintf(kf, sizeof kf, "%s", getenv("COLIBRI_KEY_FILE"));
    if (kf[0]) {
        int rc = clb_key_read_file(kf, key);
        if (rc) clb_err_prefix("%s", path);
        return rc;
    }
    return clb_err(COLIBRI_ERR_ARG, "%s: encrypted, and no key was given (--key-file, COLIBRI_KEY_FILE or a key callback)",
                   path);
}

/* ---- split ---- */

void clb_split16(const uint8_t *in, uint8_t *out, size_t n) {
    const size_t h = n / 2;
    for (size_t i = 0; i < h; i++) {
        out[i] = in[2 * i];
        out[h + i] = in[2 * i + 1];
    }
}

void clb_join16(const uint8_t *in, uint8_t *out, size_t n) {
    const size_t h = n / 2;
    for (size_t i = 0; i < h; i++) {
        out[2 * i] = in[i];
        out[2 * i + 1] = in[h + i];
    }
}

/* ---- AES-256-GCM backends ----
   OpenSSL's libcrypto everywhere; on x86-64, where the build has it, Intel's ipsec-mb, which
   picks its code by the CPU at run time (VAES + VPCLMULQDQ on AVX-512 machines: 17.8 GB/s
   per core against libcrypto 3.0's 4.5 here, docs/benchmarks.md). Both write the same bytes
   (GCM is GCM): test_container_v2 encrypts with each and decrypts with the other.
   Chosen by default only where ipsec-mb runs its AVX-512 code: its AVX2 code (no VAES) is
   slower than libcrypto's on an AVX2-only Zen 3 (codec_bench decrypt 1.90 against 2.66 GB/s;
   Mixtral-shaped encrypted file under the 1.5 GiB cap 2.22 / 2.45 against 2.83 / 2.72 tok/s).
   COLIBRI_AES=libcrypto or ipsec-mb chooses. A codec keeps the backend it was made with. */

#ifdef CLB_HAVE_IPSEC_MB
static IMB_MGR *imb_mgr;
static const char *imb_arch = "ipsec-mb";
static bool imb_default; /* its AVX-512 code: faster than libcrypto */
static pthread_once_t imb_once = PTHREAD_ONCE_INIT;
static void imb_start(void) {
    IMB_MGR *m = alloc_mb_mgr(0);
    if (!m) return;
    IMB_ARCH arch = IMB_ARCH_NONE;
    init_mb_mgr_auto(m, &arch);
    if (imb_get_errno(m) != 0 || arch < IMB_ARCH_SSE) { /* no AES-NI: libcrypto */
        free_mb_mgr(m);
        return;
    }
    imb_arch = arch == IMB_ARCH_AVX512 ? "ipsec-mb avx512" : arch == IMB_ARCH_AVX2 ? "ipsec-mb avx2"
               : arch == IMB_ARCH_AVX ? "ipsec-mb avx" : "ipsec-mb sse";
    imb_default = arch == IMB_ARCH_AVX512;
    imb_mgr = m;
}
#endif

static int aes_forced = -1; /* tests: CLB_AES_* for the codecs made from now on, -1 = automatic */

int clb_aes_force(int backend) {
    const int old = aes_forced;
    aes_forced = backend;
    return old;
}

static int aes_backend(void) {
#ifdef CLB_HAVE_IPSEC_MB
    pthread_once(&imb_once, imb_start);
    if (aes_forced >= 0) return aes_forced == CLB_AES_IPSEC_MB && imb_mgr ? CLB_AES_IPSEC_MB : CLB_AES_LIBCRYPTO;
    const char *e = getenv("COLIBRI_AES");
    if (e && strcmp(e, "libcrypto") == 0) return CLB_AES_LIBCRYPTO;
    if (e && strcmp(e, "ipsec-mb") == 0) return imb_mgr ? CLB_AES_IPSEC_MB : CLB_AES_LIBCRYPTO;
    return imb_mgr && imb_default ? CLB_AES_IPSEC_MB : CLB_AES_LIBCRYPTO;
#else
    return CLB_AES_LIBCRYPTO;
#endif
}

const char *colibri_aes_name(void) {
#ifdef CLB_HAVE_IPSEC_MB
    if (aes_backend() == CLB_AES_IPSEC_MB) return imb_arch;
#endif
    return "libcrypto";
}

/* ---- coder ---- */

struct clb_codec {
    int codec, level;
    const clb_keys *keys;
    ZSTD_CCtx *zc;
    ZSTD_DCtx *zd;
    z_stream zs_in, zs_out;
    bool zin_ok, zout_ok;
    EVP_CIPHER_CTX *enc, *dec;
    int aes;                  /* CLB_AES_* */
#ifdef CLB_HAVE_IPSEC_MB
    struct gcm_key_data *imb; /* ipsec-mb's expanded key and hash-key powers, wiped at free */
#endif
    uint8_t *scratch; /* [seg_size] */
    uint32_t seg_size;
};

clb_codec *clb_codec_new(int codec, int level, const clb_keys *keys, uint32_t seg_size) {
    clb_codec *c = clb_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->codec = codec;
    c->level = level;
    c->keys = keys;
    c->seg_size = seg_size;
    if (codec != CLB_CODEC_NONE && !(c->scratch = clb_alloc_aligned(seg_size))) goto fail;
    if (keys && (c->aes = aes_backend()) == CLB_AES_IPSEC_MB) {
#ifdef CLB_HAVE_IPSEC_MB
        if (!(c->imb = clb_alloc_aligned(sizeof *c->imb))) goto fail;
        IMB_AES256_GCM_PRE(imb_mgr, keys->data_key, c->imb);
#endif
    } else if (keys) {
        c->enc = EVP_CIPHER_CTX_new();
        c->dec = EVP_CIPHER_CTX_new();
        if (!c->enc || !c->dec || EVP_EncryptInit_ex(c->enc, EVP_aes_256_gcm(), NULL, keys->data_key, NULL) != 1 ||
            EVP_DecryptInit_ex(c->dec, EVP_aes_256_gcm(), NULL, keys->data_key, NULL) != 1)
            goto fail;
    }
    return c;
fail:
    clb_codec_free(c);
    return NULL;
}

void clb_codec_free(clb_codec *c) {
    if (!c) return;
    ZSTD_freeCCtx(c->zc);
    ZSTD_freeDCtx(c->zd);
    if (c->zin_ok) inflateEnd(&c->zs_in);
    if (c->zout_ok) deflateEnd(&c->zs_out);
    EVP_CIPHER_CTX_free(c->enc); /* frees the key schedule, cleansed */
    EVP_CIPHER_CTX_free(c->dec);
#ifdef CLB_HAVE_IPSEC_MB
    if (c->imb) clb_wipe(c->imb, sizeof *c->imb);
    clb_free_aligned(c->imb);
#endif
    clb_free_aligned(c->scratch);
    clb_free(c);
}

size_t clb_codec_bound(int codec, bool encrypted, size_t n) {
    size_t b = n;
    if (codec == CLB_CODEC_ZSTD) b = CLB_MAX(b, ZSTD_compressBound(n));
    if (codec == CLB_CODEC_ZLIB) b = CLB_MAX(b, (size_t)compressBound((uLong)n));
    return b + (encrypted ? CLB_TAG_BYTES : 0);
}

static void nonce_of(const clb_codec *c, const clb_seg_ref *r, uint8_t iv[12]) {
    memcpy(iv, c->keys->nonce_prefix, 4);
    clb_wr_u32(iv + 4, r->chunk);
    clb_wr_u32(iv + 8, r->seg);
}

/* AES-256-GCM of buf[body] in place, its tag after it; false when the cipher failed. */
static bool aes_seal(clb_codec *c, const uint8_t iv[12], const clb_seg_ref *r, uint8_t *buf, size_t body) {
    const uint8_t *aad = r->aad_len ? r->aad : iv; /* a valid pointer even when empty */
#ifdef CLB_HAVE_IPSEC_MB
    if (c->imb) {
        struct gcm_context_data ctx;
        IMB_AES256_GCM_ENC(imb_mgr, c->imb, &ctx, buf, buf, body, iv, aad, r->aad_len, buf + body, CLB_TAG_BYTES);
        clb_wipe(&ctx, sizeof ctx);
        return true;
    }
#endif
    int len = 0, fin = 0;
    return body <= INT_MAX && EVP_EncryptInit_ex(c->enc, NULL, NULL, NULL, iv) == 1 &&
           (!r->aad_len || EVP_EncryptUpdate(c->enc, NULL, &len, aad, (int)r->aad_len) == 1) &&
           EVP_EncryptUpdate(c->enc, buf, &len, buf, (int)body) == 1 && EVP_EncryptFinal_ex(c->enc, buf + len, &fin) == 1 &&
           EVP_CIPHER_CTX_ctrl(c->enc, EVP_CTRL_GCM_GET_TAG, CLB_TAG_BYTES, buf + body) == 1;
}

/* stored[body] (its tag after it) decrypted into dst (which may be stored); false when the
   tag does not authenticate the bytes, the nonce and the associated data. */
static bool aes_open(clb_codec *c, const uint8_t iv[12], const clb_seg_ref *r, const uint8_t *stored, size_t body,
                     uint8_t *dst) {
    const uint8_t *aad = r->aad_len ? r->aad : iv;
#ifdef CLB_HAVE_IPSEC_MB
    if (c->imb) {
        struct gcm_context_data ctx;
        uint8_t tag[CLB_TAG_BYTES];
        IMB_AES256_GCM_DEC(imb_mgr, c->imb, &ctx, dst, stored, body, iv, aad, r->aad_len, tag, CLB_TAG_BYTES);
        const bool ok = CRYPTO_memcmp(tag, stored + body, CLB_TAG_BYTES) == 0;
        clb_wipe(&ctx, sizeof ctx);
        return ok;
    }
#endif
    int l1 = 0, l2 = 0;
    return body <= INT_MAX && EVP_DecryptInit_ex(c->dec, NULL, NULL, NULL, iv) == 1 &&
           EVP_CIPHER_CTX_ctrl(c->dec, EVP_CTRL_GCM_SET_TAG, CLB_TAG_BYTES, (void *)(stored + body)) == 1 &&
           (!r->aad_len || EVP_DecryptUpdate(c->dec, NULL, &l1, aad, (int)r->aad_len) == 1) &&
           EVP_DecryptUpdate(c->dec, dst, &l1, stored, (int)body) == 1 && EVP_DecryptFinal_ex(c->dec, dst + l1, &l2) == 1;
}

/* Compresses in[n] into out (cap); returns the size, or 0 when it did not get smaller. */
static size_t compress_seg(clb_codec *c, const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    if (c->codec == CLB_CODEC_ZSTD) {
        if (!c->zc) {
            if (!(c->zc = ZSTD_createCCtx())) return 0;
            ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel, c->level ? c->level : 3);
            ZSTD_CCtx_setParameter(c->zc, ZSTD_c_checksumFlag, 1); /* a corrupt frame is caught on decode */
        }
        size_t r = ZSTD_compress2(c->zc, out, cap, in, n);
        return ZSTD_isError(r) || r >= n ? 0 : r;
    }
    if (!c->zout_ok) {
        memset(&c->zs_out, 0, sizeof c->zs_out);
        if (deflateInit(&c->zs_out, c->level ? c->level : 6) != Z_OK) return 0;
        c->zout_ok = true;
    } else if (deflateReset(&c->zs_out) != Z_OK) {
        return 0;
    }
    c->zs_out.next_in = (Bytef *)in;
    c->zs_out.avail_in = (uInt)n;
    c->zs_out.next_out = out;
    c->zs_out.avail_out = (uInt)CLB_MIN(cap, (size_t)UINT32_MAX);
    if (deflate(&c->zs_out, Z_FINISH) != Z_STREAM_END) return 0;
    size_t r = c->zs_out.total_out;
    return r >= n ? 0 : r;
}

int clb_codec_encode(clb_codec *c, const clb_seg_ref *r, const uint8_t *plain, size_t n, uint8_t *out, size_t *out_len) {
    const size_t cap = clb_codec_bound(c->codec, false, n);
    size_t body = 0;
    if (c->codec != CLB_CODEC_NONE) {
        const uint8_t *src = plain;
        if (r->split16 && n % 2 == 0 && n <= c->seg_size) {
            clb_split16(plain, c->scratch, n);
            src = c->scratch;
        }
        body = compress_seg(c, src, n, out, cap);
    }
    if (body == 0) { /* stored raw: not compressed, or compression did not help */
        memcpy(out, plain, n);
        body = n;
    }
    if (c->keys) {
        uint8_t iv[12];
        nonce_of(c, r, iv);
        if (!aes_seal(c, iv, r, out, body)) return clb_err(COLIBRI_ERR_INTERNAL, "AES-256-GCM encryption failed");
        body += CLB_TAG_BYTES;
    }
    *out_len = body;
    return COLIBRI_OK;
}

static int decompress_seg(clb_codec *c, const uint8_t *in, size_t len, uint8_t *out, size_t n) {
    if (c->codec == CLB_CODEC_ZSTD) {
        if (!c->zd && !(c->zd = ZSTD_createDCtx())) return clb_err(COLIBRI_ERR_NOMEM, "out of memory for zstd");
        size_t r = ZSTD_decompressDCtx(c->zd, out, n, in, len);
        if (ZSTD_isError(r)) return clb_err(COLIBRI_ERR_CORRUPT, "zstd: %s", ZSTD_getErrorName(r));
        if (r != n) return clb_err(COLIBRI_ERR_CORRUPT, "zstd: %zu bytes decoded, %zu expected", r, n);
        return COLIBRI_OK;
    }
    if (c->codec != CLB_CODEC_ZLIB) return clb_err(COLIBRI_ERR_CORRUPT, "a compressed segment in a file without a codec");
    if (!c->zin_ok) {
        memset(&c->zs_in, 0, sizeof c->zs_in);
        if (inflateInit(&c->zs_in) != Z_OK) return clb_err(COLIBRI_ERR_NOMEM, "out of memory for zlib");
        c->zin_ok = true;
    } else if (inflateReset(&c->zs_in) != Z_OK) {
        return clb_err(COLIBRI_ERR_INTERNAL, "zlib: cannot reset");
    }
    c->zs_in.next_in = (Bytef *)in;
    c->zs_in.avail_in = (uInt)len;
    c->zs_in.next_out = out;
    c->zs_in.avail_out = (uInt)n;
    int zr = inflate(&c->zs_in, Z_FINISH);
    if (zr != Z_STREAM_END || c->zs_in.total_out != n || c->zs_in.avail_in != 0)
        return clb_err(COLIBRI_ERR_CORRUPT, "zlib: %s", zr == Z_STREAM_END ? "wrong decoded size" : "malformed data");
    return COLIBRI_OK;
}

int clb_codec_decode(clb_codec *c, const clb_seg_ref *r, uint8_t *stored, size_t len, uint8_t *plain, size_t n) {
    int rc = COLIBRI_OK;
    size_t body = len;
    const bool raw_direct = c->keys && len == n + CLB_TAG_BYTES; /* decrypt straight into plain */
    if (c->keys) {
        if (len < CLB_TAG_BYTES) {
            rc = clb_err(COLIBRI_ERR_CORRUPT, "segment shorter than its tag");
            goto fail;
        }
        body = len - CLB_TAG_BYTES;
        uint8_t iv[12];
        nonce_of(c, r, iv);
        uint8_t *dst = raw_direct ? plain : stored;
        if (!aes_open(c, iv, r, stored, body, dst)) {
            rc = clb_err(COLIBRI_ERR_CORRUPT, "failed authentication");
            goto fail;
        }
        if (raw_direct) return COLIBRI_OK;
    }
    if (body == n) { /* stored raw */
        memcpy(plain, stored, n);
        return COLIBRI_OK;
    }
    if (body > n && c->codec == CLB_CODEC_NONE) {
        rc = clb_err(COLIBRI_ERR_CORRUPT, "segment of %zu bytes for %zu plain bytes", body, n);
        goto fail;
    }
    const bool split = r->split16 && n % 2 == 0;
    if (split && n > c->seg_size) {
        rc = clb_err(COLIBRI_ERR_ARG, "segment of %zu plain bytes for a decoder of %u", n, c->seg_size);
        goto fail;
    }
    if ((rc = decompress_seg(c, stored, body, split ? c->scratch : plain, n))) goto fail;
    if (split) clb_join16(c->scratch, plain, n);
    return COLIBRI_OK;
fail:
    memset(plain, 0, n); /* nothing decoded from unauthenticated or malformed bytes survives */
    return rc;
}
