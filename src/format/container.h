/* container.h — the .colibri file (docs/FORMAT.md is the byte-level spec).
 *
 * Version 1 (plain):
 *   [0,128)        header (magic, version, flags, section offsets/sizes, CRC32s)
 *   [128, ...)     metadata: u64 length + JSON {"config", "tokenizer"?, "tensors"}
 *   [data_offset)  data, 4096-aligned: dense tensors, then each (layer, expert)'s tensors
 *                  contiguous, every expert starting on a 4096-byte boundary.
 * Version 2 (encoded: compressed and/or encrypted), container_v2.c:
 *   [0,128)        header (as v1, plus segment size, codec, salt, key check)
 *   [4096, ...)    data: chunks (one per dense tensor, one per expert), each a run of
 *                  segments of at most segment-size plain bytes, each segment compressed
 *                  and/or AES-256-GCM encrypted on its own
 *   [after data)   metadata: clear JSON (encoding, chunk table) + the model JSON (config,
 *                  tokenizer, tensors), sealed with AES-256-GCM when encrypted.
 * The reader hands out plain bytes either way: dense tensors are decoded at open, an
 * expert's chunk on request (clb_container_decode_seg), never by the forward pass.
 */
#ifndef CLB_CONTAINER_H
#define CLB_CONTAINER_H

#include <cjson/cJSON.h>

#include "core/platform.h"
#include "format/tensor.h"

#define CLB_CONTAINER_MAGIC "COLIBRI"
#define CLB_CONTAINER_VERSION 1    /* what a plain file is written as */
#define CLB_CONTAINER_VERSION_ENC 2 /* compressed and/or encrypted */
#define CLB_CONTAINER_HEADER_SIZE 128
#define CLB_CONTAINER_DATA_ALIGN 4096
#define CLB_CONTAINER_TENSOR_ALIGN 64

struct clb_keys;
struct clb_codec;

/* v2: one chunk (a dense tensor, or one routed expert's tensors) of an encoded file. */
typedef struct clb_chunk {
    uint64_t offset;   /* absolute file offset of its first segment */
    uint64_t stored;   /* bytes from offset to the end of its last segment */
    uint64_t plain;    /* decoded bytes (the tensors at 64-byte aligned offsets, zero padding) */
    uint64_t virt;     /* sum of the plain sizes of the chunks before it */
    uint32_t crc32;    /* of the stored bytes */
    bool split16;      /* 16-bit tensors: bytes split before compression */
    int layer, expert; /* an expert's chunk; -1 for a dense tensor */
    int n_seg;
    uint64_t *seg;     /* [n_seg + 1]: segment k is stored at offset + seg[k] .. offset + seg[k+1] */
    uint8_t *aad;      /* associated data: the tensor names and the plain size */
    size_t aad_len;
    char *label;       /* "chunk 7 (blk.0.ffn_gate.3.weight, ...)" for messages */
} clb_chunk;

typedef struct clb_container {
    clb_map map;
    uint32_t version, flags;
    uint64_t meta_offset, meta_size, data_offset, data_size;
    uint32_t header_crc, meta_crc, data_crc;
    cJSON *meta;            /* the whole metadata JSON */
    const cJSON *config;    /* meta.config (object) */
    const cJSON *tokenizer; /* meta.tokenizer or NULL */
    clb_tensor *tensors;    /* offsets absolute, data points into map */
    int n_tensors;
    clb_tensor_index index; /* name lookup (private to container.c) */
    /* version 2 */
    int codec;              /* CLB_CODEC_* (codec.h) */
    uint32_t seg_size;      /* plain bytes per segment */
    bool encrypted;
    bool locked;            /* encrypted and opened without its key: no model JSON, no tensors */
    uint8_t salt[32];
    clb_chunk *chunks;
    int n_chunks;
    struct clb_keys *keys;  /* derived from the user's key; NULL unless encrypted */
    uint8_t *dense;         /* decoded dense chunks (owned); tensor data points into it */
    uint64_t dense_bytes;
    cJSON *model;           /* v2: the model JSON (config, tokenizer, tensors) */
    uint8_t *streamed_dense; /* clb_container_open_io streaming: the dense tensors (owned) */
} clb_container;

enum {
    CLB_OPEN_NO_DENSE = 1,    /* v2: do not decode the dense chunks (dense tensor data NULL) */
    CLB_OPEN_KEY_OPTIONAL = 2 /* v2: without a key, open the clear part only (c->locked) */
};

/* Maps and validates: magic, version, header CRC, section bounds, metadata CRC and JSON,
   every tensor's dtype/shape/size/offset against the data section. Data CRCs are not
   read here (see clb_container_verify). */
int clb_container_open(const char *path, clb_container *out);
int clb_container_open_ex(const char *path, int flags, clb_container *out);
/* Opens a plain container from a caller's source (colibri_init_ex). stream: without a map
   callback, only the header, metadata and dense tensors are read into memory; the routed
   experts' data stays NULL, to be read through io on demand (the bounded mode). Without
   stream (or with a map) the whole source is in memory. Encoded (v2) files are refused. */
int clb_container_open_io(const clb_io *io, bool stream, clb_container *out);
void clb_container_close(clb_container *c);
const clb_tensor *clb_container_find(const clb_container *c, const char *name);
/* Checks the data-section CRC and every tensor's CRC. On a mismatch returns
   COLIBRI_ERR_CORRUPT with the first corrupt tensor's name in the error message.
   bytes_checked (may be NULL) receives the bytes hashed. */
int clb_container_verify(const clb_container *c, uint64_t *bytes_checked);
/* As verify; *authenticated (may be NULL) = 0 when an encrypted file was opened without its
   key, so only the stored bytes could be checked. */
int clb_container_verify_ex(const clb_container *c, uint64_t *bytes_checked, int *authenticated);
/* v2: the chunk holding tensor t (t->chunk), and decoding. A coder per thread. */
struct clb_codec *clb_container_codec(const clb_container *c);
/* Plain bytes of segment seg of chunk ci: min(seg_size, plain - seg * seg_size). */
uint64_t clb_chunk_seg_plain(const clb_container *c, int ci, int seg);
/* Decodes segment seg of chunk ci from its stored bytes (stored, stored_len; overwritten)
   into plain (clb_chunk_seg_plain bytes). Errors name the file, the chunk and its tensors. */
int clb_container_decode_seg(const clb_container *c, int ci, int seg, uint8_t *stored, uint64_t stored_len,
                             uint8_t *plain, struct clb_codec *k);
/* Decodes the whole chunk ci from the file mapping into plain (its plain bytes). scratch:
   at least the largest stored segment (clb_container_max_seg). */
int clb_container_read_chunk(const clb_container *c, int ci, uint8_t *plain, uint8_t *scratch, struct clb_codec *k);
/* Chunk ci's stored bytes out of this process's mapping and (clean) out of the page cache,
   which a memory cap counts too: what opening and reading brought in around it (the
   mapping's read-around reaches read_ahead_kb past what was touched). Only for a file this
   container mapped itself; a later access maps the bytes back in. */
void clb_container_release_chunk(const clb_container *c, int ci);
uint64_t clb_container_max_seg(const clb_container *c);
/* Plain bytes of the largest segment: min(segment size, the largest chunk's plain size). */
uint64_t clb_container_max_plain_seg(const clb_container *c);

/* zlib-compatible CRC-32 (crc32(crc, data, n) of zlib), hardware-accelerated when the CPU
   allows (x86-64 PCLMUL, ARMv8 CRC32); COLIBRI_ISA=generic forces zlib's. */
uint32_t clb_crc32(uint32_t crc, const void *data, size_t n);
/* The CRC-32 of A followed by B from crc(A), crc(B) and B's length (zlib's crc32_combine). */
uint32_t clb_crc32_combine(uint32_t a, uint32_t b, uint64_t len_b);

/* ---- writer (streaming: one tensor in memory at a time) ---- */

typedef struct clb_cw_tensor {
    const char *name;
    int dtype;
    int n_dims;
    int64_t shape[CLB_MAX_DIMS];
    int layer;  /* -1 for none */
    int expert; /* -1 for dense */
} clb_cw_tensor;

typedef struct clb_cwriter clb_cwriter;

/* How a file is encoded (version 2); all zero: a plain version 1 file. */
typedef struct clb_cw_encoding {
    int codec;              /* CLB_CODEC_* */
    int level;              /* the compressor's level (0 = its default) */
    bool no_split;          /* do not split 16-bit bytes before compressing */
    bool encrypt;           /* AES-256-GCM with key */
    uint8_t key[32];        /* the user's key (the writer wipes its copy) */
    uint32_t seg_size;      /* plain bytes per segment (0 = 4 MiB) */
    int n_threads;          /* encoding threads (0 = 1) */
    const uint8_t *test_salt; /* NULL: a fresh random salt (always, but for reproducible test seeds) */
} clb_cw_encoding;

/* Creates path and lays out the data section: dense tensors (expert == -1) in the given
   order, then experts by (layer, expert), each expert's tensors in the given order, each
   expert 4096-aligned. config and tokenizer (may be NULL) are copied. */
clb_cwriter *clb_cwriter_create(const char *path, const cJSON *config, const cJSON *tokenizer,
                                const clb_cw_tensor *tensors, int n_tensors);
/* The same with an encoding (NULL or codec none without encryption: version 1). An encoded
   file is written in file order: the dense tensors in the given order, then the experts by
   (layer, expert); clb_cwriter_write fails for a tensor out of that order. */
clb_cwriter *clb_cwriter_create_ex(const char *path, const cJSON *config, const cJSON *tokenizer,
                                   const clb_cw_tensor *tensors, int n_tensors, const clb_cw_encoding *enc);
/* Bytes written to the data section so far (for an encoded file, stored bytes). */
uint64_t clb_cwriter_data_bytes(const clb_cwriter *w);
/* Appends bytes of tensor i (any tensor order; within a tensor, sequential chunks).
   Writing more than the tensor's size is an error. */
int clb_cwriter_write(clb_cwriter *w, int i, const void *data, uint64_t len);
/* Checks every tensor was fully written, writes metadata with CRCs and the header. */
int clb_cwriter_finish(clb_cwriter *w);
/* Frees (and on an unfinished writer removes the partial file). NULL is fine. */
void clb_cwriter_free(clb_cwriter *w);

#endif
