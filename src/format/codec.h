/* codec.h — the per-segment encodings of .colibri version 2 chunks (docs/FORMAT.md):
 * the byte split of 16-bit data, zstd or zlib compression, AES-256-GCM authenticated
 * encryption (OpenSSL libcrypto, or Intel's ipsec-mb on x86-64), and the key material derived from the user's 32-byte key
 * and the file's random salt (HKDF-SHA256).
 *
 * A segment is at most the file's segment size of plain bytes. Encoding: split (16-bit
 * chunks only), compress (stored raw when that does not make it smaller), encrypt and
 * append the 16-byte tag. Decoding reverses it and verifies the tag before anything else
 * looks at the bytes; a segment's output is complete or the call fails.
 */
#ifndef CLB_CODEC_H
#define CLB_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CLB_CODEC_NONE = 0, CLB_CODEC_ZSTD = 1, CLB_CODEC_ZLIB = 2 };
#define CLB_KEY_BYTES 32
#define CLB_SALT_BYTES 32
#define CLB_KEY_CHECK_BYTES 16
#define CLB_TAG_BYTES 16
#define CLB_SEAL_CHUNK 0xFFFFFFFFu /* nonce chunk index of the sealed metadata */

const char *clb_codec_name(int codec); /* "none", "zstd", "zlib" */

/* Key material of one file, in locked memory (best effort), wiped by clb_keys_free. */
typedef struct clb_keys {
    uint8_t data_key[CLB_KEY_BYTES];
    uint8_t nonce_prefix[4];
    uint8_t key_check[CLB_KEY_CHECK_BYTES]; /* stored in the header: tells a wrong key */
} clb_keys;

/* HKDF-SHA256(ikm = master, salt, info "colibri v2 aes-256-gcm") -> 52 bytes: data key,
   nonce prefix, key check. master is not kept. */
int clb_keys_derive(const uint8_t master[CLB_KEY_BYTES], const uint8_t salt[CLB_SALT_BYTES], clb_keys **out);
void clb_keys_free(clb_keys *k);
/* The user's key for path: the callback set with colibri_set_key_callback, else the file
   named by COLIBRI_KEY_FILE. Errors name path, never the key. The caller wipes key. */
int clb_key_obtain(const char *path, uint8_t key[CLB_KEY_BYTES]);
/* A key file: 32 raw bytes, or 64 hex digits (whitespace around them allowed). */
int clb_key_read_file(const char *path, uint8_t key[CLB_KEY_BYTES]);
/* Fills buf with n cryptographically random bytes (OpenSSL RAND_bytes). */
int clb_random_bytes(uint8_t *buf, size_t n);
/* Wipes n bytes (not optimised away). */
void clb_wipe(void *p, size_t n);

/* The AES-256-GCM code (colibri_aes_name in colibri.h): clb_aes_force (tests) sets the
   backend of the codecs made after it (-1: automatic) and returns the previous setting. */
enum { CLB_AES_LIBCRYPTO = 0, CLB_AES_IPSEC_MB = 1 };
int clb_aes_force(int backend);

/* A per-thread coder: compression contexts, the cipher context and a segment of scratch. */
typedef struct clb_codec clb_codec;
/* keys may be NULL (no encryption). level: the compressor's (0 = its default). */
clb_codec *clb_codec_new(int codec, int level, const clb_keys *keys, uint32_t seg_size);
void clb_codec_free(clb_codec *c);
/* Stored bytes of a segment of n plain bytes, at most. */
size_t clb_codec_bound(int codec, bool encrypted, size_t n);

/* Where a segment sits: its chunk and index (the nonce) and the chunk's associated data. */
typedef struct clb_seg_ref {
    uint32_t chunk, seg;
    const uint8_t *aad;
    size_t aad_len;
    bool split16;
} clb_seg_ref;

/* plain[n] -> out (capacity clb_codec_bound); *out_len receives the stored size. */
int clb_codec_encode(clb_codec *c, const clb_seg_ref *r, const uint8_t *plain, size_t n, uint8_t *out,
                     size_t *out_len);
/* stored[len] -> plain[n] (exactly n bytes). stored is overwritten when encrypted (it is
   decrypted in place). On a failed tag or malformed data plain is zeroed and the status is
   COLIBRI_ERR_CORRUPT with a short reason ("failed authentication", "zstd: ..."). */
int clb_codec_decode(clb_codec *c, const clb_seg_ref *r, uint8_t *stored, size_t len, uint8_t *plain, size_t n);

/* The byte split of 16-bit data: low bytes of every pair, then the high bytes (sign and
   exponent of f16/bf16). n even; join inverts split. */
void clb_split16(const uint8_t *in, uint8_t *out, size_t n);
void clb_join16(const uint8_t *in, uint8_t *out, size_t n);

#endif
