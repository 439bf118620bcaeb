/* expert_store.h — where each routed expert's bytes are (docs/MEMORY.md).
 *
 * The forward pass reaches expert weights only through acquire/release: acquire(layer,
 * expert) returns weights that stay valid until the matching release. Two modes sit behind
 * the same calls:
 *   - unbounded (default): the weights are served from the model file's mapping; routed
 *     experts get madvise(MADV_WILLNEED) when requested, the pinned hot set is mlock'ed;
 *   - bounded pool (a memory budget): expert bytes are never touched through the mapping;
 *     they are read with O_DIRECT (by default; else pread + POSIX_FADV_DONTNEED, or plain
 *     buffered pread when asked) into fixed-size slots of a page pool,
 *     cached by a policy (LRU, LFU with decay, pinned hot set) and prefetched by a small
 *     I/O thread pool from router-lookahead hints.
 * Placement only changes speed: the bytes a kernel sees are the file's bytes either way.
 *
 * Usage (engine): request(l, x, DEMAND) for every expert of the batch (the batch union),
 * request(l + 1, y, LOOKAHEAD) for predicted ones, then acquire / compute / release each
 * selected expert, then layer_done(l). */
#ifndef CLB_EXPERT_STORE_H
#define CLB_EXPERT_STORE_H

#include "model/model.h"

struct clb_source;
typedef struct clb_expert_store clb_expert_store;

/* n_sub sub-layers per layer may have routed experts (1: the FFN's; 2: also the attention's,
   hp->n_attn_exp; 3: also the FFN experts' low-bit stand-ins, docs/MEMORY.md): every call's
   `layer` is then a key clb_store_key(n_layer, l, sub), so every kind is acquired, cached,
   budgeted and prefetched by one store. n_expert: the most experts of any sub-layer.
   Stand-ins exist only in the bounded mode: unbounded, every expert is at hand and the
   store leaves them out (clb_store_expert_bytes 0). */
clb_expert_store *clb_store_create(int n_layer, int n_sub, int n_expert);
enum { CLB_SUB_FFN = 0, CLB_SUB_ATTN = 1, CLB_SUB_STANDIN = 2 };
/* The store's key of sub-layer sub of layer l in a model of n_layer layers. An attention
   expert's weights come in the clb_expert_w of an FFN expert: gate = its query projection,
   down = its output projection, up empty. */
static inline int clb_store_key(int n_layer, int l, int sub) { return sub * n_layer + l; }
void clb_store_free(clb_expert_store *s);
/* The loader fills each (layer, expert) slot once at load time. */
clb_expert_w *clb_store_slot(clb_expert_store *s, int layer, int expert);
/* Weights of (layer, expert), valid until clb_store_release. Errors: out-of-range ids, a
   slot the model does not have, an I/O error while loading, a pool whose slots are all
   pinned. May block while the expert is read. */
int clb_store_acquire(clb_expert_store *s, int layer, int expert, const clb_expert_w **out);
void clb_store_release(clb_expert_store *s, int layer, int expert);
/* Bytes of one expert (gate + up + down) of a layer. */
uint64_t clb_store_expert_bytes(const clb_expert_store *s, int layer, int expert);

/* ---- the memory hierarchy (issue 5) ---- */

typedef enum { CLB_POLICY_LRU = 0, CLB_POLICY_LFU = 1, CLB_POLICY_PINNED = 2, CLB_POLICY_COUNT = 3 } clb_policy;
typedef enum { CLB_PRIO_LOOKAHEAD = 1, CLB_PRIO_DEMAND = 2 } clb_prio;

typedef struct clb_store_cfg {
    uint64_t pool_bytes;   /* 0 = unbounded mode (file mapping) */
    int policy;            /* clb_policy */
    bool prefetch;         /* honour request() hints (batch union + lookahead) */
    bool direct_io;        /* O_DIRECT reads (falls back to buffered where refused) */
    bool drop_cache;       /* posix_fadvise(DONTNEED) of what a buffered read brought in */
    bool direct_quiet;     /* O_DIRECT chosen by default: a refusal is news, not a warning */
    int io_threads;        /* I/O threads of the pool (0 = the caller reads alone) */
    bool guard;            /* PROT_NONE on every pool page not pinned by an acquire */
    const char *usage_path; /* routing counts file (read at configure, written at free); NULL = off */
    /* kernel table whose packed kernels (kernels.h) compute the expert tensors they can, or
       NULL. The arithmetic is the same in every mode. Unbounded with interleave, the experts
       are copied once into the interleaved layout when the copies fit in the available
       memory (info.interleaved tells); otherwise the kernels read the row-major bytes. */
    const struct clb_kernels *pack;
    bool interleave;
    const int *io_cpus;    /* NULL, or I/O thread i runs on io_cpus[i % n_io_cpus] */
    int n_io_cpus;
    /* expert parallelism: owner[layer * n_expert + expert] is the rank computing each expert
       (NULL: this process computes all). The experts of other ranks are never copied,
       decoded, mlock'ed or read here, and a pool holds at most this rank's experts, so the
       memory of every mode is the dense part plus this rank's share. */
    const int32_t *owner;
    int32_t rank;
} clb_store_cfg;

/* Switches to the mode cfg describes, once, after the loader filled every slot. Uses src
   for each expert tensor's file descriptor and offset (checked against the file size).
   Errors: a pool smaller than 2 experts, an unreadable file, out of memory. */
int clb_store_configure(clb_expert_store *s, const struct clb_source *src, const clb_store_cfg *cfg);
/* Memory the bounded mode's decoders of an encoded (version 2) source take besides the pool:
   per decoder a staging buffer for one stored segment and, compressed, the codec's segment
   scratch. 0 for any other source. The memory budget counts it. */
uint64_t clb_store_decoder_bytes(const struct clb_source *src, int io_threads);
/* A hint: (layer, expert) will be acquired soon. Starts loading it in the background when
   a slot can be had without evicting anything more urgent; never blocks on I/O. */
void clb_store_request(clb_expert_store *s, int layer, int expert, int prio);
/* The layer's acquires are over: its outstanding demand marks are cleared. */
void clb_store_layer_done(clb_expert_store *s, int layer);
/* Changes the cache policy from the next eviction on. */
int clb_store_set_policy(clb_expert_store *s, int policy);
/* How many experts may be pinned (acquired) at once: the pool's slots, or INT_MAX. */
int clb_store_max_pinned(const clb_expert_store *s);
/* Lookahead accounting: of n_true true top-k picks of layer, n_hit had been predicted. */
void clb_store_note_recall(clb_expert_store *s, int layer, uint64_t n_hit, uint64_t n_true);
/* Drops every unpinned resident expert (tests; shrinking). */
void clb_store_evict_all(clb_expert_store *s);
/* Bounded mode: neither in the pool nor being read (false in the unbounded mode). */
bool clb_store_is_absent(clb_expert_store *s, int layer, int expert);
bool clb_store_is_resident(clb_expert_store *s, int layer, int expert);
/* Writes the usage file now (also done by clb_store_free). */
int clb_store_save_usage(clb_expert_store *s);

typedef struct clb_store_layer_stats {
    uint64_t hits, misses, bytes_read, evictions, prefetch_issued, prefetch_used;
    uint64_t la_hit, la_true; /* lookahead recall = la_hit / la_true */
    double stall_s;
} clb_store_layer_stats;

typedef struct clb_store_info {
    bool bounded, direct_io, guard, prefetch, packed, interleaved;
    int policy, n_slots, io_threads;
    int read_path;         /* colibri_read_path */
    uint64_t pool_bytes, slot_bytes, max_expert_bytes;
} clb_store_info;

void clb_store_get_info(clb_expert_store *s, clb_store_info *out);
/* Statistics of one layer since configure (zeros for out-of-range layers). */
void clb_store_layer_stats_get(clb_expert_store *s, int layer, clb_store_layer_stats *out);
/* mlock of the pool (bounded mode; nothing otherwise): adds its bytes to *bytes; 0 or an
   errno value. The I/O threads' pinning result: 0 or the first errno value. */
int clb_store_lock(clb_expert_store *s, uint64_t *bytes);
int clb_store_io_pin_error(const clb_expert_store *s);
/* Total expert bytes of the model (what the unbounded mode maps). */
uint64_t clb_store_total_bytes(const clb_expert_store *s);

#endif
