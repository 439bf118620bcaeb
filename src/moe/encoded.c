/* encoded.c — routed experts of an encoded .colibri (compressed and/or encrypted chunks,
 * container v2) behind the expert store's read path.
 *
 * An expert is one chunk: its segments are read and decoded (authenticated first when the
 * file is encrypted) straight into the expert's pool slot in the bounded mode, one load
 * piece per segment, so several I/O threads decode one expert together; in the unbounded
 * mode every expert is decoded once at configure into a resident copy. Either way the
 * kernels see the plain bytes, at the same offsets as in a plain file's expert. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/platform.h"
#include "format/codec.h"
#include "format/container.h"
#include "model/source.h"
#include "moe/store_impl.h"

static bool any_encoded(const clb_expert_store *s) {
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++)
        if (s->ex[i].present && s->ex[i].chunk >= 0) return true;
    return false;
}

static void point_at(clb_st_expert *x, uint8_t *base) {
    clb_weight *ws[3] = {&x->w.gate, &x->w.up, &x->w.down};
    for (int k = 0; k < 3; k++) ws[k]->data = base + x->t[k].data_off;
}

typedef struct decode_ctx {
    clb_expert_store *s;
    int ith, nth;
    int rc;
    char err[320];
} decode_ctx;

/* unbounded: decodes every nth encoded expert (from ith) into the resident copy */
static void *decode_share(void *arg) {
    decode_ctx *d = arg;
    clb_expert_store *s = d->s;
    const clb_container *ct = s->ct;
    clb_codec *k = clb_container_codec(ct);
    uint8_t *scratch = clb_alloc_aligned((size_t)clb_container_max_seg(ct) + 64);
    if (!k || !scratch) {
        d->rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory for a decoder");
        snprintf(d->err, sizeof d->err, "%s", clb_last_error());
    }
    int n = 0;
    for (size_t i = 0; !d->rc && i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        clb_st_expert *x = &s->ex[i];
        if (!x->present || x->away || x->chunk < 0 || n++ % d->nth != d->ith) continue;
        uint8_t *dst = (uint8_t *)x->w.gate.data - x->t[0].data_off;
        if ((d->rc = clb_container_read_chunk(ct, x->chunk, dst, scratch, k)))
            snprintf(d->err, sizeof d->err, "%s", clb_last_error());
    }
    clb_codec_free(k);
    clb_free_aligned(scratch);
    return NULL;
}

static int decode_all(clb_expert_store *s, const char *path) {
    uint64_t total = 0;
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        const clb_st_expert *x = &s->ex[i];
        if (x->present && !x->away && x->chunk >= 0) total += clb_align_up(s->ct->chunks[x->chunk].plain, CLB_STORE_PAGE);
    }
    if (!clb_copy_fits(total))
        return clb_err(COLIBRI_ERR_NOMEM,
                       "%s: the decoded experts (%.2f GiB) do not fit in the available memory: give a memory budget "
                       "(--mem-budget) to decode them into a bounded pool on demand",
                       path, total / 1073741824.0);
    if (total == 0) return COLIBRI_OK; /* every encoded expert is another rank's */
    if (!(s->dec_copy = clb_map_weights(total)))
        return clb_err(COLIBRI_ERR_NOMEM, "%s: cannot map %llu bytes for the decoded experts", path,
                       (unsigned long long)total);
    s->dec_copy_bytes = total;
    uint64_t off = 0;
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++) {
        clb_st_expert *x = &s->ex[i];
        if (!x->present || x->away || x->chunk < 0) continue;
        point_at(x, s->dec_copy + off);
        off += clb_align_up(s->ct->chunks[x->chunk].plain, CLB_STORE_PAGE);
    }
    decode_ctx ctx[8];
    pthread_t th[8];
    const int n_th = CLB_MAX(1, CLB_MIN(8, clb_cpu_count()));
    bool started[8] = {false};
    for (int i = 0; i < n_th; i++) {
        ctx[i] = (decode_ctx){.s = s, .ith = i, .nth = n_th};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, decode_share, &ctx[i]) == 0;
    }
    decode_share(&ctx[0]);
    for (int i = 1; i < n_th; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else decode_share(&ctx[i]); /* a thread that could not start: its share here */
    }
    for (int i = 0; i < n_th; i++)
        if (ctx[i].rc) return clb_err(ctx[i].rc, "%s", ctx[i].err);
    return COLIBRI_OK;
}

static int n_decoders(int io_threads) { return CLB_MAX(io_threads, 0) + 4; }
static uint64_t stage_bytes_of(const clb_container *ct) {
    return clb_align_up(clb_container_max_seg(ct), CLB_STORE_PAGE) + 2 * CLB_STORE_PAGE;
}

uint64_t clb_store_decoder_bytes(const clb_source *src, int io_threads) {
    const clb_container *ct = clb_source_container(src);
    if (!ct || ct->version != CLB_CONTAINER_VERSION_ENC) return 0;
    const uint64_t scratch = ct->codec != CLB_CODEC_NONE ? clb_container_max_plain_seg(ct) : 0; /* the codec's */
    return (uint64_t)n_decoders(io_threads) * (stage_bytes_of(ct) + scratch);
}

int clb_store_setup_encoded(clb_expert_store *s, const clb_source *src) {
    if (!any_encoded(s)) return COLIBRI_OK;
    s->ct = clb_source_container(src);
    if (!s->bounded) return decode_all(s, src->path);
    /* bounded: one decoder per I/O thread and a few for the threads that wait in acquire */
    s->n_dec = n_decoders(s->cfg.io_threads);
    s->dec = clb_calloc((size_t)s->n_dec, sizeof *s->dec);
    s->stage = clb_calloc((size_t)s->n_dec, sizeof *s->stage);
    s->dec_busy = clb_calloc((size_t)s->n_dec, sizeof *s->dec_busy);
    if (!s->dec || !s->stage || !s->dec_busy) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int max_seg = 1;
    for (size_t i = 0; i < (size_t)s->n_layer * (size_t)s->n_expert; i++)
        if (s->ex[i].present && s->ex[i].chunk >= 0) max_seg = CLB_MAX(max_seg, s->ct->chunks[s->ex[i].chunk].n_seg);
    for (int i = 0; i < s->n_slots; i++)
        if (!(s->jobs[i].seg_crc = clb_calloc((size_t)max_seg, sizeof(uint32_t))))
            return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    /* a stored segment, plus a page either side for O_DIRECT's alignment */
    s->stage_bytes = stage_bytes_of(s->ct);
    for (int i = 0; i < s->n_dec; i++) {
        s->dec[i] = clb_container_codec(s->ct);
        s->stage[i] = clb_map_weights(s->stage_bytes); /* page aligned */
        if (!s->dec[i] || !s->stage[i]) return clb_err(COLIBRI_ERR_NOMEM, "out of memory for expert decoders");
    }
    return COLIBRI_OK;
}

int clb_store_check_chunk(const clb_expert_store *s, const clb_st_expert *x, const uint32_t *seg_crc) {
    const clb_chunk *ch = &s->ct->chunks[x->chunk];
    if (s->ct->encrypted) return COLIBRI_OK; /* every segment was authenticated */
    uint32_t crc = 0;
    for (int k = 0; k < ch->n_seg; k++) crc = clb_crc32_combine(crc, seg_crc[k], ch->seg[k + 1] - ch->seg[k]);
    if (crc != ch->crc32)
        return clb_err(COLIBRI_ERR_CORRUPT, "%s: %s is corrupt (stored bytes crc32 %08x, expected %08x)", s->ct->map.path,
                       ch->label, crc, ch->crc32);
    return COLIBRI_OK;
}

void clb_store_free_encoded(clb_expert_store *s) {
    for (int i = 0; s->jobs && i < s->n_slots; i++) clb_free(s->jobs[i].seg_crc);
    for (int i = 0; s->dec && i < s->n_dec; i++) clb_codec_free(s->dec[i]);
    for (int i = 0; s->stage && i < s->n_dec; i++) clb_unmap(s->stage[i], s->stage_bytes);
    clb_free(s->dec);
    clb_free(s->stage);
    clb_free(s->dec_busy);
    clb_unmap(s->dec_copy, s->dec_copy_bytes);
}

int clb_store_enc_pieces(const clb_expert_store *s, const clb_st_expert *x) { return s->ct->chunks[x->chunk].n_seg; }

int clb_store_take_decoder(clb_expert_store *s) {
    for (int i = 0; i < s->n_dec; i++)
        if (!s->dec_busy[i]) {
            s->dec_busy[i] = true;
            return i;
        }
    return -1;
}

/* Reads segment seg of x's chunk with decoder d (mu not held) and decodes it into the slot
   at base. Returns the stored bytes read through *nread. */
int clb_store_read_segment(clb_expert_store *s, const clb_st_expert *x, int seg, uint8_t *base, int d,
                           uint64_t *nread, uint32_t *stored_crc) {
    const clb_container *ct = s->ct;
    const clb_chunk *ch = &ct->chunks[x->chunk];
    const uint64_t off = ch->offset + ch->seg[seg], len = ch->seg[seg + 1] - ch->seg[seg];
    const bool direct = s->cfg.direct_io && x->t[0].dfd >= 0;
    const uint64_t a0 = direct ? off / CLB_STORE_PAGE * CLB_STORE_PAGE : off;
    const uint64_t a1 = direct ? clb_align_up(off + len, CLB_STORE_PAGE) : off + len;
    uint8_t *buf = s->stage[d];
    const int bfd = x->t[0].rfd >= 0 ? x->t[0].rfd : x->t[0].fd; /* the buffered descriptor */
    int fd = direct ? x->t[0].dfd : bfd;
    uint64_t got = 0;
    *nread = 0;
    while (got < a1 - a0) {
        ssize_t r = pread(fd, buf + got, (size_t)(a1 - a0 - got), (off_t)(a0 + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && direct && errno == EINVAL && fd != bfd) {
            fd = bfd; /* this file system refuses O_DIRECT here after all: buffered */
            continue;
        }
        if (r > 0 && fd == bfd && s->cfg.drop_cache) /* decoded into the slot: the cache copy goes */
            (void)posix_fadvise(fd, (off_t)(a0 + got), (off_t)r, POSIX_FADV_DONTNEED);
        if (r < 0) return clb_err(COLIBRI_ERR_IO, "%s: expert read at offset %llu: %s", ct->map.path,
                                  (unsigned long long)(a0 + got), strerror(errno));
        if (r == 0) break;
        got += (uint64_t)r;
    }
    if (got < off + len - a0)
        return clb_err(COLIBRI_ERR_IO, "%s: truncated: %s ends past the end of the file", ct->map.path,
                       ch->label ? ch->label : "a chunk");
    *nread = got;
    if (!ct->encrypted) *stored_crc = clb_crc32(0, buf + (off - a0), (size_t)len);
    return clb_container_decode_seg(ct, x->chunk, seg, buf + (off - a0), len, base + (uint64_t)seg * ct->seg_size,
                                    s->dec[d]);
}
