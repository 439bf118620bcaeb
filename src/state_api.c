/* state_api.c — context shifts and saved states of a sequence (colibri.h):
 * colibri_seq_shift / colibri_seq_set_keep / colibri_seq_tokens, colibri_state_save / _load.
 *
 * State file (little-endian):
 *   "CLBSTATE", u32 version (1), u32 crc32 of the model's configuration (its canonical JSON),
 *   u32 crc32 of a fingerprint of its weights (the first and last 64 KiB of the embeddings,
 *   the final norm, every layer's attention norm), u32 n_layer, u32 K type, u32 V type,
 *   u32 n_past;
 *   the n_past token ids (i32);
 *   per layer: u32 lo (the first position stored), u32 heads, u32 K row bytes, u32 V row
 *   bytes (0: V read from K, the MLA latent), then per head the K rows of positions
 *   [lo, n_past), then per head their V rows;
 *   u32 crc32 of everything before it.
 * Rows are stored per position, not per slot, so an engine with other ring sizes (another
 * n_batch) or max_seq_len can load them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "core/common.h"
#include "engine.h"

/* ---- context shift ---- */

int clb_engine_shift(colibri_engine_t *e, int s, int32_t keep, int32_t d) {
    const int32_t n = e->seq_past[s];
    if (keep < 0 || d <= 0 || (int64_t)keep + d > n)
        return clb_err(COLIBRI_ERR_ARG, "cannot shift sequence %d of %d tokens: keep %d, discard %d", s, n, keep, d);
    clb_kv_shift(&e->attn.kv, &e->rope, e->hp->n_rot, s, n, keep, d);
    int32_t *tok = e->seq_tokens + (int64_t)s * e->max_seq;
    memmove(tok + keep, tok + keep + d, sizeof(int32_t) * (size_t)(n - keep - d));
    e->seq_past[s] = n - d;
    e->seq_save[s] = CLB_MAX(e->seq_save[s] - d, keep); /* colibri_decode's position before the call */
    e->stats.ctx_shifts++;
    return COLIBRI_OK;
}

int clb_engine_make_room(colibri_engine_t *e, int s, int32_t cnt) {
    const int32_t n = e->seq_past[s], keep = CLB_MIN(e->seq_keep[s], n);
    const int32_t need = n + cnt - e->max_seq, d = CLB_MAX((n - keep) / 2, need);
    if (need <= 0) return COLIBRI_OK;
    if ((int64_t)keep + d > n)
        return clb_err(COLIBRI_ERR_RANGE,
                       "sequence %d: %d tokens after the %d kept would exceed max_seq_len %d even after a context shift",
                       s, cnt, keep, e->max_seq);
    return clb_engine_shift(e, s, keep, d);
}

static int check_seq(const colibri_engine_t *e, int32_t seq) {
    if (!e) return clb_err(COLIBRI_ERR_ARG, "NULL engine");
    if (seq < 0 || seq >= e->n_seq)
        return clb_err(COLIBRI_ERR_ARG, "sequence %d out of range (the engine holds %d)", seq, e->n_seq);
    return COLIBRI_OK;
}

int colibri_seq_shift(colibri_engine_t *e, int32_t seq, int32_t n_keep, int32_t n_discard) {
    int rc = check_seq(e, seq);
    return rc ? rc : clb_engine_shift(e, seq, n_keep, n_discard);
}

int colibri_seq_set_keep(colibri_engine_t *e, int32_t seq, int32_t n_keep) {
    int rc = check_seq(e, seq);
    if (rc) return rc;
    if (n_keep < 0 || n_keep >= e->max_seq)
        return clb_err(COLIBRI_ERR_ARG, "n_keep %d out of range (max_seq_len %d)", n_keep, e->max_seq);
    e->seq_keep[seq] = n_keep;
    return COLIBRI_OK;
}

int colibri_seq_tokens(const colibri_engine_t *e, int32_t seq, int32_t *ids, size_t cap, size_t *n) {
    int rc = check_seq(e, seq);
    if (rc) return rc;
    const size_t have = (size_t)e->seq_past[seq];
    if (n) *n = have;
    if (cap < have || (have && !ids))
        return clb_err(COLIBRI_ERR_ARG, "buffer of %zu ids, sequence %d holds %zu", cap, seq, have);
    if (have) memcpy(ids, e->seq_tokens + (int64_t)seq * e->max_seq, sizeof(int32_t) * have);
    return COLIBRI_OK;
}

/* ---- saved states ---- */

#define STATE_MAGIC "CLBSTATE"
enum { STATE_VERSION = 1, HEADER_WORDS = 7 };

/* crc32 of the configuration, crc32 of the weight fingerprint */
static void model_identity(const colibri_engine_t *e, uint32_t id[2]) {
    cJSON *j = clb_hparams_to_json(e->hp);
    char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
    id[0] = (uint32_t)crc32(0L, (const Bytef *)(txt ? txt : ""), (uInt)(txt ? strlen(txt) : 0));
    cJSON_free(txt);
    cJSON_Delete(j);
    const clb_model *m = e->model;
    const uint64_t eb = m->tok_embd.row_bytes * (uint64_t)m->tok_embd.rows, part = CLB_MIN(eb, (uint64_t)65536);
    uLong c = crc32(0L, (const Bytef *)m->tok_embd.data, (uInt)part);
    c = crc32(c, (const Bytef *)m->tok_embd.data + (eb - part), (uInt)part);
    c = crc32(c, (const Bytef *)m->output_norm.data, (uInt)(m->output_norm.cols * sizeof(float)));
    for (int l = 0; l < e->hp->n_layer; l++)
        c = crc32(c, (const Bytef *)m->layers[l].attn_norm.data, (uInt)(m->layers[l].attn_norm.cols * sizeof(float)));
    /* the rotation the cached keys carry (LongRoPE's set depends on max_seq_len) */
    c = crc32(c, (const Bytef *)e->rope.inv_freq, (uInt)((size_t)(e->rope.n_rot / 2) * sizeof(double)));
    c = crc32(c, (const Bytef *)&e->rope.attn_factor, (uInt)sizeof e->rope.attn_factor);
    id[1] = (uint32_t)c;
}

typedef struct sfile {
    FILE *f;
    const char *path;
    uLong crc;
    int rc;
} sfile;

static void put(sfile *s, const void *p, size_t n) {
    if (s->rc || !n) return;
    if (fwrite(p, 1, n, s->f) != n)
        s->rc = clb_err(COLIBRI_ERR_IO, "%s: cannot write the state: %s", s->path, strerror(errno));
    s->crc = crc32(s->crc, p, (uInt)n);
}
static void put32(sfile *s, uint32_t v) {
    uint8_t b[4];
    clb_wr_u32(b, v);
    put(s, b, 4);
}

int colibri_state_save(colibri_engine_t *e, int32_t seq, const char *path) {
    int rc = check_seq(e, seq);
    if (rc) return rc;
    if (!path) return clb_err(COLIBRI_ERR_ARG, "NULL path");
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return clb_err(COLIBRI_ERR_ARG, "path too long");
    sfile s = {.f = fopen(tmp, "wb"), .path = tmp};
    if (!s.f) return clb_err(COLIBRI_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    const clb_kv_cache *kv = &e->attn.kv;
    const int32_t n = e->seq_past[seq];
    uint32_t id[2];
    model_identity(e, id);
    put(&s, STATE_MAGIC, 8);
    const uint32_t hdr[HEADER_WORDS] = {STATE_VERSION, id[0], id[1], (uint32_t)kv->n_layer, (uint32_t)kv->k_type,
                                        (uint32_t)kv->v_type, (uint32_t)n};
    for (int i = 0; i < HEADER_WORDS; i++) put32(&s, hdr[i]);
    for (int32_t i = 0; i < n; i++) put32(&s, (uint32_t)e->seq_tokens[(int64_t)seq * e->max_seq + i]);
    for (int l = 0; l < kv->n_layer; l++) {
        const clb_kv_layer *L = &kv->layers[l];
        const int32_t lo = CLB_MIN(kv->lo[(int64_t)seq * kv->n_layer + l], n);
        put32(&s, (uint32_t)lo);
        put32(&s, (uint32_t)L->n_head);
        put32(&s, (uint32_t)L->k_row);
        put32(&s, L->v_in_k ? 0 : (uint32_t)L->v_row);
        for (int h = 0; h < L->n_head; h++)
            for (int32_t p = lo; p < n; p++) put(&s, clb_kv_krow(kv, seq, l, h, p), L->k_row);
        for (int h = 0; h < L->n_head && !L->v_in_k; h++)
            for (int32_t p = lo; p < n; p++) put(&s, clb_kv_vrow(kv, seq, l, h, p), L->v_row);
    }
    const uint32_t crc = (uint32_t)s.crc;
    put32(&s, crc);
    if (fclose(s.f) && !s.rc) s.rc = clb_err(COLIBRI_ERR_IO, "%s: cannot write the state: %s", tmp, strerror(errno));
    if (!s.rc && rename(tmp, path))
        s.rc = clb_err(COLIBRI_ERR_IO, "%s: cannot rename %s: %s", path, tmp, strerror(errno));
    if (s.rc) remove(tmp);
    return s.rc;
}

static int get(sfile *s, void *p, size_t n) {
    if (s->rc) return s->rc;
    if (n && fread(p, 1, n, s->f) != n)
        return s->rc = ferror(s->f) ? clb_err(COLIBRI_ERR_IO, "%s: cannot read: %s", s->path, strerror(errno))
                                    : clb_err(COLIBRI_ERR_FORMAT, "%s: truncated state file", s->path);
    s->crc = crc32(s->crc, p, (uInt)n);
    return COLIBRI_OK;
}
static uint32_t get32(sfile *s) {
    uint8_t b[4] = {0};
    get(s, b, 4);
    return clb_rd_u32(b);
}

/* Reads the header and checks it against the engine; the layer descriptions and rows follow. */
static int read_header(colibri_engine_t *e, sfile *s, uint32_t *n_past) {
    char magic[8];
    if (get(s, magic, 8)) return s->rc;
    if (memcmp(magic, STATE_MAGIC, 8)) return clb_err(COLIBRI_ERR_FORMAT, "%s: not a colibri state file", s->path);
    uint32_t h[HEADER_WORDS];
    for (int i = 0; i < HEADER_WORDS; i++) h[i] = get32(s);
    if (s->rc) return s->rc;
    if (h[0] != STATE_VERSION)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: state file version %u, this build reads %d", s->path, h[0], STATE_VERSION);
    uint32_t id[2];
    model_identity(e, id);
    const clb_kv_cache *kv = &e->attn.kv;
    if (h[1] != id[0] || h[3] != (uint32_t)kv->n_layer)
        return clb_err(COLIBRI_ERR_ARG, "%s: the state was saved with another model (its configuration differs)", s->path);
    if (h[2] != id[1])
        return clb_err(COLIBRI_ERR_ARG,
                       "%s: the state was saved with another model (same configuration, other weights or rotary "
                       "embedding: LongRoPE's set follows max_seq_len)",
                       s->path);
    if (h[4] != (uint32_t)kv->k_type || h[5] != (uint32_t)kv->v_type)
        return clb_err(COLIBRI_ERR_ARG, "%s: the state holds a %s/%s KV cache, this engine's is %s/%s (cache-type-k/v)",
                       s->path, clb_dtype_name((int)h[4]), clb_dtype_name((int)h[5]), clb_dtype_name(kv->k_type),
                       clb_dtype_name(kv->v_type));
    if (h[6] > (uint32_t)e->max_seq)
        return clb_err(COLIBRI_ERR_ARG, "%s: the state holds %u positions, max_seq_len is %d", s->path, h[6], e->max_seq);
    *n_past = h[6];
    return COLIBRI_OK;
}

/* Pass 1: every byte read and checked (header, layout, size, checksum) without touching the
   engine; pass 2 (fill) reads the rows into sequence seq. */
static int read_state(colibri_engine_t *e, sfile *s, int32_t seq, bool fill) {
    const clb_kv_cache *kv = &e->attn.kv;
    uint32_t n = 0;
    int rc = read_header(e, s, &n);
    if (rc) return rc;
    int32_t *tok = e->seq_tokens + (int64_t)seq * e->max_seq;
    for (uint32_t i = 0; i < n && !s->rc; i++) {
        const uint32_t t = get32(s);
        if (!s->rc && t >= (uint32_t)e->hp->n_vocab)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: token id %u out of range", s->path, t);
        if (fill) tok[i] = (int32_t)t;
    }
    uint8_t *row = (uint8_t *)kv->pad; /* one row in pass 1 */
    for (int l = 0; l < kv->n_layer && !s->rc; l++) {
        const clb_kv_layer *L = &kv->layers[l];
        const uint32_t lo = get32(s), nh = get32(s), kr = get32(s), vr = get32(s);
        if (s->rc) break;
        if (nh != (uint32_t)L->n_head || kr != L->k_row || vr != (L->v_in_k ? 0 : L->v_row))
            return clb_err(COLIBRI_ERR_ARG, "%s: layer %d of the state has another KV layout (an engine with another MLA mode?)",
                           s->path, l);
        if (lo > n) return clb_err(COLIBRI_ERR_FORMAT, "%s: layer %d: first position %u beyond %u", s->path, l, lo, n);
        /* a ring smaller than the saving engine's keeps the last positions */
        const uint32_t first = L->ring ? CLB_MAX(lo, n > (uint32_t)L->slots ? n - (uint32_t)L->slots : 0) : lo;
        for (int part = 0; part < (L->v_in_k ? 1 : 2) && !s->rc; part++)
            for (int h = 0; h < L->n_head && !s->rc; h++)
                for (uint32_t p = lo; p < n && !s->rc; p++) {
                    const uint64_t rb = part ? L->v_row : L->k_row;
                    uint8_t *dst = fill && p >= first ? (part ? clb_kv_vrow(kv, seq, l, h, p) : clb_kv_krow(kv, seq, l, h, p)) : row;
                    get(s, dst, rb);
                }
        if (fill) kv->lo[(int64_t)seq * kv->n_layer + l] = (int32_t)first;
    }
    if (s->rc) return s->rc;
    const uint32_t want = (uint32_t)s->crc, crc = get32(s);
    if (s->rc) return s->rc;
    if (crc != want) return clb_err(COLIBRI_ERR_CORRUPT, "%s: state file checksum mismatch (corrupt file)", s->path);
    uint8_t extra;
    if (fread(&extra, 1, 1, s->f) == 1) return clb_err(COLIBRI_ERR_FORMAT, "%s: trailing bytes after the state", s->path);
    if (fill) e->seq_past[seq] = (int32_t)n;
    return COLIBRI_OK;
}

int colibri_state_load(colibri_engine_t *e, int32_t seq, const char *path) {
    int rc = check_seq(e, seq);
    if (rc) return rc;
    if (!path) return clb_err(COLIBRI_ERR_ARG, "NULL path");
    sfile s = {.f = fopen(path, "rb"), .path = path};
    if (!s.f) return clb_err(COLIBRI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    rc = read_state(e, &s, seq, false);
    if (!rc) {
        rewind(s.f);
        s = (sfile){.f = s.f, .path = path};
        clb_kv_clear(&e->attn.kv, seq);
        rc = read_state(e, &s, seq, true);
        if (rc) { /* the file changed between the passes: the sequence starts over */
            e->seq_past[seq] = 0;
            clb_kv_clear(&e->attn.kv, seq);
        }
    }
    fclose(s.f);
    return rc;
}
