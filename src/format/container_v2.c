/* container_v2.c — encoded .colibri files (version 2): compressed and/or encrypted chunks.
 * docs/FORMAT.md ("Version 2") is the byte-level specification.
 *
 * A chunk is one dense tensor or one routed expert's tensors (their plain bytes laid out as
 * in version 1: tensors 64-byte aligned, zero padding). It is stored as segments of at most
 * the file's segment size of plain bytes, each encoded on its own (codec.h), so an expert
 * is still one contiguous read, and its segments can be decoded by several threads. The
 * metadata follows the data (the writer streams chunks and learns their sizes as it goes):
 * a clear JSON (encoding, chunk table) and the model JSON (config, tokenizer, tensors),
 * inline when the file is only compressed, AES-256-GCM-sealed when it is encrypted.
 *
 * Reader: everything the clear part says is checked against the file before use; with a
 * key, the sealed metadata is authenticated (its associated data is the header and the
 * clear JSON, so neither can be changed either) before its JSON is parsed, and every
 * segment is authenticated before its bytes are decompressed or handed out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/common.h"
#include "core/threadpool.h"
#include "format/container_impl.h"

/* ---------------------------------------------------------------- reader */

int clb_ct_v2_header(const char *path, const uint8_t *h, clb_container *c) {
    c->seg_size = clb_rd_u32(h + H_SEG_SIZE);
    if (c->seg_size < CLB_SEG_MIN || c->seg_size > CLB_SEG_MAX || (c->seg_size & (c->seg_size - 1)))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: segment size %u is not a power of two in [%u, %u]", path, c->seg_size,
                       CLB_SEG_MIN, CLB_SEG_MAX);
    c->codec = h[H_CODEC];
    if (c->codec > CLB_CODEC_ZLIB) return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: unknown codec %d", path, c->codec);
    if (h[H_CODEC + 1] | h[H_CODEC + 2] | h[H_CODEC + 3])
        return clb_err(COLIBRI_ERR_FORMAT, "%s: reserved header bytes 73..75 are not zero", path);
    if (((c->flags & CLB_CONTAINER_FLAG_COMPRESSED) != 0) != (c->codec != CLB_CODEC_NONE))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: the compressed flag and the codec (%s) disagree", path,
                       clb_codec_name(c->codec));
    c->encrypted = (c->flags & CLB_CONTAINER_FLAG_ENCRYPTED) != 0;
    memcpy(c->salt, h + H_SALT, CLB_SALT_BYTES);
    if (!c->encrypted)
        for (int i = H_SALT; i < H_HEADER_CRC; i++)
            if (h[i]) return clb_err(COLIBRI_ERR_FORMAT, "%s: a clear file with salt or key-check bytes", path);
    return COLIBRI_OK;
}

static const char *chunk_what(const clb_container *c, int ci) {
    return c->chunks[ci].label ? c->chunks[ci].label : "chunk";
}

/* The chunk table of the clear JSON. */
static int parse_chunks(const char *path, clb_container *c, const cJSON *arr, uint64_t n_header) {
    if (!cJSON_IsArray(arr)) return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata has no \"chunks\" array", path);
    int n = cJSON_GetArraySize(arr);
    if ((uint64_t)n != n_header)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: header says %llu chunks, metadata lists %d", path,
                       (unsigned long long)n_header, n);
    c->chunks = clb_calloc((size_t)(n > 0 ? n : 1), sizeof *c->chunks);
    if (!c->chunks) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    c->n_chunks = n;
    uint64_t prev_end = 0, virt = 0;
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        clb_chunk *k = &c->chunks[i];
        k->layer = k->expert = -1;
        int64_t off, plain;
        const cJSON *crc = cJSON_GetObjectItemCaseSensitive(e, "crc32");
        const cJSON *split = cJSON_GetObjectItemCaseSensitive(e, "split16");
        const cJSON *segs = cJSON_GetObjectItemCaseSensitive(e, "segments");
        if (!cJSON_IsObject(e) || !clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "offset"), 0, JSON_INT_MAX, &off) ||
            !clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "plain"), 1, JSON_INT_MAX, &plain) ||
            !cJSON_IsString(crc) || !clb_ct_hex8(crc->valuestring, &k->crc32) || !cJSON_IsBool(split) ||
            !cJSON_IsArray(segs))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: chunks[%d] is not {offset, plain, crc32, split16, segments}", path, i);
        k->offset = c->data_offset + (uint64_t)off;
        k->plain = (uint64_t)plain;
        k->split16 = cJSON_IsTrue(split);
        k->virt = virt;
        if (!clb_add_u64(virt, k->plain, &virt) || virt > (uint64_t)JSON_INT_MAX)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: chunks hold more than 2^53 plain bytes", path);
        if ((uint64_t)off % CLB_CONTAINER_TENSOR_ALIGN || (uint64_t)off < prev_end)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: chunks[%d] at %lld is unaligned or overlaps the chunk before", path, i,
                           (long long)off);
        const uint64_t want_seg = (k->plain + c->seg_size - 1) / c->seg_size;
        if ((uint64_t)cJSON_GetArraySize(segs) != want_seg)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: chunks[%d] has %d segments, %llu plain bytes need %llu", path, i,
                           cJSON_GetArraySize(segs), (unsigned long long)k->plain, (unsigned long long)want_seg);
        k->n_seg = (int)want_seg;
        k->seg = clb_malloc(((size_t)want_seg + 1) * sizeof *k->seg);
        if (!k->seg) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        k->seg[0] = 0;
        int s = 0;
        for (const cJSON *v = segs->child; v; v = v->next, s++) {
            const uint64_t sp = clb_chunk_seg_plain(c, i, s);
            const uint64_t bound = clb_codec_bound(c->codec, c->encrypted, (size_t)sp);
            const uint64_t least = c->codec == CLB_CODEC_NONE ? bound : (c->encrypted ? CLB_TAG_BYTES + 1 : 1);
            int64_t len;
            if (!clb_ct_json_int(v, (double)least, (double)bound, &len))
                return clb_err(COLIBRI_ERR_FORMAT, "%s: chunks[%d] segment %d: stored size not in [%llu, %llu]", path, i,
                               s, (unsigned long long)least, (unsigned long long)bound);
            k->seg[s + 1] = k->seg[s] + (uint64_t)len;
        }
        k->stored = k->seg[k->n_seg];
        if (!clb_range_ok((uint64_t)off, k->stored, c->data_size))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: chunks[%d] (bytes %lld + %llu) leaves the data section (%llu bytes)",
                           path, i, (long long)off, (unsigned long long)k->stored, (unsigned long long)c->data_size);
        /* the padding before it reads as zeros: no byte of the file goes unchecked */
        for (uint64_t q = prev_end; q < (uint64_t)off; q++)
            if (c->map.data[c->data_offset + q])
                return clb_err(COLIBRI_ERR_FORMAT, "%s: padding byte %llu before chunk %d is not zero", path,
                               (unsigned long long)(c->data_offset + q), i);
        prev_end = (uint64_t)off + k->stored;
    }
    for (uint64_t q = prev_end; q < c->data_size; q++)
        if (c->map.data[c->data_offset + q])
            return clb_err(COLIBRI_ERR_FORMAT, "%s: padding byte %llu after the last chunk is not zero", path,
                           (unsigned long long)(c->data_offset + q));
    return COLIBRI_OK;
}

uint64_t clb_chunk_seg_plain(const clb_container *c, int ci, int seg) {
    const clb_chunk *k = &c->chunks[ci];
    const uint64_t a = (uint64_t)seg * c->seg_size;
    return a >= k->plain ? 0 : CLB_MIN((uint64_t)c->seg_size, k->plain - a);
}

uint64_t clb_container_max_seg(const clb_container *c) {
    uint64_t m = 0;
    for (int i = 0; i < c->n_chunks; i++)
        for (int s = 0; s < c->chunks[i].n_seg; s++) m = CLB_MAX(m, c->chunks[i].seg[s + 1] - c->chunks[i].seg[s]);
    return m;
}

uint64_t clb_container_max_plain_seg(const clb_container *c) {
    uint64_t m = 0;
    for (int i = 0; i < c->n_chunks; i++) m = CLB_MAX(m, CLB_MIN((uint64_t)c->seg_size, c->chunks[i].plain));
    return m;
}

/* The associated data of a chunk (docs/FORMAT.md): for each of its tensors in offset order
   u32 name length + name, then u64 plain size. Also its label for messages. */
static int chunk_aad(const char *path, clb_container *c, int ci, const int *members, int n_members) {
    clb_chunk *k = &c->chunks[ci];
    size_t len = 8, lab = 32;
    for (int j = 0; j < n_members; j++) {
        len += 4 + strlen(c->tensors[members[j]].name);
        lab += strlen(c->tensors[members[j]].name) + 2;
    }
    k->aad = clb_malloc(len);
    k->label = clb_malloc(lab);
    if (!k->aad || !k->label) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    size_t p = 0, q = (size_t)snprintf(k->label, lab, "chunk %d (", ci);
    for (int j = 0; j < n_members; j++) {
        const char *nm = c->tensors[members[j]].name;
        const size_t l = strlen(nm);
        clb_wr_u32(k->aad + p, (uint32_t)l);
        memcpy(k->aad + p + 4, nm, l);
        p += 4 + l;
        q += (size_t)snprintf(k->label + q, lab - q, "%s%s", j ? ", " : "", nm);
    }
    clb_wr_u64(k->aad + p, k->plain);
    k->aad_len = p + 8;
    snprintf(k->label + q, lab - q, ")");
    return COLIBRI_OK;
}

static int cmp_chunk_off(const void *a, const void *b, void *ctx) {
    const clb_tensor *t = ctx;
    const clb_tensor *x = &t[*(const int *)a], *y = &t[*(const int *)b];
    return x->chunk != y->chunk ? (x->chunk < y->chunk ? -1 : 1) : (x->chunk_off > y->chunk_off) - (x->chunk_off < y->chunk_off);
}

/* Every chunk holds one dense tensor or the tensors of one (layer, expert), ending at its
   plain size; builds each chunk's associated data. */
static int bind_chunks(const char *path, clb_container *c) {
    const int n = c->n_tensors;
    int *idx = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_chunk_off, c->tensors);
    int rc = COLIBRI_OK, j = 0;
    for (int ci = 0; ci < c->n_chunks && !rc; ci++) {
        const int first = j;
        while (j < n && c->tensors[idx[j]].chunk == ci) j++;
        const int m = j - first;
        clb_chunk *k = &c->chunks[ci];
        if (m == 0) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: chunk %d holds no tensor", path, ci);
            break;
        }
        const clb_tensor *t0 = &c->tensors[idx[first]], *tl = &c->tensors[idx[j - 1]];
        k->layer = t0->expert >= 0 ? t0->layer : -1;
        k->expert = t0->expert;
        for (int q = first; q < j && !rc; q++) {
            const clb_tensor *t = &c->tensors[idx[q]];
            if (t->layer != t0->layer || t->expert != t0->expert || (t0->expert < 0 && m != 1))
                rc = clb_err(COLIBRI_ERR_FORMAT, "%s: chunk %d mixes '%s' and '%s' (one dense tensor or one expert a chunk)",
                             path, ci, t0->name, t->name);
        }
        if (!rc && tl->chunk_off + tl->size != k->plain)
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: chunk %d has %llu plain bytes, its tensors end at %llu", path, ci,
                         (unsigned long long)k->plain, (unsigned long long)(tl->chunk_off + tl->size));
        if (!rc) rc = chunk_aad(path, c, ci, idx + first, m);
    }
    clb_free(idx);
    return rc;
}

/* The sealed metadata's associated data: the header with its metadata CRC and header CRC
   zeroed, then the clear JSON (its length prefix included). */
static uint8_t *seal_aad(const uint8_t *h, const uint8_t *clear, uint64_t clear_len, size_t *len) {
    uint8_t *a = clb_malloc(CLB_CONTAINER_HEADER_SIZE + 8 + (size_t)clear_len);
    if (!a) return NULL;
    memcpy(a, h, CLB_CONTAINER_HEADER_SIZE);
    memset(a + H_META_CRC, 0, 4);
    memset(a + H_HEADER_CRC, 0, 4);
    clb_wr_u64(a + CLB_CONTAINER_HEADER_SIZE, clear_len);
    memcpy(a + CLB_CONTAINER_HEADER_SIZE + 8, clear, (size_t)clear_len);
    *len = CLB_CONTAINER_HEADER_SIZE + 8 + (size_t)clear_len;
    return a;
}

static int check_encoding(const char *path, const clb_container *c, const cJSON *enc) {
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(enc, "compression");
    const cJSON *cipher = cJSON_GetObjectItemCaseSensitive(enc, "encryption");
    int64_t seg;
    if (!cJSON_IsObject(enc) || !cJSON_IsString(comp) || strcmp(comp->valuestring, clb_codec_name(c->codec)) ||
        !cJSON_IsString(cipher) || strcmp(cipher->valuestring, c->encrypted ? "aes-256-gcm" : "none") ||
        !clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(enc, "segment_bytes"), 1, JSON_INT_MAX, &seg) ||
        (uint64_t)seg != c->seg_size)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata \"encoding\" disagrees with the header", path);
    return COLIBRI_OK;
}

/* Decodes the dense chunks into one buffer; dense tensor data points into it. */
static int decode_dense(const char *path, clb_container *c) {
    uint64_t total = 0;
    for (int i = 0; i < c->n_chunks; i++)
        if (c->chunks[i].expert < 0) total = clb_align_up(total, 64) + c->chunks[i].plain;
    if (total == 0) return COLIBRI_OK;
    c->dense = clb_alloc_aligned((size_t)total);
    uint8_t *scratch = clb_alloc_aligned((size_t)clb_container_max_seg(c) + 64);
    clb_codec *k = clb_container_codec(c);
    int rc = COLIBRI_OK;
    if (!c->dense || !scratch || !k) rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory for %llu bytes of dense tensors",
                                                  path, (unsigned long long)total);
    uint64_t pos = 0;
    uint64_t *base = clb_calloc((size_t)(c->n_chunks > 0 ? c->n_chunks : 1), sizeof *base);
    if (!rc && !base) rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < c->n_chunks && !rc; i++) {
        if (c->chunks[i].expert >= 0) continue;
        pos = clb_align_up(pos, 64);
        base[i] = pos;
        rc = clb_container_read_chunk(c, i, c->dense + pos, scratch, k);
        pos += c->chunks[i].plain;
    }
    for (int t = 0; t < c->n_tensors && !rc; t++)
        if (c->tensors[t].expert < 0) c->tensors[t].data = c->dense + base[c->tensors[t].chunk] + c->tensors[t].chunk_off;
    c->dense_bytes = total;
    clb_free(base);
    clb_codec_free(k);
    clb_free_aligned(scratch);
    return rc;
}

int clb_ct_v2_open(const char *path, int flags, clb_container *c) {
    const uint8_t *h = c->map.data, *m = c->map.data + c->meta_offset;
    uint32_t crc = clb_ct_crc(0, m, c->meta_size);
    if (crc != c->meta_crc)
        return clb_err(COLIBRI_ERR_CORRUPT, "%s: metadata is corrupt (crc32 %08x, expected %08x)", path, crc, c->meta_crc);
    const uint64_t clear_len = clb_rd_u64(m);
    uint64_t sealed_len = 0, used;
    if (clear_len > c->meta_size - 8)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: clear metadata of %llu bytes overruns its section", path,
                       (unsigned long long)clear_len);
    used = 8 + clear_len;
    if (c->encrypted) {
        if (c->meta_size - used < 8)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated: the sealed metadata is missing", path);
        sealed_len = clb_rd_u64(m + used);
        used += 8;
        if (sealed_len < CLB_TAG_BYTES || sealed_len > c->meta_size - used)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: sealed metadata of %llu bytes does not fit its section", path,
                           (unsigned long long)sealed_len);
        used += sealed_len;
    }
    if (used != c->meta_size)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata section has %llu bytes, its parts %llu", path,
                       (unsigned long long)c->meta_size, (unsigned long long)used);
    int rc = clb_ct_parse_json(path, "clear metadata", m + 8, clear_len, &c->meta);
    if (rc) return rc;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(c->meta, "format");
    int64_t ver;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "colibri") ||
        !clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(c->meta, "version"), 0, INT32_MAX, &ver) || ver != 2)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata is not {\"format\": \"colibri\", \"version\": 2, ...}", path);
    if ((rc = check_encoding(path, c, cJSON_GetObjectItemCaseSensitive(c->meta, "encoding")))) return rc;
    if ((rc = parse_chunks(path, c, cJSON_GetObjectItemCaseSensitive(c->meta, "chunks"), clb_rd_u64(h + H_COUNT))))
        return rc;
    const cJSON *model = c->meta;
    if (c->encrypted) {
        uint8_t key[CLB_KEY_BYTES];
        rc = clb_key_obtain(path, key);
        if (rc) {
            if (flags & CLB_OPEN_KEY_OPTIONAL) {
                clb_clear_error();
                c->locked = true;
                return COLIBRI_OK;
            }
            return rc;
        }
        rc = clb_keys_derive(key, c->salt, &c->keys);
        clb_wipe(key, sizeof key);
        if (rc) return rc;
        if (CRYPTO_memcmp(c->keys->key_check, h + H_KEY_CHECK, CLB_KEY_CHECK_BYTES) != 0)
            return clb_err(COLIBRI_ERR_ARG, "%s: wrong key (the file's key check does not match; or its salt was altered)",
                           path);
        size_t aad_len = 0;
        uint8_t *aad = seal_aad(h, m + 8, clear_len, &aad_len);
        uint8_t *buf = clb_malloc((size_t)sealed_len), *plain = clb_malloc((size_t)(sealed_len - CLB_TAG_BYTES) + 1);
        clb_codec *k = clb_codec_new(CLB_CODEC_NONE, 0, c->keys, 0);
        if (!aad || !buf || !plain || !k) {
            rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        } else {
            memcpy(buf, m + 8 + clear_len + 8, (size_t)sealed_len);
            const clb_seg_ref r = {.chunk = CLB_SEAL_CHUNK, .seg = 0, .aad = aad, .aad_len = aad_len};
            rc = clb_codec_decode(k, &r, buf, (size_t)sealed_len, plain, (size_t)(sealed_len - CLB_TAG_BYTES));
            if (rc)
                rc = clb_err(COLIBRI_ERR_CORRUPT, "%s: the sealed metadata failed authentication (header, metadata or "
                             "tag tampered with, or corrupt)", path);
            else
                rc = clb_ct_parse_json(path, "sealed metadata", plain, sealed_len - CLB_TAG_BYTES, &c->model);
        }
        clb_codec_free(k);
        clb_free(aad);
        clb_free(buf);
        if (plain) clb_wipe(plain, (size_t)(sealed_len - CLB_TAG_BYTES));
        clb_free(plain);
        if (rc) return rc;
        model = c->model;
    }
    if ((rc = clb_ct_parse_model(path, c, model, -1))) return rc;
    if ((rc = bind_chunks(path, c))) return rc;
    if (!(flags & CLB_OPEN_NO_DENSE) && (rc = decode_dense(path, c))) return rc;
    return COLIBRI_OK;
}

void clb_ct_v2_close(clb_container *c) {
    for (int i = 0; c->chunks && i < c->n_chunks; i++) {
        clb_free(c->chunks[i].seg);
        clb_free(c->chunks[i].aad);
        clb_free(c->chunks[i].label);
    }
    clb_free(c->chunks);
    c->chunks = NULL;
    if (c->dense) {
        clb_wipe(c->dense, (size_t)c->dense_bytes); /* decrypted weights do not outlive the file */
        clb_free_aligned(c->dense);
    }
    c->dense = NULL;
    clb_keys_free(c->keys);
    c->keys = NULL;
    cJSON_Delete(c->model);
    c->model = NULL;
}

clb_codec *clb_container_codec(const clb_container *c) {
    /* its scratch holds one plain segment: no more than the largest chunk's */
    clb_codec *k = clb_codec_new(c->codec, 0, c->keys, (uint32_t)CLB_MAX(clb_container_max_plain_seg(c), 1));
    if (!k) clb_err(COLIBRI_ERR_NOMEM, "out of memory for a decoder");
    return k;
}

int clb_container_decode_seg(const clb_container *c, int ci, int seg, uint8_t *stored, uint64_t stored_len,
                             uint8_t *plain, clb_codec *k) {
    const char *path = c->map.path ? c->map.path : "container";
    if (ci < 0 || ci >= c->n_chunks || seg < 0 || seg >= c->chunks[ci].n_seg)
        return clb_err(COLIBRI_ERR_ARG, "%s: no segment %d of chunk %d", path, seg, ci);
    const clb_chunk *ch = &c->chunks[ci];
    if (c->locked) return clb_err(COLIBRI_ERR_ARG, "%s: encrypted, and opened without its key", path);
    if (stored_len != ch->seg[seg + 1] - ch->seg[seg])
        return clb_err(COLIBRI_ERR_ARG, "%s: %s segment %d: %llu stored bytes given, %llu expected", path, chunk_what(c, ci),
                       seg, (unsigned long long)stored_len, (unsigned long long)(ch->seg[seg + 1] - ch->seg[seg]));
    const clb_seg_ref r = {.chunk = (uint32_t)ci, .seg = (uint32_t)seg, .aad = ch->aad, .aad_len = ch->aad_len,
                           .split16 = ch->split16};
    int rc = clb_codec_decode(k, &r, stored, (size_t)stored_len, plain, (size_t)clb_chunk_seg_plain(c, ci, seg));
    if (rc) {
        const bool auth = c->encrypted && strstr(clb_last_error(), "authentication");
        return clb_err(rc, "%s: %s segment %d: %s", path, chunk_what(c, ci), seg,
                       auth ? "failed authentication (tampered, corrupt, truncated or moved)" : clb_last_error());
    }
    return COLIBRI_OK;
}

int clb_container_read_chunk(const clb_container *c, int ci, uint8_t *plain, uint8_t *scratch, clb_codec *k) {
    const clb_chunk *ch = &c->chunks[ci];
    uint32_t crc = 0;
    for (int s = 0; s < ch->n_seg; s++) {
        const uint64_t len = ch->seg[s + 1] - ch->seg[s];
        memcpy(scratch, c->map.data + ch->offset + ch->seg[s], (size_t)len);
        if (!c->encrypted) crc = clb_ct_crc(crc, scratch, len);
        int rc = clb_container_decode_seg(c, ci, s, scratch, len, plain + (uint64_t)s * c->seg_size, k);
        if (rc) return rc;
    }
    /* a clear file's chunk: its CRC (an encrypted one's segments were all authenticated) */
    if (!c->encrypted && crc != ch->crc32)
        return clb_err(COLIBRI_ERR_CORRUPT, "%s: %s is corrupt (stored bytes crc32 %08x, expected %08x)",
                       c->map.path ? c->map.path : "container", chunk_what(c, ci), crc, ch->crc32);
    /* the decoded copy replaces the stored bytes (a plain file's tensors are used in place;
       an encoded one's would otherwise be held twice) */
    clb_container_release_chunk(c, ci);
    return COLIBRI_OK;
}

void clb_container_release_chunk(const clb_container *c, int ci) {
    const clb_chunk *ch = &c->chunks[ci];
    if (c->map.io || c->map.fd < 0 || ch->stored == 0) return;
    clb_release_pages(c->map.data + ch->offset, ch->stored);
    (void)posix_fadvise(c->map.fd, (off_t)ch->offset, (off_t)ch->stored, POSIX_FADV_DONTNEED);
}

/* Stored bytes: the data CRC (padding included) and each chunk's CRC; then, with the key
   (or without encryption), every segment decoded and every tensor's plain CRC. */
int clb_ct_v2_verify(const clb_container *c, uint64_t *bytes_checked, int *authenticated) {
    const char *path = c->map.path ? c->map.path : "container";
    const uint8_t *base = c->map.data + c->data_offset;
    uint32_t crc = 0;
    uint64_t pos = 0, checked = 0;
    int rc = COLIBRI_OK;
    for (int i = 0; i < c->n_chunks && !rc; i++) {
        const clb_chunk *k = &c->chunks[i];
        const uint64_t off = k->offset - c->data_offset;
        crc = clb_ct_crc(crc, base + pos, off - pos);
        uint32_t kc = clb_ct_crc(0, base + off, k->stored);
        if (kc != k->crc32)
            rc = clb_err(COLIBRI_ERR_CORRUPT, "%s: %s is corrupt (stored bytes crc32 %08x, expected %08x)", path,
                         c->locked ? "chunk" : chunk_what(c, i), kc, k->crc32);
        crc = clb_ct_crc_cat(crc, kc, k->stored);
        pos = off + k->stored;
    }
    if (!rc && pos < c->data_size) crc = clb_ct_crc(crc, base + pos, c->data_size - pos);
    if (!rc && crc != c->data_crc)
        rc = clb_err(COLIBRI_ERR_CORRUPT, "%s: padding in the data section is corrupt (data crc32 %08x, expected %08x; "
                     "every chunk matches)", path, crc, c->data_crc);
    checked = c->data_size;
    if (authenticated) *authenticated = !c->locked;
    if (rc || c->locked) {
        if (bytes_checked) *bytes_checked = checked;
        return rc;
    }
    /* decode everything; each tensor's plain CRC, streamed segment by segment */
    uint8_t *scratch = clb_alloc_aligned((size_t)clb_container_max_seg(c) + 64);
    uint8_t *seg = clb_alloc_aligned(c->seg_size);
    uint32_t *tcrc = clb_calloc((size_t)(c->n_tensors > 0 ? c->n_tensors : 1), sizeof *tcrc);
    clb_codec *k = clb_container_codec(c);
    if (!scratch || !seg || !tcrc || !k) rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < c->n_chunks && !rc; i++) {
        const clb_chunk *ch = &c->chunks[i];
        for (int s = 0; s < ch->n_seg && !rc; s++) {
            const uint64_t len = ch->seg[s + 1] - ch->seg[s];
            memcpy(scratch, c->map.data + ch->offset + ch->seg[s], (size_t)len);
            if ((rc = clb_container_decode_seg(c, i, s, scratch, len, seg, k))) break;
            const uint64_t a = (uint64_t)s * c->seg_size, b = a + clb_chunk_seg_plain(c, i, s);
            for (int t = 0; t < c->n_tensors; t++) { /* the tensors of this chunk overlapping [a, b) */
                const clb_tensor *tt = &c->tensors[t];
                if (tt->chunk != i || tt->chunk_off >= b || tt->chunk_off + tt->size <= a) continue;
                const uint64_t x0 = CLB_MAX(a, tt->chunk_off), x1 = CLB_MIN(b, tt->chunk_off + tt->size);
                tcrc[t] = clb_ct_crc(tcrc[t], seg + (x0 - a), x1 - x0);
            }
            checked += b - a;
        }
        for (int t = 0; t < c->n_tensors && !rc; t++)
            if (c->tensors[t].chunk == i && tcrc[t] != c->tensors[t].crc32)
                rc = clb_err(COLIBRI_ERR_CORRUPT, "%s: tensor '%s' is corrupt (crc32 %08x, expected %08x)", path,
                             c->tensors[t].name, tcrc[t], c->tensors[t].crc32);
    }
    clb_codec_free(k);
    clb_free(tcrc);
    clb_free_aligned(seg);
    clb_free_aligned(scratch);
    if (bytes_checked) *bytes_checked = checked;
    return rc;
}

/* ---------------------------------------------------------------- writer
 * Tensors arrive in file order (the layout of version 1: dense tensors, then experts by
 * (layer, expert)). Their bytes, with the padding between an expert's tensors, form each
 * chunk's plain stream, cut into segments; a batch of segments (one per thread) is encoded
 * on the thread pool, then appended to the file in order. */

typedef struct v2_chunk {
    int first, count;      /* the chunk's tensors: order[first .. first + count) */
    uint64_t plain, start; /* plain size; first tensor's version-1 offset */
    bool expert, split16;
    uint64_t offset;       /* in the data section */
    uint32_t crc;          /* of its stored bytes */
    uint64_t *segs;        /* stored segment sizes */
    int n_seg, cap_seg;
    uint8_t *aad;
    size_t aad_len;
} v2_chunk;

struct clb_v2w {
    clb_cw_encoding enc;   /* key wiped */
    clb_keys *keys;
    uint8_t salt[CLB_SALT_BYTES];
    int *order;            /* tensors in file order */
    int *chunk_of;         /* [n] chunk of each tensor */
    v2_chunk *chunks;
    int n_chunks;
    int next;              /* position in order of the tensor being written */
    int cur;               /* chunk being written, -1 none */
    uint64_t cur_plain;    /* plain bytes of cur produced so far */
    uint64_t pos;          /* stored bytes of the data section so far */
    uint32_t data_crc;
    /* the batch */
    clb_pool *pool;
    int n_threads;
    clb_codec **codecs;    /* [n_threads] */
    uint8_t **in, **out;   /* [n_threads]: seg_size plain / bound stored */
    size_t *in_len, *out_len;
    int *status;
    int n_in;              /* segments filled in the batch (the last may be partial) */
    int seg0;              /* index in the chunk of the batch's first segment */
};

typedef struct batch_job {
    clb_v2w *v;
} batch_job;

static void encode_batch(void *ctx, int ith, int nth) {
    clb_v2w *v = ((batch_job *)ctx)->v;
    const v2_chunk *k = &v->chunks[v->cur];
    for (int j = ith; j < v->n_in; j += nth) {
        const clb_seg_ref r = {.chunk = (uint32_t)v->cur, .seg = (uint32_t)(v->seg0 + j), .aad = k->aad,
                               .aad_len = k->aad_len, .split16 = k->split16};
        v->status[j] = clb_codec_encode(v->codecs[ith], &r, v->in[j], v->in_len[j], v->out[j], &v->out_len[j]);
    }
}

static int flush_batch(clb_cwriter *w) {
    clb_v2w *v = w->v2;
    if (v->n_in == 0) return COLIBRI_OK;
    batch_job bj = {v};
    if (v->pool && v->n_in > 1) clb_pool_run(v->pool, encode_batch, &bj);
    else encode_batch(&bj, 0, 1);
    v2_chunk *k = &v->chunks[v->cur];
    for (int j = 0; j < v->n_in; j++) {
        if (v->status[j]) return v->status[j];
        int rc = clb_ct_pwrite(w->fd, v->out[j], v->out_len[j], w->data_offset + v->pos, w->tmp_path);
        if (rc) return rc;
        v->data_crc = clb_ct_crc(v->data_crc, v->out[j], v->out_len[j]);
        k->crc = clb_ct_crc(k->crc, v->out[j], v->out_len[j]);
        if (k->n_seg == k->cap_seg) {
            int nc = k->cap_seg ? 2 * k->cap_seg : 8;
            uint64_t *ns = clb_realloc(k->segs, (size_t)nc * sizeof *ns);
            if (!ns) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
            k->segs = ns;
            k->cap_seg = nc;
        }
        k->segs[k->n_seg++] = v->out_len[j];
        v->pos += v->out_len[j];
        v->in_len[j] = 0;
    }
    v->seg0 += v->n_in;
    v->n_in = 0;
    return COLIBRI_OK;
}

/* Appends plain bytes (NULL: zeros) to the current chunk's stream. */
static int feed(clb_cwriter *w, const uint8_t *p, uint64_t len) {
    clb_v2w *v = w->v2;
    const uint32_t seg = v->enc.seg_size;
    while (len > 0) {
        if (v->n_in < v->n_threads && v->in_len[v->n_in] == seg) v->n_in++;
        if (v->n_in == v->n_threads) {
            int rc = flush_batch(w);
            if (rc) return rc;
        }
        uint8_t *dst = v->in[v->n_in] + v->in_len[v->n_in];
        const uint64_t room = seg - v->in_len[v->n_in], n = CLB_MIN(room, len);
        if (p) memcpy(dst, p, (size_t)n);
        else memset(dst, 0, (size_t)n);
        v->in_len[v->n_in] += (size_t)n;
        v->cur_plain += n;
        if (p) p += n;
        len -= n;
    }
    return COLIBRI_OK;
}

static int start_chunk(clb_cwriter *w, int ci) {
    clb_v2w *v = w->v2;
    v2_chunk *k = &v->chunks[ci];
    static const uint8_t zeros[CLB_CONTAINER_DATA_ALIGN];
    const uint64_t at = clb_align_up(v->pos, k->expert ? CLB_CONTAINER_DATA_ALIGN : CLB_CONTAINER_TENSOR_ALIGN);
    v->data_crc = clb_ct_crc(v->data_crc, zeros, at - v->pos); /* the gap reads as zeros: never written */
    v->pos = at;
    k->offset = at;
    v->cur = ci;
    v->cur_plain = 0;
    v->seg0 = 0;
    v->n_in = 0;
    return COLIBRI_OK;
}

static int end_chunk(clb_cwriter *w) {
    clb_v2w *v = w->v2;
    if (v->n_in < v->n_threads && v->in_len[v->n_in] > 0) v->n_in++;
    int rc = flush_batch(w);
    if (rc) return rc;
    if (v->cur_plain != v->chunks[v->cur].plain)
        return clb_err(COLIBRI_ERR_INTERNAL, "%s: chunk %d got %llu of %llu plain bytes", w->path, v->cur,
                       (unsigned long long)v->cur_plain, (unsigned long long)v->chunks[v->cur].plain);
    v->cur = -1;
    return COLIBRI_OK;
}

int clb_ct_v2_write(clb_cwriter *w, int i, const uint8_t *data, uint64_t len) {
    clb_v2w *v = w->v2;
    while (v->next < w->n && w->written[v->order[v->next]] == w->t[v->order[v->next]].size) v->next++;
    if (v->next >= w->n || v->order[v->next] != i)
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s' written out of file order (an encoded file is written in order)",
                       w->path, w->t[i].name);
    const int ci = v->chunk_of[i];
    v2_chunk *k = &v->chunks[ci];
    int rc;
    if (v->cur != ci && (rc = start_chunk(w, ci))) return rc;
    clb_tensor *t = &w->t[i];
    const uint64_t at = t->offset - k->start; /* where the tensor starts in the chunk */
    if (w->written[i] == 0 && v->cur_plain < at && (rc = feed(w, NULL, at - v->cur_plain))) return rc;
    if ((rc = feed(w, data, len))) return rc;
    t->crc32 = clb_ct_crc(t->crc32, data, len);
    w->written[i] += len;
    if (w->written[i] == t->size && v->order[k->first + k->count - 1] == i) return end_chunk(w);
    return COLIBRI_OK;
}

uint64_t clb_ct_v2_data_bytes(const clb_cwriter *w) { return w->v2 ? w->v2->pos : 0; }

static int cmp_offset(const void *a, const void *b, void *ctx) {
    const clb_tensor *t = ctx;
    const uint64_t x = t[*(const int *)a].offset, y = t[*(const int *)b].offset;
    return (x > y) - (x < y);
}

int clb_ct_v2_writer_init(clb_cwriter *w, const clb_cw_encoding *enc) {
    clb_v2w *v = clb_calloc(1, sizeof *v);
    if (!v) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    w->v2 = v;
    v->enc = *enc;
    clb_wipe(v->enc.key, sizeof v->enc.key);
    v->cur = -1;
    if (enc->codec < CLB_CODEC_NONE || enc->codec > CLB_CODEC_ZLIB)
        return clb_err(COLIBRI_ERR_ARG, "%s: unknown codec %d", w->path, enc->codec);
    if (!v->enc.seg_size) v->enc.seg_size = CLB_SEG_DEFAULT;
    if (v->enc.seg_size < CLB_SEG_MIN || v->enc.seg_size > CLB_SEG_MAX || (v->enc.seg_size & (v->enc.seg_size - 1)))
        return clb_err(COLIBRI_ERR_ARG, "%s: segment size %u is not a power of two in [%u, %u]", w->path,
                       v->enc.seg_size, CLB_SEG_MIN, CLB_SEG_MAX);
    v->n_threads = CLB_MAX(1, CLB_MIN(enc->n_threads, 64));
    if (enc->encrypt) {
        int rc = COLIBRI_OK;
        if (enc->test_salt) memcpy(v->salt, enc->test_salt, sizeof v->salt);
        else rc = clb_random_bytes(v->salt, sizeof v->salt);
        if (!rc) rc = clb_keys_derive(enc->key, v->salt, &v->keys);
        if (rc) return rc;
    }
    /* chunks from the version 1 layout: a dense tensor each, an expert's tensors together */
    const int n = w->n;
    v->order = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *v->order);
    v->chunk_of = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *v->chunk_of);
    v->chunks = clb_calloc((size_t)(n > 0 ? n : 1), sizeof *v->chunks);
    if (!v->order || !v->chunk_of || !v->chunks) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    for (int i = 0; i < n; i++) v->order[i] = i;
    qsort_r(v->order, (size_t)n, sizeof *v->order, cmp_offset, w->t);
    for (int j = 0; j < n; j++) {
        const clb_tensor *t = &w->t[v->order[j]];
        const clb_tensor *p = j ? &w->t[v->order[j - 1]] : NULL;
        const bool same = p && t->expert >= 0 && p->expert == t->expert && p->layer == t->layer;
        if (!same) {
            v2_chunk *k = &v->chunks[v->n_chunks++];
            k->first = j;
            k->start = t->offset;
            k->expert = t->expert >= 0;
            k->split16 = !enc->no_split && enc->codec != CLB_CODEC_NONE;
        }
        v2_chunk *k = &v->chunks[v->n_chunks - 1];
        k->count++;
        k->plain = t->offset + t->size - k->start;
        if (t->dtype != CLB_DT_F16 && t->dtype != CLB_DT_BF16) k->split16 = false;
        v->chunk_of[v->order[j]] = v->n_chunks - 1;
    }
    for (int ci = 0; ci < v->n_chunks; ci++) { /* associated data, as the reader builds it */
        v2_chunk *k = &v->chunks[ci];
        size_t len = 8;
        for (int j = 0; j < k->count; j++) len += 4 + strlen(w->t[v->order[k->first + j]].name);
        if (!(k->aad = clb_malloc(len))) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
        size_t p = 0;
        for (int j = 0; j < k->count; j++) {
            const char *nm = w->t[v->order[k->first + j]].name;
            clb_wr_u32(k->aad + p, (uint32_t)strlen(nm));
            memcpy(k->aad + p + 4, nm, strlen(nm));
            p += 4 + strlen(nm);
        }
        clb_wr_u64(k->aad + p, k->plain);
        k->aad_len = p + 8;
    }
    const size_t bound = clb_codec_bound(enc->codec, enc->encrypt, v->enc.seg_size);
    v->codecs = clb_calloc((size_t)v->n_threads, sizeof *v->codecs);
    v->in = clb_calloc((size_t)v->n_threads, sizeof *v->in);
    v->out = clb_calloc((size_t)v->n_threads, sizeof *v->out);
    v->in_len = clb_calloc((size_t)v->n_threads, sizeof *v->in_len);
    v->out_len = clb_calloc((size_t)v->n_threads, sizeof *v->out_len);
    v->status = clb_calloc((size_t)v->n_threads, sizeof *v->status);
    if (!v->codecs || !v->in || !v->out || !v->in_len || !v->out_len || !v->status)
        return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    for (int i = 0; i < v->n_threads; i++) {
        v->codecs[i] = clb_codec_new(enc->codec, enc->level, v->keys, v->enc.seg_size);
        v->in[i] = clb_alloc_aligned(v->enc.seg_size);
        v->out[i] = clb_alloc_aligned(bound);
        if (!v->codecs[i] || !v->in[i] || !v->out[i]) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    }
    if (v->n_threads > 1 && !(v->pool = clb_pool_create(v->n_threads)))
        return clb_err(COLIBRI_ERR_NOMEM, "%s: cannot start %d encoding threads", w->path, v->n_threads);
    w->data_offset = CLB_CONTAINER_DATA_ALIGN;
    w->fd = open(w->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return clb_err(COLIBRI_ERR_IO, "%s: %s", w->tmp_path, strerror(errno));
    w->created = true;
    return COLIBRI_OK;
}

/* The clear JSON: format, version, encoding, chunks, and (clear files) the model. */
static cJSON *clear_json(const clb_cwriter *w, const cJSON *model) {
    const clb_v2w *v = w->v2;
    cJSON *root = cJSON_CreateObject(), *enc, *arr;
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", "colibri");
    cJSON_AddNumberToObject(root, "version", CLB_CONTAINER_VERSION_ENC);
    if (!(enc = cJSON_AddObjectToObject(root, "encoding"))) goto fail;
    cJSON_AddStringToObject(enc, "compression", clb_codec_name(v->enc.codec));
    if (v->enc.codec != CLB_CODEC_NONE) cJSON_AddNumberToObject(enc, "level", v->enc.level);
    cJSON_AddNumberToObject(enc, "segment_bytes", v->enc.seg_size);
    cJSON_AddStringToObject(enc, "encryption", v->keys ? "aes-256-gcm" : "none");
    if (v->keys) {
        cJSON_AddStringToObject(enc, "kdf", "hkdf-sha256");
        cJSON *what = cJSON_AddArrayToObject(enc, "encrypted");
        static const char *const parts[] = {"config", "tokenizer", "tensors", "data"};
        for (size_t i = 0; what && i < CLB_ARRAY_LEN(parts); i++) cJSON_AddItemToArray(what, cJSON_CreateString(parts[i]));
    }
    if (!(arr = cJSON_AddArrayToObject(root, "chunks"))) goto fail;
    for (int ci = 0; ci < v->n_chunks; ci++) {
        const v2_chunk *k = &v->chunks[ci];
        cJSON *e = cJSON_CreateObject(), *segs;
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", k->crc);
        if (!e) goto fail;
        cJSON_AddItemToArray(arr, e);
        cJSON_AddNumberToObject(e, "offset", (double)k->offset);
        cJSON_AddNumberToObject(e, "plain", (double)k->plain);
        cJSON_AddStringToObject(e, "crc32", hex);
        cJSON_AddBoolToObject(e, "split16", k->split16);
        if (!(segs = cJSON_AddArrayToObject(e, "segments"))) goto fail;
        for (int s = 0; s < k->n_seg; s++) cJSON_AddItemToArray(segs, cJSON_CreateNumber((double)k->segs[s]));
    }
    if (model)
        for (const cJSON *it = model->child; it; it = it->next)
            cJSON_AddItemReferenceToObject(root, it->string, (cJSON *)it);
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

/* config, tokenizer and the tensor table with each tensor's chunk and offset in it. */
static cJSON *model_json(const clb_cwriter *w) {
    const clb_v2w *v = w->v2;
    cJSON *root = cJSON_CreateObject(), *arr;
    if (!root) return NULL;
    cJSON_AddItemReferenceToObject(root, "config", w->config);
    if (w->tokenizer) cJSON_AddItemReferenceToObject(root, "tokenizer", w->tokenizer);
    if (!(arr = cJSON_AddArrayToObject(root, "tensors"))) goto fail;
    for (int i = 0; i < w->n; i++) {
        const v2_chunk *k = &v->chunks[v->chunk_of[i]];
        cJSON *e = clb_ct_tensor_json(&w->t[i], true, w->t[i].offset - k->start, v->chunk_of[i]);
        if (!e) goto fail;
        cJSON_AddItemToArray(arr, e);
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

int clb_ct_v2_finish(clb_cwriter *w) {
    clb_v2w *v = w->v2;
    int rc;
    if (v->cur >= 0 && (rc = end_chunk(w))) return rc;
    w->data_size = v->pos;
    uint32_t crc;
    if ((rc = clb_ct_readback(w, v->data_crc, &crc))) return rc;
    cJSON *model = model_json(w), *clear = clear_json(w, v->keys ? NULL : model);
    char *ctext = clear ? cJSON_PrintUnformatted(clear) : NULL, *mtext = NULL;
    if (v->keys && model) mtext = cJSON_PrintUnformatted(model);
    cJSON_Delete(clear);
    cJSON_Delete(model);
    uint8_t *sealed = NULL, *meta = NULL;
    size_t sealed_len = 0, meta_len = 0;
    if (!ctext || (v->keys && !mtext)) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory rendering metadata", w->path);
        goto done;
    }
    const size_t clen = strlen(ctext), mlen = mtext ? strlen(mtext) : 0;
    meta_len = 8 + clen + (v->keys ? 8 + mlen + CLB_TAG_BYTES : 0);
    const uint64_t meta_off = w->data_offset + w->data_size;
    uint8_t h[CLB_CONTAINER_HEADER_SIZE] = {0};
    memcpy(h + H_MAGIC, CLB_CONTAINER_MAGIC, 8);
    clb_wr_u32(h + H_VERSION, CLB_CONTAINER_VERSION_ENC);
    clb_wr_u32(h + H_FLAGS, (v->enc.codec != CLB_CODEC_NONE ? CLB_CONTAINER_FLAG_COMPRESSED : 0u) |
                                (v->keys ? CLB_CONTAINER_FLAG_ENCRYPTED : 0u));
    clb_wr_u64(h + H_META_OFF, meta_off);
    clb_wr_u64(h + H_META_SIZE, meta_len);
    clb_wr_u64(h + H_DATA_OFF, w->data_offset);
    clb_wr_u64(h + H_DATA_SIZE, w->data_size);
    clb_wr_u64(h + H_COUNT, (uint64_t)v->n_chunks);
    clb_wr_u32(h + H_ALIGN, CLB_CONTAINER_DATA_ALIGN);
    clb_wr_u32(h + H_DATA_CRC, crc);
    clb_wr_u32(h + H_SEG_SIZE, v->enc.seg_size);
    h[H_CODEC] = (uint8_t)v->enc.codec;
    if (v->keys) {
        memcpy(h + H_SALT, v->salt, CLB_SALT_BYTES);
        memcpy(h + H_KEY_CHECK, v->keys->key_check, CLB_KEY_CHECK_BYTES);
    }
    if (!(meta = clb_malloc(meta_len))) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
        goto done;
    }
    clb_wr_u64(meta, clen);
    memcpy(meta + 8, ctext, clen);
    if (v->keys) { /* seal the model JSON; the header and the clear JSON are its associated data */
        size_t aad_len;
        uint8_t *aad = seal_aad(h, (const uint8_t *)ctext, clen, &aad_len);
        clb_codec *k = clb_codec_new(CLB_CODEC_NONE, 0, v->keys, 0);
        sealed = meta + 8 + clen + 8;
        const clb_seg_ref r = {.chunk = CLB_SEAL_CHUNK, .seg = 0, .aad = aad, .aad_len = aad_len};
        rc = aad && k ? clb_codec_encode(k, &r, (const uint8_t *)mtext, mlen, sealed, &sealed_len)
                      : clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
        clb_codec_free(k);
        clb_free(aad);
        if (rc) goto done;
        clb_wr_u64(meta + 8 + clen, sealed_len);
    }
    clb_wr_u32(h + H_META_CRC, clb_ct_crc(0, meta, meta_len));
    clb_wr_u32(h + H_HEADER_CRC, clb_ct_crc(0, h, H_HEADER_CRC));
    if ((rc = clb_ct_pwrite(w->fd, meta, meta_len, meta_off, w->tmp_path))) goto done;
    rc = clb_ct_commit(w, h);
done:
    if (mtext) clb_wipe(mtext, strlen(mtext));
    cJSON_free(ctext);
    cJSON_free(mtext);
    clb_free(meta);
    return rc;
}

void clb_ct_v2_writer_free(clb_cwriter *w) {
    clb_v2w *v = w->v2;
    if (!v) return;
    clb_pool_free(v->pool);
    for (int i = 0; v->codecs && i < v->n_threads; i++) clb_codec_free(v->codecs[i]);
    for (int i = 0; v->in && i < v->n_threads; i++) {
        if (v->in[i]) clb_wipe(v->in[i], v->enc.seg_size);
        clb_free_aligned(v->in[i]);
    }
    for (int i = 0; v->out && i < v->n_threads; i++) clb_free_aligned(v->out[i]);
    for (int ci = 0; v->chunks && ci < v->n_chunks; ci++) {
        clb_free(v->chunks[ci].segs);
        clb_free(v->chunks[ci].aad);
    }
    clb_free(v->codecs);
    clb_free(v->in);
    clb_free(v->out);
    clb_free(v->in_len);
    clb_free(v->out_len);
    clb_free(v->status);
    clb_free(v->chunks);
    clb_free(v->order);
    clb_free(v->chunk_of);
    clb_keys_free(v->keys);
    clb_free(v);
    w->v2 = NULL;
}
