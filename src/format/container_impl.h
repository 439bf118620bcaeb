/* container_impl.h — private to container.c (version 1, shared parts) and container_v2.c
 * (encoded files): header field offsets, JSON and I/O helpers, the writer's state. */
#ifndef CLB_CONTAINER_IMPL_H
#define CLB_CONTAINER_IMPL_H

#include "format/codec.h"
#include "format/container.h"

/* Header field offsets (docs/FORMAT.md, "Header"). */
enum {
    H_MAGIC = 0,
    H_VERSION = 8,
    H_FLAGS = 12,
    H_META_OFF = 16,
    H_META_SIZE = 24,
    H_DATA_OFF = 32,
    H_DATA_SIZE = 40,
    H_COUNT = 48,     /* v1: tensors; v2: chunks */
    H_META_CRC = 56,
    H_ALIGN = 60,
    H_DATA_CRC = 64,
    H_RESERVED = 68,  /* v1: zero up to the header CRC */
    H_SEG_SIZE = 68,  /* v2: u32 plain bytes per segment */
    H_CODEC = 72,     /* v2: u8 CLB_CODEC_*, then 3 zero bytes */
    H_SALT = 76,      /* v2: 32 bytes, zero unless encrypted */
    H_KEY_CHECK = 108, /* v2: 16 bytes, zero unless encrypted */
    H_HEADER_CRC = 124
};

#define CLB_CONTAINER_FLAG_COMPRESSED 1u
#define CLB_CONTAINER_FLAG_ENCRYPTED 2u
/* JSON numbers are doubles: integers above 2^53 cannot be represented exactly. */
#define JSON_INT_MAX 9007199254740992.0
#define CLB_SEG_MIN ((uint32_t)1 << 16)
#define CLB_SEG_MAX ((uint32_t)1 << 26)
#define CLB_SEG_DEFAULT ((uint32_t)1 << 22)

uint32_t clb_ct_crc(uint32_t crc, const uint8_t *p, uint64_t n);
uint32_t clb_ct_crc_cat(uint32_t a, uint32_t b, uint64_t len_b);
/* A JSON number that is an integer in [lo, hi] (hi <= 2^53). */
bool clb_ct_json_int(const cJSON *v, double lo, double hi, int64_t *out);
bool clb_ct_hex8(const char *s, uint32_t *out);
int clb_ct_pwrite(int fd, const void *buf, uint64_t len, uint64_t off, const char *path);
int clb_ct_pread(int fd, void *buf, size_t len, uint64_t off, const char *path);
/* Parses text[0..len) as one JSON object with nothing but whitespace after it; what names
   the part in messages ("metadata"). *out owned by the caller. */
int clb_ct_parse_json(const char *path, const char *what, const uint8_t *text, uint64_t len, cJSON **out);
/* The model part of the metadata ("config", "tokenizer", "tensors") into c->config,
   c->tokenizer, c->tensors (v1: offsets in the data section; v2: chunk and offset in its
   plain bytes); n_expected: the tensor count the file states, or -1. */
int clb_ct_parse_model(const char *path, clb_container *c, const cJSON *root, int64_t n_expected);
/* One tensor entry of the metadata (offset: the "offset" value written). */
cJSON *clb_ct_tensor_json(const clb_tensor *t, bool with_crc, uint64_t offset, int chunk);

/* container_v2.c */
int clb_ct_v2_header(const char *path, const uint8_t *h, clb_container *c);
int clb_ct_v2_open(const char *path, int flags, clb_container *c);
int clb_ct_v2_verify(const clb_container *c, uint64_t *bytes_checked, int *authenticated);
void clb_ct_v2_close(clb_container *c);

typedef struct clb_v2w clb_v2w; /* the encoded writer's state */

struct clb_cwriter {
    char *path, *tmp_path;
    int fd;
    bool finished;
    bool created; /* tmp_path exists and is ours */
    cJSON *config, *tokenizer; /* copies */
    clb_tensor *t;             /* [n]: offset relative to the data section, crc32 running */
    uint64_t *written;         /* [n]: bytes written so far */
    int n;
    uint64_t meta_size, data_offset, data_size;
    clb_v2w *v2;               /* NULL for a version 1 file */
};

/* Hashes the data section back from the file; it must have CRC expect. */
int clb_ct_readback(clb_cwriter *w, uint32_t expect, uint32_t *crc);
/* Writes the header last, fsyncs and renames PATH.tmp to PATH. */
int clb_ct_commit(clb_cwriter *w, const uint8_t h[CLB_CONTAINER_HEADER_SIZE]);

int clb_ct_v2_writer_init(clb_cwriter *w, const clb_cw_encoding *enc);
int clb_ct_v2_write(clb_cwriter *w, int i, const uint8_t *data, uint64_t len);
int clb_ct_v2_finish(clb_cwriter *w);
void clb_ct_v2_writer_free(clb_cwriter *w);
uint64_t clb_ct_v2_data_bytes(const clb_cwriter *w);

#endif
