/* store_impl.h — the expert store's private state, shared by expert_store.c (table,
 * acquire/release), pool.c (slot memory, guard mode), cache.c (policies, usage file) and
 * prefetch.c (I/O threads). Everything mutable is guarded by clb_expert_store.mu. */
#ifndef CLB_STORE_IMPL_H
#define CLB_STORE_IMPL_H

#include <pthread.h>

#include "moe/expert_store.h"

#define CLB_STORE_PAGE 4096u                 /* pool page; also the O_DIRECT alignment */
#define CLB_STORE_CHUNK ((uint64_t)4 << 20)  /* one pread of a load job */
#define CLB_GUARD_EXIT 86                    /* exit status of a guard-mode violation */

typedef enum { ES_ABSENT = 0, ES_LOADING = 1, ES_RESIDENT = 2 } clb_es_state;

/* L2: one tensor (gate, up or down) of an expert */
typedef struct clb_st_tensor {
    int fd, dfd;          /* buffered / O_DIRECT descriptors (dfd -1 when unavailable) */
    int rfd;              /* cfg.drop_cache: buffered, POSIX_FADV_RANDOM (-1: fd) */
    const struct clb_io *io; /* or a caller's source (colibri_init_ex; fd -1): read through it */
    uint64_t file_offset; /* first byte of the tensor in the file */
    uint64_t size;        /* tensor bytes */
    uint64_t read_off;    /* file range read: [read_off, read_off + read_len), page aligned */
    uint64_t read_len;    /*   when direct_ok, else == [file_offset, size) */
    uint64_t slot_off;    /* where read_off lands in the slot (page aligned) */
    uint64_t data_off;    /* where the tensor's first byte lands in the slot */
    bool direct_ok;
    int64_t packed_rows;  /* rows computed by cfg.pack's packed kernels (0 none) */
    uint64_t copy_off;    /* unbounded with packing: offset of the tensor's packed copy */
} clb_st_tensor;

/* L1: one expert */
typedef struct clb_st_expert {
    clb_expert_w w;      /* as bound by the loader (pointers into the file mapping) */
    clb_expert_w pw;     /* pointers into the pool slot while resident (bounded mode) */
    clb_st_tensor t[3];  /* gate, up, down */
    uint64_t bytes;      /* sum of the tensors' sizes */
    bool present, hot, prefetched, mlocked;
    bool away;           /* another rank computes it (cfg.owner): never copied, decoded,
                            locked or loaded here; served row-major from the mapping if asked */
    int state;           /* clb_es_state */
    int slot;            /* pool slot when LOADING / RESIDENT, else -1 */
    int pins;            /* acquire/release balance */
    int need;            /* clb_prio of an outstanding request of this layer (0 none) */
    int err;             /* status of the last failed load */
    uint64_t last_use;   /* store tick of the last acquire (LRU) */
    double heat;         /* LFU heat at heat_tick */
    uint64_t heat_tick;
    uint64_t uses;       /* acquires since configure + counts from the usage file */
    int chunk;           /* encoded .colibri: the chunk holding its tensors, else -1; its
                            segments are the load's pieces and land decoded in the slot */
} clb_st_expert;

/* A load in flight; one per slot (a slot is busy while its expert loads). */
typedef struct clb_st_job {
    int expert;          /* index into experts, -1 when the slot is idle */
    int prio;
    uint64_t seq;        /* FIFO order within a priority */
    int n_chunks, next_chunk, done_chunks;
    int status;          /* first error of a chunk */
    uint32_t *seg_crc;   /* encoded experts of a clear file: CRC32 of each segment's stored
                            bytes, combined and checked against the chunk's when all are in */
} clb_st_job;

struct clb_expert_store {
    int n_layer, n_expert; /* n_layer: keys (clb_store_key), n_sub per model layer */
    int n_sub;
    clb_st_expert *ex;   /* [n_layer][n_expert] */
    bool configured, bounded;
    clb_store_cfg cfg;
    int io_pin_err; /* first pthread_setaffinity_np failure of an I/O thread */
    char *usage_path;

    pthread_mutex_t mu;
    pthread_cond_t cv_done; /* a load finished (or a pin dropped) */
    pthread_cond_t cv_work; /* a job has chunks to read, or stop */
    bool locks_ok;
    uint64_t tick, seq;

    /* pool (bounded mode): n_slots slots of slot_bytes, page aligned */
    uint8_t *pool;
    uint64_t slot_bytes, pool_map_bytes, max_expert_bytes;
    int n_slots;
    int *slot_owner;     /* [n_slots] expert index or -1 */
    clb_st_job *jobs;    /* [n_slots] */
    int n_loading;       /* slots whose expert is LOADING */
    int n_pinned_slots;  /* slots whose expert has pins > 0 */

    /* I/O threads */
    pthread_t *threads;
    int n_threads;
    bool stop;

    int read_path;       /* colibri_read_path (configure) */
    int *dfds;           /* O_DIRECT and POSIX_FADV_RANDOM descriptors opened per distinct fd:
                            pairs (2 fd + random, descriptor) */
    int n_dfds;

    /* encoded experts (container v2): decoders, each with a staging buffer for the stored
       bytes of one segment; taken under mu for the time of one piece */
    const struct clb_container *ct;
    struct clb_codec **dec;
    uint8_t **stage;
    bool *dec_busy;
    int n_dec;
    uint64_t stage_bytes;
    uint8_t *dec_copy;   /* unbounded: every encoded expert decoded once */
    uint64_t dec_copy_bytes;
    char load_err[320];  /* the message of the last failed load (set by the thread that read it) */

    /* packing (cfg.pack): the unbounded mode's interleaved copies of every expert */
    uint8_t *pack_copy;
    uint64_t pack_copy_bytes;
    bool packed, interleaved;

    clb_store_layer_stats *ls; /* [n_layer] */
    uint64_t acquires_since_hot;
};

static inline clb_st_expert *clb_st_get(clb_expert_store *s, int layer, int expert) {
    if (!s || layer < 0 || layer >= s->n_layer || expert < 0 || expert >= s->n_expert) return NULL;
    return &s->ex[(size_t)layer * (size_t)s->n_expert + (size_t)expert];
}

/* expert_store.c: points x->pw into its slot once loaded (mu held) */
void clb_store_loaded(clb_expert_store *s, int xi);
static inline bool clb_st_packs(const clb_st_expert *x) {
    return x->t[0].packed_rows || x->t[1].packed_rows || x->t[2].packed_rows;
}

/* encoded.c: experts of an encoded .colibri */
int clb_store_setup_encoded(clb_expert_store *s, const struct clb_source *src);
void clb_store_free_encoded(clb_expert_store *s);
int clb_store_enc_pieces(const clb_expert_store *s, const clb_st_expert *x); /* load pieces: its segments */
int clb_store_take_decoder(clb_expert_store *s);                            /* mu held; -1 when all busy */
int clb_store_read_segment(clb_expert_store *s, const clb_st_expert *x, int seg, uint8_t *slot_base, int decoder,
                           uint64_t *nread, uint32_t *stored_crc);
/* A clear file's expert once all its segments are in: their CRCs against the chunk's. */
int clb_store_check_chunk(const clb_expert_store *s, const clb_st_expert *x, const uint32_t *seg_crc);

/* pool.c */
int clb_pool_map(clb_expert_store *s);   /* maps n_slots * slot_bytes (guard: PROT_NONE) */
void clb_pool_unmap(clb_expert_store *s);
uint8_t *clb_pool_slot(clb_expert_store *s, int slot);
/* guard mode: protection of a slot for its current use */
void clb_pool_protect(clb_expert_store *s, int slot, int mode); /* 0 none, 1 read, 2 read-write */
int clb_guard_install(clb_expert_store *s);
void clb_guard_remove(clb_expert_store *s);

/* cache.c (called with mu held) */
/* Picks a slot for a new load: a free one, else a victim the policy allows (for a lookahead
   request only experts neither pinned, loading, hot nor needed at >= prio). -1 when none. */
int clb_cache_pick_slot(clb_expert_store *s, int prio);
void clb_cache_touch(clb_expert_store *s, clb_st_expert *x);
void clb_cache_update_hot(clb_expert_store *s);
int clb_cache_load_usage(clb_expert_store *s);
int clb_cache_save_usage(clb_expert_store *s);

/* prefetch.c */
int clb_io_start(clb_expert_store *s);
void clb_io_stop(clb_expert_store *s);
/* Starts loading expert index xi into slot (mu held): sets up the job and wakes I/O. */
void clb_io_begin_load(clb_expert_store *s, int xi, int slot, int prio);
/* Reads one unclaimed chunk of the job of `slot` (mu held on entry and exit; released
   during the read). Returns false when no chunk was left to claim. */
bool clb_io_help(clb_expert_store *s, int slot);
int clb_io_open_direct(clb_expert_store *s, int fd);
int clb_io_open_random(clb_expert_store *s, int fd);

#endif
