/*
 * colibri.h — the public C API of Colibri, a Mixture-of-Experts inference engine for CPUs.
 *
 * This is the only header a program embedding Colibri needs. All types are opaque handles
 * with create/free pairs; every free function accepts NULL. The library never prints and
 * never exits: a failing call returns an error status (or NULL) and leaves a one-line,
 * human-readable reason in colibri_last_error() (per thread).
 *
 * Usage:
 *
 *     colibri_engine_t *e = colibri_init("model.colibri", NULL);
 *     if (!e) { fprintf(stderr, "colibri: %s\n", colibri_last_error()); return 1; }
 *     int32_t prompt[] = {1, 300, 447};
 *     int32_t next;
 *     if (colibri_eval(e, prompt, 3, NULL, 0) != COLIBRI_OK) ...        // prefill
 *     float *logits = malloc(sizeof(float) * colibri_n_vocab(e));
 *     for (int i = 0; i < 16; i++) {
 *         // feed the last token, get its logits and the greedy choice
 *         if (colibri_forward(e, i == 0 ? prompt[2] : next, logits, &next) != COLIBRI_OK) ...
 *     }
 *     colibri_free(e);
 *
 * colibri_forward() evaluates one token at the next position of the sequence; the example
 * above therefore re-feeds prompt[2] — use colibri_eval() on prompt[0..n-2] then
 * colibri_forward() on the last prompt token to avoid that (what `colibri run` does).
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLIBRI_VERSION_MAJOR 0
#define COLIBRI_VERSION_MINOR 1
#define COLIBRI_VERSION_PATCH 0

/* Status codes. Every int-returning call returns COLIBRI_OK (0) or one of these (< 0). */
typedef enum colibri_status {
    COLIBRI_OK = 0,
    COLIBRI_ERR_ARG = -1,         /* a bad argument (NULL, out-of-range id, short buffer) */
    COLIBRI_ERR_IO = -2,          /* a file could not be opened, read or written */
    COLIBRI_ERR_FORMAT = -3,      /* a file is malformed or truncated */
    COLIBRI_ERR_CORRUPT = -4,     /* a checksum does not match */
    COLIBRI_ERR_UNSUPPORTED = -5, /* an architecture, dtype or option this build cannot run */
    COLIBRI_ERR_NOMEM = -6,       /* an allocation failed */
    COLIBRI_ERR_RANGE = -7,       /* the sequence would exceed max_seq_len */
    COLIBRI_ERR_INTERNAL = -8,    /* a bug: please report it */
    COLIBRI_ERR_NUMERIC = -9      /* a NaN or infinity appeared while computing (the message names
                                     the layer where it first did); nothing is sampled from it */
} colibri_status;

typedef struct colibri_engine colibri_engine_t;

/* Per-phase timing and routing statistics (see colibri_get_stats). */
#define COLIBRI_STATS_MAX_LAYERS 128
#define COLIBRI_STATS_MAX_EXPERTS 256
typedef struct colibri_stats {
    uint64_t tokens_prompt;     /* tokens evaluated through colibri_eval */
    uint64_t tokens_generated;  /* tokens evaluated through colibri_forward */
    double time_prompt_s;       /* wall time in colibri_eval */
    double time_generate_s;     /* wall time in colibri_forward */
    uint64_t tokens_decoded;    /* tokens evaluated through colibri_decode (several sequences) */
    double time_decode_s;       /* wall time in colibri_decode */
    double time_attention_s;    /* of both: attention (projections, rope, softmax, KV) */
    double time_moe_s;          /* of both: router + expert FFNs (+ dense FFN layers) */
    double time_head_s;         /* of both: final norm + LM head */
    /* of time_moe_s: the scheduler — from a MoE layer's router output to every thread
       running its expert kernels, and from the gate/up dispatch's end to every thread in the
       down projections (grouping, acquiring, gathering and converting inputs, waking the
       threads). Includes waits for expert reads (expert_stall_s) in the bounded mode. */
    double time_moe_sched_s;
    uint64_t moe_layer_runs;    /* MoE layer evaluations (one per layer per batch) */
    uint64_t moe_experts_run;   /* distinct experts those evaluations ran (each once per batch,
                                   whatever its number of tokens): / moe_layer_runs = the
                                   experts a layer step reads */
    uint64_t moe_expert_bytes_run; /* the bytes of those experts' weights */
    uint64_t peak_rss_bytes;    /* the process's peak resident set, from the OS */
    uint64_t ctx_shifts;        /* context shifts (colibri_params.ctx_shift, colibri_seq_shift) */
    uint64_t kv_bytes;          /* the KV cache's allocation (all sequences) */
    uint64_t kv_bytes_per_token; /* what one position of one sequence takes in it, all layers */
    int32_t n_layers;           /* layers described below (at most COLIBRI_STATS_MAX_LAYERS) */
    int32_t n_experts;          /* routed experts per layer (at most COLIBRI_STATS_MAX_EXPERTS) */
    /* expert_counts[l][e]: how many times expert e of layer l was selected since init/reset
       of the statistics. Layers without routed experts stay 0. */
    uint32_t expert_counts[COLIBRI_STATS_MAX_LAYERS][COLIBRI_STATS_MAX_EXPERTS];
    /* -- expert memory hierarchy (docs/MEMORY.md). Pool figures are 0 without a budget
       (the unbounded mode serves experts from the file mapping and counts no hits). -- */
    int32_t cache_policy;          /* colibri_cache_policy in effect */
    int32_t expert_pool_slots;     /* experts the pool holds at once; 0 = unbounded mode */
    uint64_t expert_pool_bytes;    /* the pool's size */
    uint64_t mem_accounted_bytes;  /* dense weights + KV cache + arena (the rest of a budget is the pool) */
    uint64_t expert_hits[COLIBRI_STATS_MAX_LAYERS];       /* acquires served from the pool */
    uint64_t expert_misses[COLIBRI_STATS_MAX_LAYERS];     /* acquires that waited for a read */
    uint64_t expert_bytes_read[COLIBRI_STATS_MAX_LAYERS]; /* bytes read from the file into the pool */
    uint64_t expert_evictions[COLIBRI_STATS_MAX_LAYERS];
    double expert_stall_s[COLIBRI_STATS_MAX_LAYERS];      /* time acquires waited for reads */
    uint64_t prefetch_issued, prefetch_used; /* lookahead loads started / later acquired */
    uint64_t lookahead_true, lookahead_hit;  /* true top-k picks / of those predicted (recall) */
    /* sums over all layers of the arrays above */
    uint64_t expert_hits_total, expert_misses_total, expert_bytes_read_total, expert_evictions_total;
    double expert_stall_s_total;
    int32_t expert_read_path;     /* colibri_read_path */
    uint64_t dense_locked_bytes;  /* dense weights mlock'ed inside a budget (0 when refused or unbounded) */
    uint64_t moe_experts_dropped; /* selections dropped by moe_miss_drop (not in the pool) */
    uint64_t moe_standins_used;   /* selections computed with their expert's stand-in (moe_standin) */
} colibri_stats_t;

/* colibri_params.direct_io */
typedef enum colibri_read_path_mode {
    COLIBRI_READ_BUFFERED = -1, /* buffered pread: read pages stay in the page cache */
    COLIBRI_READ_AUTO = 0,      /* O_DIRECT where allowed, else pread + DONTNEED */
    COLIBRI_READ_DIRECT = 1,    /* O_DIRECT (buffered + DONTNEED where refused); implies a pool */
    COLIBRI_READ_DONTNEED = 2   /* pread, then posix_fadvise(POSIX_FADV_DONTNEED) of the range */
} colibri_read_path_mode;

/* colibri_stats_t.expert_read_path: the path the pool's reads take */
typedef enum colibri_read_path {
    COLIBRI_PATH_MMAP = 0,     /* no pool: experts are read through the file mapping */
    COLIBRI_PATH_DIRECT = 1,   /* every expert tensor with O_DIRECT */
    COLIBRI_PATH_DONTNEED = 2, /* every expert tensor with pread + POSIX_FADV_DONTNEED */
    COLIBRI_PATH_MIXED = 3,    /* O_DIRECT, pread + DONTNEED for tensors O_DIRECT cannot read */
    COLIBRI_PATH_BUFFERED = 4, /* buffered pread (COLIBRI_READ_BUFFERED) */
    COLIBRI_PATH_SOURCE = 5    /* the caller's read callback (colibri_init_ex) */
} colibri_read_path;

/* "O_DIRECT", "pread + POSIX_FADV_DONTNEED", ... for a colibri_read_path; "?" when out of range. */
const char *colibri_read_path_name(int path);

/* Expert cache policies (colibri_params.cache_policy, colibri_set_cache_policy). */
typedef enum colibri_cache_policy {
    COLIBRI_CACHE_LRU = 0,   /* least recently used expert leaves the pool */
    COLIBRI_CACHE_LFU = 1,   /* least frequently used, with decay */
    COLIBRI_CACHE_PINNED = 2 /* a hot set learned from routing counts stays; LRU for the rest */
} colibri_cache_policy;

/* Element types of the KV cache (colibri_params.cache_type_k / cache_type_v). f16 is the
   default: half the memory of f32 for no measurable loss (docs/ATTENTION.md has the
   perplexity and memory figures); q8_0 halves it again, q4_0 once more at some loss. f32
   keeps the exact arithmetic of the plain attention path. */
typedef enum colibri_kv_type {
    COLIBRI_KV_DEFAULT = 0, /* f16 */
    COLIBRI_KV_F32 = 1,
    COLIBRI_KV_F16 = 2,
    COLIBRI_KV_BF16 = 3,
    COLIBRI_KV_Q8_0 = 4,
    COLIBRI_KV_Q4_0 = 5
} colibri_kv_type;
/* "f32", "f16", "bf16", "q8_0", "q4_0" (llama.cpp's --cache-type names) -> colibri_kv_type;
   -1 for anything else. */
int colibri_kv_type_from_name(const char *name);
/* The name of a colibri_kv_type ("f16" for the default), "?" when out of range. */
const char *colibri_kv_type_name(int type);

/* Run-time settings. Zero-initialise (colibri_params_default) and set what you need. */
typedef struct colibri_params {
    int32_t n_threads;      /* worker threads; 0 = number of online CPUs */
    int32_t max_seq_len;    /* KV cache length; 0 = min(model's max positions, 4096) */
    int32_t n_batch;        /* largest batch colibri_eval computes at once; 0 = 64 */
    int32_t moe_top_k;      /* experts per token; 0 = the model's own. Buffers are sized for
                               max(2 x the model's k, this) so colibri_set_moe_top_k can raise it */
    float router_temperature; /* divides router logits before scoring; 0 or 1 = off */
    float moe_top_p;        /* > 0: dynamic k, the fewest experts whose routing probability
                               reaches moe_top_p ... */
    int32_t moe_k_min, moe_k_max; /* ... bounded to [k_min, k_max] (0 = 1 / all experts) */
    /* -- expert memory hierarchy (docs/MEMORY.md) -- */
    uint64_t mem_budget;        /* bytes for dense weights + KV cache + arena + expert pool; 0 = no
                                   budget: experts are served from the file mapping */
    uint64_t expert_pool_bytes; /* the expert pool alone (env COLIBRI_PAGE_POOL_SIZE overrides);
                                   0 = what mem_budget leaves, or 512 MiB with direct_io 1 or 2 alone */
    int32_t cache_policy;       /* colibri_cache_policy (default LRU) */
    int32_t prefetch;           /* 0 or 1 = batch union + router lookahead prefetch, -1 = off */
    int32_t direct_io;          /* colibri_read_path_mode: how a pool reads experts. 0 = auto (the
                                   default): with a pool, O_DIRECT where the file system allows it,
                                   else pread + posix_fadvise(DONTNEED) of what was read, so that
                                   the page cache (which a cgroup cap counts) stays out of the way;
                                   1 = O_DIRECT (implies a pool); 2 = pread + DONTNEED; -1 =
                                   buffered pread, the pages left in the page cache */
    int32_t io_threads;         /* expert I/O threads; 0 = 4 */
    int32_t usage_stats;        /* 1 = read/write routing counts in "<model>.usage" (opt-in; the
                                   PINNED policy learns its hot set from them) */
    int32_t n_seq;              /* sequences held at once (colibri_decode), each with its own KV
                                   region of max_seq_len positions; 0 = 1, at most COLIBRI_MAX_SEQ */
    /* -- attention and the KV cache -- */
    int32_t cache_type_k;       /* colibri_kv_type of the cached keys (MLA latent cache: of the latent) */
    int32_t cache_type_v;       /* colibri_kv_type of the cached values */
    int32_t flash_attn;         /* 1 = flash attention, -1 = the plain path (f32 caches only),
                                   0 = auto: flash unless both caches are f32 */
    int32_t mla;                /* multi-head latent attention (DeepSeek-V2/V3): 0 or 1 = cache the
                                   compressed latent and the shared rope key, attend in the latent
                                   space (the default; cache_type_k sets the latent's type); -1 = K
                                   and V decompressed per head, as the model's own code computes */
    int32_t ctx_shift;          /* 1 = a sequence that would pass max_seq_len is shifted as llama.cpp
                                   does: its first n_keep tokens stay, half of the rest (more when a
                                   batch needs it) is dropped, and the later tokens move down with
                                   their cached keys re-rotated, so generation goes on; 0 = such a
                                   call fails with COLIBRI_ERR_RANGE (the default) */
    int32_t n_keep;             /* tokens a shift keeps at the start of each sequence (colibri_seq_set_keep) */
    /* -- real time (docs/REALTIME.md); what cannot be applied is a warning, not an error:
          colibri_rt_warning says what was refused -- */
    char cpus[128];             /* "" or a CPU list ("0-3,6"): thread i of the pool runs on the
                                   list's CPU i (thread 0 is the thread calling init, which is
                                   pinned too: evaluate from it); n_threads 0 = the list's length */
    char io_cpus[128];          /* "" or the CPU list of the expert I/O threads */
    int32_t rt_priority;        /* 1..99: SCHED_FIFO at this priority for the pool's threads */
    int32_t mlock;              /* 1 = lock the dense weights, expert pool, KV cache and arena in RAM */
    int32_t wait_policy;        /* colibri_wait_policy: how the threads wait for each other */
    int32_t spin_us;            /* spin (or yield) limit of the hybrid and yield policies in us;
                                   0 = 3000, -1 = none (sleep at once) */
    float moe_miss_drop;        /* residency-aware dynamic k (docs/MEMORY.md), 0 = off (the default:
                                   logits never depend on the pool). > 0, with a pool: a selected
                                   expert other than a token's first whose routing weight is below
                                   this and that is neither in the pool nor being read when its
                                   layer runs is dropped, the token's other weights scaled to the
                                   same sum (so the logits then depend on timing) */
    float moe_standin;          /* low-bit stand-ins (docs/MEMORY.md), 0 = off (the default). > 0,
                                   with a pool and a file converted with stand-ins: an expert
                                   neither in the pool nor being read, all of whose selections in
                                   a batch are below this share of their token's routing weight,
                                   none a token's top one, is computed with its stand-in instead
                                   of being waited for (the logits then depend on timing) */
} colibri_params;

/* How the pool's threads wait for work and the evaluating thread for them. Every policy
   lets the evaluating thread compute the shares no worker has started. */
typedef enum colibri_wait_policy {
    COLIBRI_WAIT_HYBRID = 0, /* spin up to spin_us, then sleep (the default) */
    COLIBRI_WAIT_SPIN = 1,   /* spin without limit: one dedicated core per thread */
    COLIBRI_WAIT_FUTEX = 2,  /* sleep at once (futex) */
    COLIBRI_WAIT_YIELD = 3,  /* sched_yield() up to spin_us, then sleep: cores shared */
} colibri_wait_policy;
/* "hybrid", "spin", "futex", "yield" -> colibri_wait_policy; -1 for anything else. */
int colibri_wait_policy_from_name(const char *name);
#define COLIBRI_MAX_SEQ 256

/* ---- the four calls of the original design ---- */

/* Opens a model (.colibri file, .gguf file, or a Hugging Face directory) and prepares it to
   run. config_path may be NULL or a JSON file of run-time settings with any of the keys
   "threads", "max_seq_len", "n_batch", "moe_top_k", "router_temperature", "n_seq",
   "cache_type_k" / "cache_type_v" (type names), "flash_attn" (true, false or "auto"), "mla"
   ("latent" or "decompressed"), "ctx_shift" (boolean), "n_keep", and for the expert memory
   hierarchy "mem_budget" / "expert_pool" (bytes, or a string such as "1.5GiB"),
   "cache_policy" ("lru", "lfu", "pinned"), "prefetch", "direct_io" (a boolean, "auto" or "dontneed"), "usage_stats" (booleans),
   "io_threads", and for real time "cpus" / "io_cpus" (CPU list strings), "rt_priority",
   "mlock" (boolean), "wait_policy" (policy name), "spin_us".
   Returns NULL on failure (reason in colibri_last_error()). */
colibri_engine_t *colibri_init(const char *model_path, const char *config_path);

/* Evaluates token_id at the next position. If logits is non-NULL it receives n_vocab floats
   (the caller guarantees the capacity; prefer colibri_forward_ex). If next_token is non-NULL
   it receives the argmax of the logits (ties: lowest id). */
int colibri_forward(colibri_engine_t *e, int32_t token_id, float *logits, int32_t *next_token);

/* Releases everything. NULL is fine. */
void colibri_free(colibri_engine_t *e);

/* A snapshot of the statistics. A NULL engine gives all zeros. */
colibri_stats_t colibri_get_stats(colibri_engine_t *e);

/* The routed experts of layer `layer` as the last batch left them (for a live view):
   last[x] = how many tokens of the last batch evaluated through that layer chose expert x;
   resident[x] = 1 when expert x's weights are in memory now (in the pool under a memory
   budget; always 1 without one, where experts are served from the file mapping). Either may
   be NULL; a non-NULL one holds cap >= n_expert entries. Returns the number of routed experts
   of the layer (0 for a dense layer, nothing written) or an error status (< 0). */
int colibri_expert_state(colibri_engine_t *e, int32_t layer, uint32_t *last, uint8_t *resident, size_t cap);

/* ---- what a real caller needs besides ---- */

/* Default parameters (all automatic). */
colibri_params colibri_params_default(void);

/* Reads a run-time settings file (the JSON keys colibri_init accepts) into *p: the keys the
   file has replace those fields, the others stay. Unknown keys and bad values are errors. */
int colibri_params_read_config(const char *config_path, colibri_params *p);

/* Like colibri_init with explicit parameters (params may be NULL for defaults). */
colibri_engine_t *colibri_init_params(const char *model_path, const colibri_params *params);

/* ---- embedding: a read callback instead of a path, a caller's block instead of malloc ----
   (docs/EMBEDDING.md) */

/* Where the model's bytes come from. read is required; size and map are optional. */
typedef struct colibri_source {
    /* Copies len bytes at offset into dst. Returns len; anything else is an error (fewer:
       a short read, < 0: the caller's error code), which fails the call that needed the
       bytes with COLIBRI_ERR_IO. In the bounded mode it is called from the expert I/O
       threads, several at once: it must be safe to call concurrently (a pread or a memcpy
       from a buffer is). */
    int64_t (*read)(void *ctx, uint64_t offset, size_t len, void *dst);
    /* The source's size in bytes into *size, 0 on success. NULL: the length field below. */
    int (*size)(void *ctx, uint64_t *size);
    /* Optional: a pointer to all size bytes (a buffer, memory-mapped flash), readable until
       colibri_free; the weights are then used in place, not copied. NULL (or a NULL
       return): everything the engine keeps resident is read through read into memory. */
    const void *(*map)(void *ctx, uint64_t size);
    void *ctx;
    uint64_t length;  /* the size in bytes, when the size callback is NULL */
    const char *name; /* in messages; NULL = "source" */
} colibri_source;

/* Opens a .colibri (plain, version 1) or GGUF model from src, with params (NULL =
   defaults; usage_stats and direct_io 1 or 2, which need a file, are refused), and makes no
   file-system call. mem / mem_size: a block the engine carves everything from — the
   dense weights (unless src maps them), KV cache, activation arena, expert pool, tables —
   so that once it returns no evaluation allocates (no malloc, mmap or open); mem NULL uses
   the C heap. Bounded mode (params->mem_budget or expert_pool_bytes, no map callback, a
   .colibri file): only the header, metadata and dense tensors are read at init; the routed
   experts are read through src->read into the pool on demand. Unbounded: the whole file
   is read (or mapped). A block too small fails with COLIBRI_ERR_NOMEM and a message giving
   the bytes needed (found by a measuring init on the C heap; call colibri_embed_size ahead
   where there is none). The same model and parameters give colibri_init's logits, bit for
   bit. The text calls (tokenizer, chat) still use the C heap: feed token ids to avoid it.
   The first call sets cJSON's allocation hooks, process-wide, to the library's allocator
   (the C heap on every thread but one initialising into a block). */
colibri_engine_t *colibri_init_ex(const colibri_source *src, const colibri_params *params, void *mem,
                                  size_t mem_size);
/* The block colibri_init_ex needs for src and params, in bytes, into *bytes (the C heap is
   used meanwhile: it opens the model once, reading what an init reads, and frees it). The
   same engine build, params and thread count give the same figure. */
int colibri_embed_size(const colibri_source *src, const colibri_params *params, uint64_t *bytes);

/* The real-time settings init could not apply, as one line ("" when all were, or none asked;
   e.g. SCHED_FIFO without the permission, mlock over RLIMIT_MEMLOCK). Valid until free. */
const char *colibri_rt_warning(const colibri_engine_t *e);

/* colibri_forward with the capacity of the logits buffer, in floats: a capacity below
   colibri_n_vocab() is COLIBRI_ERR_ARG and nothing is written. */
int colibri_forward_ex(colibri_engine_t *e, int32_t token_id, float *logits, size_t logits_cap,
                       int32_t *next_token);

/* Evaluates n tokens at the next n positions as one batch (prompt processing).
   If logits is non-NULL it receives the logits of every position, [n][n_vocab], and
   logits_cap (floats) must be at least n * n_vocab; with logits NULL only the KV cache is
   filled (use colibri_forward on the last prompt token, or colibri_eval_last). */
int colibri_eval(colibri_engine_t *e, const int32_t *tokens, size_t n, float *logits,
                 size_t logits_cap);

/* Forgets every sequence: the next token of each goes to position 0. Statistics are kept. */
void colibri_reset(colibri_engine_t *e);

/* Keeps only the first n tokens of the sequence (n <= colibri_n_past): the next token goes
   to position colibri_n_past() — n, or fewer on a model whose windowed layers no longer
   hold what position n would see (colibri_seq_truncate). Lets a chat reuse the KV cache of
   a shared prefix. colibri_forward,
   colibri_eval, colibri_truncate and colibri_n_past work on sequence 0. */
int colibri_truncate(colibri_engine_t *e, int32_t n);

/* ---- several sequences at once (server slots, batched decoding) ---- */

/* One token of a batch: appended at the next position of sequence `seq`. */
typedef struct colibri_batch_tok {
    int32_t seq;    /* 0 .. colibri_n_seq() - 1 */
    int32_t token;
    int32_t logits; /* non-zero: return this position's logits */
} colibri_batch_tok;

/* Evaluates n tokens of any sequences together: the tokens of one sequence are taken in
   order as its next positions, and each step of up to n_batch tokens runs every layer once
   for all of them, so a MoE layer reads each selected expert once for every token that
   chose it, whatever its sequence. The logits of the tokens with `logits` set are written in
   order, n_vocab floats each (logits_cap floats in all). A sequence's logits do not depend on
   what else shares its steps. All or nothing: on failure (a bad id, a sequence past
   max_seq_len, a read error) no sequence advances (and what the logits buffer holds is
   undefined). */
int colibri_decode(colibri_engine_t *e, const colibri_batch_tok *toks, size_t n, float *logits, size_t logits_cap);

/* Sequences the engine holds (colibri_params.n_seq), 0 for NULL. */
int32_t colibri_n_seq(const colibri_engine_t *e);
/* Tokens in sequence seq's KV cache (its next position); -1 for a bad engine or sequence. */
int32_t colibri_seq_n_past(const colibri_engine_t *e, int32_t seq);
/* Keeps the first n tokens of sequence seq (0 frees it for a new conversation). On a model
   with sliding-window (or chunked) layers whose cache keeps only the window, a cut further
   back than the window still holds keeps nothing (the sequence starts over, as when the
   window slid past): read colibri_seq_n_past afterwards and evaluate from there. */
int colibri_seq_truncate(colibri_engine_t *e, int32_t seq, int32_t n);

/* ---- context shift and saved states ---- */

/* Removes positions [n_keep, n_keep + n_discard) of sequence seq and moves the later ones down
   by n_discard, their cached keys re-rotated to their new positions; the sequence then holds
   colibri_seq_n_past - n_discard tokens. What the automatic shift (colibri_params.ctx_shift)
   does, for a caller that decides itself. On a model with windowed layers whose cache keeps
   only the window, those layers lose what they held of the kept start. */
int colibri_seq_shift(colibri_engine_t *e, int32_t seq, int32_t n_keep, int32_t n_discard);
/* Sets how many tokens at the start of sequence seq the automatic shift keeps (e.g. the
   system prompt), at most its current length when a shift happens. */
int colibri_seq_set_keep(colibri_engine_t *e, int32_t seq, int32_t n_keep);
/* The token ids sequence seq holds, in order (after shifts: the kept start, then the rest).
   Writes up to cap ids and their count to *n; a too-small cap is COLIBRI_ERR_ARG with *n the
   count needed. */
int colibri_seq_tokens(const colibri_engine_t *e, int32_t seq, int32_t *ids, size_t cap, size_t *n);
/* Writes sequence seq's state — its KV cache rows, position and token ids — to path, with
   the model's identity (configuration and a fingerprint of its weights), the cache's types and
   a checksum, so that a long prompt is evaluated once (colibri run --prompt-cache). */
int colibri_state_save(colibri_engine_t *e, int32_t seq, const char *path);
/* Restores a state written by colibri_state_save into sequence seq (any sequence of an
   engine of the same model, cache types and MLA mode, max_seq_len at least the state's
   length): the next logits are those the saving engine would have produced. A state of
   another model or cache layout is COLIBRI_ERR_ARG, a truncated or corrupt file
   COLIBRI_ERR_FORMAT / COLIBRI_ERR_CORRUPT, naming the cause; either way the sequence is left
   as it was. */
int colibri_state_load(colibri_engine_t *e, int32_t seq, const char *path);

/* Vocabulary size (logits per position), 0 for NULL. */
int32_t colibri_n_vocab(const colibri_engine_t *e);

/* Current position (tokens in the KV cache) and its capacity. */
int32_t colibri_n_past(const colibri_engine_t *e);
int32_t colibri_max_seq_len(const colibri_engine_t *e);
/* The positions the model was trained for (max_position_embeddings / context_length), 0 for NULL. */
int32_t colibri_n_ctx_train(const colibri_engine_t *e);

/* Changes the number of routed experts per token from the next token on, without reloading
   (1 .. the bound set at init, see colibri_params.moe_top_k). */
int colibri_set_moe_top_k(colibri_engine_t *e, int32_t k);

/* Changes the expert cache policy (colibri_cache_policy) from the next eviction on. Output
   never depends on it. */
int colibri_set_cache_policy(colibri_engine_t *e, int32_t policy);

/* The model's BOS/EOS token ids, -1 when the model has none. */
int32_t colibri_bos_id(const colibri_engine_t *e);
int32_t colibri_eos_id(const colibri_engine_t *e);

/* The reason for the last failing call on this thread ("" if none). Never NULL. */
const char *colibri_last_error(void);

/* Optional log callback for diagnostics (level 0 = error .. 3 = debug). NULL restores silence. */
typedef void (*colibri_log_fn)(int level, const char *msg, void *user);
void colibri_set_log(colibri_log_fn fn, void *user);

/* ---- text: tokenizer, chat template, sampling ---- */

/* Threads: an engine serves one thread at a time, except the text calls below
   (colibri_tokenize, colibri_detokenize, colibri_detok_*, colibri_is_eog, colibri_chat_render,
   colibri_chat_template_is_default): once colibri_has_tokenizer() has returned on the engine
   (it builds the tokenizer), they only read it, and any number of threads may call them while
   another thread evaluates tokens (what a server's request threads do). */

/* Whether the model file carries a tokenizer this build can use (the text calls below fail
   without one; the tokenizer is built on the first text call). */
int colibri_has_tokenizer(colibri_engine_t *e);

/* Text (len bytes of UTF-8) to ids. add_special adds BOS/EOS as the tokenizer files say;
   parse_special turns special-token text such as "<|im_start|>" into its id. Writes up to
   cap ids and the count to *n_out; a too-small cap is COLIBRI_ERR_ARG with *n_out the
   count needed. */
int colibri_tokenize(colibri_engine_t *e, const char *text, size_t len, int add_special, int parse_special,
                     int32_t *ids, size_t cap, size_t *n_out);
/* Ids to text (no NUL); a too-small cap is COLIBRI_ERR_ARG with *n_out the length needed. */
int colibri_detokenize(colibri_engine_t *e, const int32_t *ids, size_t n, int skip_special, char *out,
                       size_t cap, size_t *n_out);

/* Streaming detokenizer: push ids one at a time, get back only whole UTF-8 characters.
   out must hold at least 256 bytes. */
typedef struct colibri_detok colibri_detok_t;
colibri_detok_t *colibri_detok_new(colibri_engine_t *e, int skip_special);
int colibri_detok_push(colibri_detok_t *d, int32_t id, char *out, size_t cap, size_t *n_out);
int colibri_detok_flush(colibri_detok_t *d, char *out, size_t cap, size_t *n_out);
void colibri_detok_free(colibri_detok_t *d);

/* True for tokens that end generation (EOS and the tokenizer's end-of-turn tokens). */
int colibri_is_eog(colibri_engine_t *e, int32_t id);

/* Renders messages with the model's chat template (ChatML when the model has none:
   colibri_chat_template_is_default() says so). Heap string, free with colibri_string_free;
   NULL on error (a template's raise_exception message is kept). */
typedef struct colibri_chat_msg {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content;
} colibri_chat_msg;
char *colibri_chat_render(colibri_engine_t *e, const colibri_chat_msg *msgs, size_t n,
                          int add_generation_prompt);
int colibri_chat_template_is_default(colibri_engine_t *e);

/* Renders msgs as colibri_chat_render does and tokenizes the result (add_special as in
   colibri_tokenize): the special tokens the template writes become their ids, but text
   inside the messages' content stays text — a user who types "<|im_end|>" gets those
   characters, not the control token — unless parse_special_in_content. Non-special added
   tokens are matched everywhere. Same buffer rules as colibri_tokenize. A rendered text
   longer than 64 bytes per position of the context (max_seq_len) is COLIBRI_ERR_RANGE,
   before it is tokenized. */
int colibri_chat_tokenize(colibri_engine_t *e, const colibri_chat_msg *msgs, size_t n, int add_generation_prompt,
                          int add_special, int parse_special_in_content, int32_t *ids, size_t cap, size_t *n_out);

/* Sampling, applied in one documented order (penalties, top-k, temperature, softmax, top-p,
   min-p, draw; temperature <= 0 is greedy). Same seed, same logits: same tokens. */
typedef struct colibri_sampling {
    float temperature;       /* default 0.8; <= 0 greedy */
    int32_t top_k;           /* default 40; <= 0 off */
    float top_p;             /* default 0.95; >= 1 off */
    float min_p;             /* default 0.05; <= 0 off */
    float repeat_penalty;    /* default 1 (off) */
    float frequency_penalty; /* default 0 */
    float presence_penalty;  /* default 0 */
    int32_t penalty_last_n;  /* default 64 */
    uint64_t seed;           /* default 0 */
} colibri_sampling;
typedef struct colibri_sampler colibri_sampler_t;
colibri_sampling colibri_sampling_default(void);
colibri_sampler_t *colibri_sampler_new(const colibri_sampling *p, int32_t n_vocab);
int colibri_sampler_sample(colibri_sampler_t *s, const float *logits, int32_t *token);
void colibri_sampler_accept(colibri_sampler_t *s, int32_t token);
void colibri_sampler_reset(colibri_sampler_t *s);
void colibri_sampler_free(colibri_sampler_t *s);

/* Stop strings while streaming text[0..len): returns 1 when a stop string starts at or after
   `from` (bytes already shown), with *match_pos its earliest start (the output ends there);
   otherwise 0 and *hold_back = the length of the longest tail that may still become a stop
   string (do not show it yet). */
int colibri_stop_check(const char *text, size_t len, size_t from, const char *const *stops, size_t n_stops,
                       size_t *match_pos, size_t *hold_back);

/* ---- model files ---- */

typedef struct colibri_convert_params {
    const char *dtype;        /* a type: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                 "q2_k" ... "q6_k", "iq4_nl", "iq4_xs", "mxfp4" (every matrix gets it),
                                 or a llama.cpp mix with a size suffix ("Q4_K_M", "Q3_K_S", ...);
                                 NULL keeps the source's dtypes (a GGUF's quantized blocks stay bit-exact) */
    const char *expert_dtype; /* routed experts: a type or a suffixed mix; NULL = as dtype */
    const char *expert_dtype_map; /* per-expert dtypes: "0-3:q8_0,4-7:q4_0" (every layer) or a
                                     JSON object {"*"|"L"|"L0-L1": "EXPERTS:dtype,..."} inline or
                                     in a .json file; overrides expert_dtype where it applies */
    void (*progress)(double fraction, void *user); /* may be NULL */
    void *user;
    const char *mix;          /* any llama-quantize type name as a mix ("Q4_K_M", "Q6_K", "IQ4_XS",
                                 "Q8_0", ...): each tensor gets the type llama-quantize gives it
                                 without an importance matrix (instead of dtype) */
    int32_t n_threads;        /* converting threads; 0 = every CPU */
    const char *compress;     /* "zstd", "zstd:LEVEL", "zlib", "zlib:LEVEL" (each expert and each
                                 dense tensor compressed on its own), "none"; NULL keeps the
                                 source's (a .colibri source's compression, else none) */
    int32_t byte_split;       /* 16-bit weights: compress exponent bytes apart from the low
                                 bytes (0 = yes, the default; -1 = no) */
    int32_t encrypt;          /* 1 = AES-256-GCM, each expert and dense tensor its own chunk; the
                                 key comes from the key callback (colibri_set_key_callback)
                                 asked for dst_path, else COLIBRI_KEY_FILE. -1 = write in the clear
                                 (needed to convert an encrypted source to a clear file); 0 = as
                                 the source (an encrypted source then fails with a message) */
    uint32_t segment_bytes;   /* compressed or encrypted output: plain bytes per segment (each
                                 compressed and authenticated on its own), a power of two in
                                 64 KiB..64 MiB; 0 = 4 MiB */
    const char *standin_dtype; /* a type ("q2_k", "q4_0", ...): every routed FFN expert also gets a
                                  stand-in of that type, quantized from the same weights, which a
                                  run with moe_standin computes instead of waiting for an expert
                                  not in memory (docs/MEMORY.md); NULL = none (a source's own
                                  stand-ins are kept as they are) */
} colibri_convert_params;

/* Converts a Hugging Face directory, GGUF file or .colibri file to a .colibri file,
   streaming tensor by tensor. bytes_in/bytes_out (may be NULL) receive the sizes.
   Router weights, norms and biases always stay f32. */
int colibri_convert(const char *src_path, const char *dst_path, const colibri_convert_params *p,
                    uint64_t *bytes_in, uint64_t *bytes_out);

/* Checks every CRC32 of a .colibri file: COLIBRI_OK when intact, COLIBRI_ERR_CORRUPT with the
   first corrupt tensor named in colibri_last_error() otherwise. An encrypted file is
   authenticated chunk by chunk when its key is available (see colibri_set_key_callback);
   without it only the stored bytes' CRCs are checked (colibri_verify_ex tells which). */
int colibri_verify(const char *path, uint64_t *bytes_checked);
/* colibri_verify, and *authenticated (may be NULL) = 1 when every chunk was decoded and
   checked (always for plain files), 0 when only the stored bytes could be (no key). */
int colibri_verify_ex(const char *path, uint64_t *bytes_checked, int *authenticated);

/* ---- encrypted models ---- */

/* Where keys come from: fn(path, key, user) fills the 32-byte key for the model file `path`
   (a device keystore, a KMS, a prompt) and returns 0, or non-zero to refuse. Called for
   every encrypted file opened (colibri_init, verify, inspect, convert's source) and for
   convert's encrypted output. Process-wide; NULL restores the default, which reads the key
   file named by the environment variable COLIBRI_KEY_FILE (32 raw bytes or 64 hex digits).
   The library wipes its copies of the key as soon as the file's keys are derived. */
typedef int (*colibri_key_fn)(const char *path, uint8_t key[32], void *user);
void colibri_set_key_callback(colibri_key_fn fn, void *user);
/* The key file to use when no callback is set, instead of COLIBRI_KEY_FILE (NULL: back to
   the environment). The path is copied; the file is read when a key is needed. */
int colibri_set_key_file(const char *path);
/* The AES-256-GCM code encrypted files use in this process: "ipsec-mb avx512" (or avx2, avx,
   sse: Intel's ipsec-mb, in x86-64 builds, chosen by the CPU at run time) or "libcrypto"
   (OpenSSL: other builds, CPUs without AES-NI, or the environment's COLIBRI_AES=libcrypto). */
const char *colibri_aes_name(void);

/* A human-readable description of a model file (header, configuration, tensor summary,
   bytes per expert). Heap string: release with colibri_string_free. NULL on error. */
char *colibri_inspect(const char *path);
void colibri_string_free(char *s);

/* ---- expert parallelism (docs/SCALE.md) ----
   Several processes ("ranks") run one model together: each holds the dense weights and reads
   only the routed experts it owns; per MoE layer every rank routes the same tokens, computes
   the rows of the (token, expert) assignments whose expert it owns, and an exchange gives
   every rank every row, after which each rank forms the weighted sums itself in selection
   order, as one process does: every rank holds identical state, bit for bit, and so do its
   logits. The library knows no transport: the caller (e.g. colibri-mpi over MPI) supplies it.
   begin() starts the exchange: this rank's rows (send_floats floats) go to every rank, and
   recv receives the rows of all ranks concatenated in rank order, counts[r] floats from rank r
   (identical on every rank); the engine computes the shared expert before it calls end(),
   which completes the exchange. Both return 0, or nonzero after a failure (the evaluation
   then fails with COLIBRI_ERR_IO; the transport says why). owner (NULL: expert x of every
   layer on rank x % n_ranks) places each expert on one rank. */
typedef struct colibri_expert_exec {
    int32_t rank, n_ranks;
    int (*begin)(void *ctx, const float *send, int64_t send_floats, float *recv, const int64_t *counts);
    int (*end)(void *ctx);
    int32_t (*owner)(void *ctx, int32_t layer, int32_t expert);
    void *ctx;
} colibri_expert_exec;
/* Makes engine e one rank of a group (x NULL: back to one process). Call between evaluations.
   Every rank must open the same model with the same settings and make the same calls.
   Memory: an engine opened with a default executor (below) holds only its own share of the
   routed experts. Set on an open engine, or changed, the placement still gives the same
   results, but the engine keeps what it holds and reads newly assigned experts of a plain
   file from its mapping (an encoded .colibri opened unbounded cannot: COLIBRI_ERR_ARG at
   the first evaluation that needs one). */
int colibri_set_expert_exec(colibri_engine_t *e, const colibri_expert_exec *x);
/* The executor colibri_init / colibri_init_params give every engine they open (x NULL: none);
   the structure is copied. For a driver that runs unchanged front-end code on every rank.
   Such an engine never copies, decodes, locks or reads another rank's experts: its memory
   is the dense weights plus its share, in the unbounded mode and in a pool (the memory
   budget applies per rank). */
void colibri_set_default_expert_exec(const colibri_expert_exec *x);

/* Library version string, e.g. "0.1.0". */
const char *colibri_version(void);

#ifdef __cplusplus
}
#endif
#endif /* COLIBRI_H */
