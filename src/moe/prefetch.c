/* prefetch.c — loading experts into pool slots on a small I/O thread pool.
 *
 * A load is a job on its slot: the expert's three tensors are read in CLB_STORE_CHUNK
 * pieces, so several threads read one expert in parallel (a virtual disk gives about twice
 * the bandwidth to four readers as to one). Threads take the next chunk of the most urgent
 * job (demand before lookahead, then first come first served). A thread waiting in acquire
 * reads chunks of its own job too instead of sleeping. With O_DIRECT, reads cover whole
 * pages (buffers, offsets and lengths 4 KiB aligned) and bypass the page cache; a buffered
 * read with cfg.drop_cache hands the pages it brought into the page cache back at once
 * (posix_fadvise DONTNEED): the pool holds the bytes, and a memory cgroup counts the cache. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

#include "core/common.h"
#include "core/platform.h"
#include "moe/store_impl.h"

/* One more descriptor of fd's file, opened once per distinct fd (kept in dfds as pairs
   (key, descriptor), key = 2 fd + random): O_DIRECT, or buffered with POSIX_FADV_RANDOM — its
   own readahead state, so that a buffered read brings in exactly the range asked for (the
   device's read_ahead_kb would otherwise fill the cache with the neighbouring experts, which
   DONTNEED of the range read leaves there). -1 when refused. */
static int open_desc(clb_expert_store *s, int fd, bool random) {
    if (fd < 0) return -1;
    const int key = 2 * fd + random;
    for (int i = 0; i < s->n_dfds; i++)
        if (s->dfds[2 * i] == key) return s->dfds[2 * i + 1];
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int dfd = open(path, O_RDONLY | O_CLOEXEC | (random ? 0 : O_DIRECT));
    if (dfd < 0) {
        if (random) return -1; /* the shared descriptor then: reads and DONTNEED work the same */
        clb_log(s->cfg.direct_quiet ? CLB_LOG_INFO : CLB_LOG_WARN, "O_DIRECT refused for descriptor %d (%s): %s", fd,
                strerror(errno), s->cfg.drop_cache ? "pread + POSIX_FADV_DONTNEED" : "buffered reads");
        return -1;
    }
    if (random) (void)posix_fadvise(dfd, 0, 0, POSIX_FADV_RANDOM);
    int *nd = clb_realloc(s->dfds, sizeof(int) * 2 * (size_t)(s->n_dfds + 1));
    if (!nd) {
        close(dfd);
        return -1;
    }
    s->dfds = nd;
    s->dfds[2 * s->n_dfds] = key;
    s->dfds[2 * s->n_dfds + 1] = dfd;
    s->n_dfds++;
    return dfd;
}

int clb_io_open_direct(clb_expert_store *s, int fd) { return open_desc(s, fd, false); }
int clb_io_open_random(clb_expert_store *s, int fd) { return open_desc(s, fd, true); }

static int chunks_of(const clb_st_tensor *t) { return (int)((t->read_len + CLB_STORE_CHUNK - 1) / CLB_STORE_CHUNK); }

void clb_io_begin_load(clb_expert_store *s, int xi, int slot, int prio) {
    clb_st_expert *x = &s->ex[xi];
    clb_st_job *j = &s->jobs[slot];
    x->state = ES_LOADING;
    x->slot = slot;
    x->err = 0;
    s->slot_owner[slot] = xi;
    j->expert = xi;
    j->prio = prio;
    j->seq = ++s->seq;
    j->n_chunks = x->chunk >= 0 ? clb_store_enc_pieces(s, x)
                                : chunks_of(&x->t[0]) + chunks_of(&x->t[1]) + chunks_of(&x->t[2]);
    j->next_chunk = j->done_chunks = 0;
    j->status = COLIBRI_OK;
    s->n_loading++;
    if (s->cfg.guard) clb_pool_protect(s, slot, 2);
    pthread_cond_broadcast(&s->cv_work);
}

/* Reads [off, off + len) of t into dst; accepts a short read at end of file as long as the
   tensor's own bytes are all there. */
static int read_range(clb_expert_store *s, const clb_st_tensor *t, uint8_t *dst, uint64_t coff, uint64_t len) {
    const bool direct = s->cfg.direct_io && t->direct_ok && t->dfd >= 0;
    const uint64_t need_end = t->file_offset + t->size - t->read_off; /* tensor end within the range */
    const uint64_t want = coff + len > need_end ? (need_end > coff ? need_end - coff : 0) : len;
    uint64_t got = 0;
    if (t->io) { /* a caller's source: the tensor's own bytes, clipped at the source's end */
        const uint64_t off = t->read_off + coff;
        const uint64_t n = off >= t->io->size ? 0 : CLB_MIN(len, t->io->size - off);
        if (n < want)
            return clb_err(COLIBRI_ERR_IO, "expert read at offset %llu: the source ends early", (unsigned long long)off);
        return clb_io_read(t->io, off, n, dst);
    }
    const int bfd = t->rfd >= 0 ? t->rfd : t->fd; /* the buffered descriptor */
    int fd = direct ? t->dfd : bfd;
    while (got < len) {
        ssize_t r = pread(fd, dst + got, (size_t)(len - got), (off_t)(t->read_off + coff + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && direct && errno == EINVAL && fd == t->dfd) {
            fd = bfd; /* this file system refuses O_DIRECT here after all: buffered */
            continue;
        }
        if (r > 0 && fd == bfd && s->cfg.drop_cache) /* the pool holds them now: no second copy */
            (void)posix_fadvise(fd, (off_t)(t->read_off + coff + got), (off_t)r, POSIX_FADV_DONTNEED);
        if (r < 0) return clb_err(COLIBRI_ERR_IO, "expert read at offset %llu: %s",
                                  (unsigned long long)(t->read_off + coff + got), strerror(errno));
        if (r == 0) break;
        got += (uint64_t)r;
        if (direct && got % CLB_STORE_PAGE) break; /* O_DIRECT short read: end of file */
    }
    if (got < want)
        return clb_err(COLIBRI_ERR_IO, "expert read at offset %llu: file ended early",
                       (unsigned long long)(t->read_off + coff + got));
    return COLIBRI_OK;
}

/* The end of a load piece (mu held): records its status and bytes; the last one makes the
   expert resident, or absent with the first error. */
static void piece_done(clb_expert_store *s, int slot, int rc, uint64_t bytes) {
    clb_st_job *j = &s->jobs[slot];
    const int xi = j->expert;
    clb_st_expert *x = &s->ex[xi];
    if (rc && !j->status) {
        j->status = rc;
        snprintf(s->load_err, sizeof s->load_err, "%s", clb_last_error()); /* this thread's message */
    }
    s->ls[xi / s->n_expert].bytes_read += bytes;
    if (++j->done_chunks == j->n_chunks) {
        if (j->status == COLIBRI_OK) {
            x->state = ES_RESIDENT;
            clb_store_loaded(s, xi);
            if (s->cfg.guard) clb_pool_protect(s, slot, x->pins > 0 ? 1 : 0);
        } else {
            x->state = ES_ABSENT;
            x->err = j->status;
            x->slot = -1;
            x->prefetched = false;
            s->slot_owner[slot] = -1;
            if (s->cfg.guard) clb_pool_protect(s, slot, 0);
        }
        j->expert = -1;
        s->n_loading--;
        pthread_cond_broadcast(&s->cv_done);
    }
}

bool clb_io_help(clb_expert_store *s, int slot) {
    clb_st_job *j = &s->jobs[slot];
    if (j->expert < 0 || j->next_chunk >= j->n_chunks) return false;
    const int xi = j->expert;
    clb_st_expert *x = &s->ex[xi];
    if (x->chunk >= 0) { /* encoded: piece c is segment c of the expert's chunk */
        const int d = clb_store_take_decoder(s);
        if (d < 0) return false; /* every decoder busy: one is given back when its piece ends */
        const int c = j->next_chunk++;
        uint8_t *base = clb_pool_slot(s, slot);
        pthread_mutex_unlock(&s->mu);
        uint64_t nread = 0;
        uint32_t scrc = 0;
        int rc = clb_store_read_segment(s, x, c, base, d, &nread, &scrc);
        pthread_mutex_lock(&s->mu);
        s->dec_busy[d] = false;
        j->seg_crc[c] = scrc;
        if (!rc && j->done_chunks + 1 == j->n_chunks && !j->status) rc = clb_store_check_chunk(s, x, j->seg_crc);
        pthread_cond_broadcast(&s->cv_work);
        piece_done(s, slot, rc, nread);
        return true;
    }
    const int c = j->next_chunk++;
    int k = 0, cc = c;
    while (cc >= chunks_of(&x->t[k])) cc -= chunks_of(&x->t[k++]);
    const clb_st_tensor *t = &x->t[k];
    const uint64_t coff = (uint64_t)cc * CLB_STORE_CHUNK;
    const uint64_t len = CLB_MIN(CLB_STORE_CHUNK, t->read_len - coff);
    uint8_t *dst = clb_pool_slot(s, slot) + t->slot_off + coff;
    pthread_mutex_unlock(&s->mu);
    int rc = read_range(s, t, dst, coff, len);
    pthread_mutex_lock(&s->mu);
    piece_done(s, slot, rc, len);
    return true;
}

static int next_job(clb_expert_store *s) {
    int best = -1;
    for (int i = 0; i < s->n_slots; i++) {
        const clb_st_job *j = &s->jobs[i];
        if (j->expert < 0 || j->next_chunk >= j->n_chunks) continue;
        if (best < 0 || j->prio > s->jobs[best].prio || (j->prio == s->jobs[best].prio && j->seq < s->jobs[best].seq))
            best = i;
    }
    return best;
}

static void *io_main(void *arg) {
    clb_expert_store *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        int slot = next_job(s);
        if (slot < 0 || !clb_io_help(s, slot)) { /* nothing to read, or no decoder free */
            pthread_cond_wait(&s->cv_work, &s->mu);
            continue;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int clb_io_start(clb_expert_store *s) {
    int n = s->cfg.io_threads;
    s->threads = clb_calloc((size_t)n, sizeof *s->threads);
    if (!s->threads) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (pthread_create(&s->threads[i], NULL, io_main, s) != 0) {
            clb_io_stop(s);
            return clb_err(COLIBRI_ERR_NOMEM, "cannot start I/O thread %d of %d", i + 1, n);
        }
        s->n_threads++;
#if defined(__linux__)
        if (s->cfg.io_cpus && s->cfg.n_io_cpus > 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(s->cfg.io_cpus[i % s->cfg.n_io_cpus], &set);
            int r = pthread_setaffinity_np(s->threads[i], sizeof set, &set);
            if (r && !s->io_pin_err) s->io_pin_err = r;
        }
#endif
    }
    return COLIBRI_OK;
}

void clb_io_stop(clb_expert_store *s) {
    if (!s->threads) return;
    pthread_mutex_lock(&s->mu);
    /* let loads in flight finish: their slots must not be unmapped under a reader */
    while (s->n_loading > 0) {
        int slot = next_job(s);
        if (slot < 0 || !clb_io_help(s, slot)) pthread_cond_wait(&s->cv_done, &s->mu);
    }
    s->stop = true;
    pthread_cond_broadcast(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_threads; i++) pthread_join(s->threads[i], NULL);
    clb_free(s->threads);
    s->threads = NULL;
    s->n_threads = 0;
}
