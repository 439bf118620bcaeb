/* test_embed.c — colibri_init_ex (docs/EMBEDDING.md): the bundled model served from a memory
 * buffer through a read callback (or a map callback) into a caller's block.
 *
 * The binary is linked with -Wl,--wrap for the C library's allocation calls (malloc,
 * calloc, realloc, free, posix_memalign, aligned_alloc, mmap) and file calls (open, openat,
 * fopen, pread, stat), so every call the library makes to them is counted here: an
 * embedded init and the decoding after it must make none, in the unbounded mode and in the
 * bounded mode (experts read through the callback into a pool in the block), and the logits
 * must be bit-identical to colibri_init's on the same file. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "colibri.h"
#include "embed_example.c" /* docs/EMBEDDING.md's example, extracted by the Makefile */

#define MODEL "models/colibri-tiny.colibri"
#define N_DECODE 48

/* ---- the counting wrappers ---- */

static atomic_int counting;
static atomic_ulong n_alloc, n_file;

/* WRAP(ret, name, counter, (params), (args)): __real_name's prototype and a __wrap_name that
   counts, then calls it */
#define WRAP(ret, name, counter, params, args) \
    ret __real_##name params;                  \
    ret __wrap_##name params;                  \
    ret __wrap_##name params {                 \
        if (atomic_load(&counting)) atomic_fetch_add(&counter, 1); \
        return __real_##name args;             \
    }
WRAP(void *, malloc, n_alloc, (size_t n), (n))
WRAP(void *, calloc, n_alloc, (size_t n, size_t s), (n, s))
WRAP(void *, realloc, n_alloc, (void *p, size_t n), (p, n))
WRAP(int, posix_memalign, n_alloc, (void **p, size_t a, size_t n), (p, a, n))
WRAP(void *, aligned_alloc, n_alloc, (size_t a, size_t n), (a, n))
WRAP(void *, mmap, n_alloc, (void *a, size_t n, int prot, int flags, int fd, off_t off), (a, n, prot, flags, fd, off))
WRAP(FILE *, fopen, n_file, (const char *path, const char *mode), (path, mode))
WRAP(ssize_t, pread, n_file, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off))
WRAP(int, stat, n_file, (const char *path, struct stat *st), (path, st))
void __real_free(void *p);
void __wrap_free(void *p);
void __wrap_free(void *p) {
    if (atomic_load(&counting)) atomic_fetch_add(&n_alloc, 1);
    __real_free(p);
}
/* open and openat take a mode only with O_CREAT */
int __real_open(const char *path, int flags, ...);
int __real_openat(int dir, const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);
int __wrap_openat(int dir, const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int mode = (flags & O_CREAT) ? va_arg(ap, int) : 0;
    va_end(ap);
    if (atomic_load(&counting)) atomic_fetch_add(&n_file, 1);
    return __real_open(path, flags, mode);
}
int __wrap_openat(int dir, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int mode = (flags & O_CREAT) ? va_arg(ap, int) : 0;
    va_end(ap);
    if (atomic_load(&counting)) atomic_fetch_add(&n_file, 1);
    return __real_openat(dir, path, flags, mode);
}

static void count_start(void) {
    atomic_store(&n_alloc, 0);
    atomic_store(&n_file, 0);
    atomic_store(&counting, 1);
}
static void count_stop(void) { atomic_store(&counting, 0); }

/* ---- the model in memory, behind callbacks ---- */

static const char *model_path = MODEL; /* the model the tests run (use_model) */
static unsigned char *model_bytes;
static uint64_t model_size;

typedef struct src_ctx {
    const unsigned char *bytes;
    uint64_t size;
    atomic_ulong calls, bytes_read;
    atomic_long fail_after; /* > 0: the call after this many fails (-1: never) */
    int fail_kind;          /* 0: returns -5; 1: a short read */
} src_ctx;

static int64_t src_read(void *ctx, uint64_t off, size_t len, void *dst) {
    src_ctx *c = ctx;
    const unsigned long k = atomic_fetch_add(&c->calls, 1);
    if (atomic_load(&c->fail_after) >= 0 && k >= (unsigned long)atomic_load(&c->fail_after))
        return c->fail_kind ? (int64_t)(len / 2) : -5;
    if (off > c->size || len > c->size - off) return -1;
    memcpy(dst, c->bytes + off, len);
    atomic_fetch_add(&c->bytes_read, len);
    return (int64_t)len;
}
static int src_size(void *ctx, uint64_t *size) {
    *size = ((src_ctx *)ctx)->size;
    return 0;
}
static const void *src_map(void *ctx, uint64_t size) {
    src_ctx *c = ctx;
    return size == c->size ? c->bytes : NULL;
}

static void ctx_init(src_ctx *c) {
    memset(c, 0, sizeof *c);
    c->bytes = model_bytes;
    c->size = model_size;
    atomic_store(&c->fail_after, -1);
}

static colibri_source make_source(src_ctx *c, int with_map) {
    colibri_source s = {.read = src_read, .size = src_size, .ctx = c, .name = "membuf"};
    if (with_map) s.map = src_map;
    return s;
}

/* reads path into model_bytes (the model every test below uses) */
static int use_model(const char *path) {
    free(model_bytes);
    model_bytes = NULL;
    model_path = path;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    model_size = (uint64_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    model_bytes = malloc((size_t)model_size);
    size_t got = fread(model_bytes, 1, (size_t)model_size, f);
    fclose(f);
    return got == model_size ? 0 : -1;
}
static int setup(void **state) {
    (void)state;
    return use_model(MODEL);
}
static int teardown(void **state) {
    (void)state;
    free(model_bytes);
    return 0;
}

static const int32_t PROMPT[] = {4092, 17, 300, 447, 12, 999, 3, 2048};
#define NP ((int)(sizeof PROMPT / sizeof PROMPT[0]))

static colibri_params test_params(int bounded) {
    colibri_params p = colibri_params_default();
    p.n_threads = 2;
    p.max_seq_len = 128;
    p.n_batch = 8;
    if (bounded == 1) p.expert_pool_bytes = 6 * 160 * 1024; /* the bundled model: 5 of its 32 experts */
    if (bounded == 2) p.expert_pool_bytes = 512 * 1024;     /* the GGUF fixture: 4 of its 16 */
    return p;
}

/* prompt logits, then N_DECODE greedy steps' logits: [(1 + N_DECODE)][V] */
static void run(colibri_engine_t *e, float *out, int V) {
    int32_t ids[NP]; /* the prompt within the vocabulary */
    for (int i = 0; i < NP; i++) ids[i] = PROMPT[i] % V;
    assert_int_equal(colibri_eval(e, ids, NP - 1, NULL, 0), COLIBRI_OK);
    int32_t tok = ids[NP - 1];
    for (int i = 0; i <= N_DECODE; i++)
        assert_int_equal(colibri_forward_ex(e, tok, out + (size_t)i * (size_t)V, (size_t)V, &tok), COLIBRI_OK);
}

/* colibri_init's logits on the file (run's), with room for as many more in *got */
static float *reference(const colibri_params *p, int *V, size_t *n, float **got) {
    count_start(); /* the wrappers see colibri_init's calls: they are in effect */
    colibri_engine_t *ref = colibri_init_params(model_path, p);
    count_stop();
    assert_non_null(ref);
    assert_true(atomic_load(&n_alloc) > 10);
    assert_true(atomic_load(&n_file) >= 1);
    *V = colibri_n_vocab(ref);
    *n = (size_t)(1 + N_DECODE) * (size_t)*V;
    float *want = malloc(*n * sizeof(float));
    *got = malloc(*n * sizeof(float));
    run(ref, want, *V);
    colibri_free(ref);
    return want;
}

/* init from the file, then from the buffer in a block: same logits; and no allocation or
   file call from the embedded init on */
static void check_mode(int bounded, int with_map) {
    colibri_params p = test_params(bounded);
    int V;
    size_t n;
    float *got, *want = reference(&p, &V, &n, &got);

    src_ctx c;
    ctx_init(&c);
    colibri_source s = make_source(&c, with_map);
    uint64_t need = 0;
    assert_int_equal(colibri_embed_size(&s, &p, &need), COLIBRI_OK);
    assert_true(need > 0);
    void *block = malloc((size_t)need);
    atomic_store(&c.bytes_read, 0);

    count_start();
    colibri_engine_t *e = colibri_init_ex(&s, &p, block, (size_t)need);
    const unsigned long init_alloc = atomic_load(&n_alloc), init_file = atomic_load(&n_file);
    const unsigned long init_read = atomic_load(&c.bytes_read);
    if (!e) fprintf(stderr, "colibri_init_ex: %s\n", colibri_last_error());
    assert_non_null(e);
    atomic_store(&n_alloc, 0);
    atomic_store(&n_file, 0);
    run(e, got, V);
    colibri_stats_t st = colibri_get_stats(e);
    const unsigned long run_alloc = atomic_load(&n_alloc), run_file = atomic_load(&n_file);
    colibri_free(e);
    const unsigned long free_alloc = atomic_load(&n_alloc) - run_alloc;
    count_stop();

    printf("embed %s%s: block %llu bytes (model %llu); init read %lu bytes through the callback; C-library "
           "calls: init %lu alloc / %lu file, %d tokens decoded %lu alloc / %lu file, free %lu; expert bytes read "
           "after init %llu (pool of %d experts); logits %s\n",
           bounded ? "bounded" : "unbounded", with_map ? " (map)" : "", (unsigned long long)need,
           (unsigned long long)model_size, init_read, init_alloc, init_file, NP + N_DECODE, run_alloc, run_file,
           free_alloc, (unsigned long long)st.expert_bytes_read_total, st.expert_pool_slots,
           memcmp(want, got, n * sizeof(float)) ? "DIFFER" : "bit-identical");
    assert_int_equal(init_alloc, 0);
    assert_int_equal(init_file, 0);
    assert_int_equal(run_alloc, 0);
    assert_int_equal(run_file, 0);
    assert_int_equal(free_alloc, 0);
    assert_memory_equal(want, got, n * sizeof(float));
    if (bounded) {
        /* the experts were not read at init but on demand, through the callback, into the pool */
        assert_true(init_read < model_size / 2);
        assert_true(st.expert_pool_slots > 0 && st.expert_pool_slots < st.n_layers * st.n_experts);
        assert_true(st.expert_bytes_read_total > 0);
        assert_true(st.expert_evictions_total > 0);
    } else if (with_map) {
        assert_true(need < model_size / 2); /* the weights stay where the map points */
        assert_int_equal(init_read, 8);     /* the magic alone */
    } else {
        assert_true(need > model_size); /* the whole file is in the block */
    }
    free(block);
    free(want);
    free(got);
}

static void test_unbounded(void **state) {
    (void)state;
    check_mode(0, 0);
}
static void test_unbounded_map(void **state) {
    (void)state;
    check_mode(0, 1);
}
static void test_bounded(void **state) {
    (void)state;
    check_mode(1, 0);
}

/* a GGUF file (the mixtral fixture, Q4_0, stacked experts served as slices): read whole,
   mapped, and bounded with a map (the pool filled through read); bounded without a map is
   refused (GGUF is not streamed) */
static void test_gguf(void **state) {
    (void)state;
    assert_int_equal(use_model("tests/fixtures/mixtral/model-q4_0.gguf"), 0);
    check_mode(0, 0);
    check_mode(0, 1);
    check_mode(2, 1);
    colibri_params p = test_params(2);
    src_ctx c;
    ctx_init(&c);
    colibri_source s = make_source(&c, 0);
    assert_null(colibri_init_ex(&s, &p, NULL, 0));
    assert_non_null(strstr(colibri_last_error(), "GGUF"));
    assert_int_equal(use_model(MODEL), 0);
}

/* the source on the C heap (no block) gives the same logits too */
static void test_source_no_block(void **state) {
    (void)state;
    colibri_params p = test_params(1);
    int V;
    size_t n;
    float *got, *want = reference(&p, &V, &n, &got);
    src_ctx c;
    ctx_init(&c);
    colibri_source s = make_source(&c, 0);
    colibri_engine_t *e = colibri_init_ex(&s, &p, NULL, 0);
    assert_non_null(e);
    run(e, got, V);
    colibri_free(e);
    assert_memory_equal(want, got, n * sizeof(float));
    free(want);
    free(got);
}

/* the bounded mode's parameters, a source over the buffer, and the block it needs */
static uint64_t bounded_setup(colibri_params *p, src_ctx *c, colibri_source *s) {
    *p = test_params(1);
    ctx_init(c);
    *s = make_source(c, 0);
    uint64_t need = 0;
    assert_int_equal(colibri_embed_size(s, p, &need), COLIBRI_OK);
    return need;
}

/* a block too small: one line naming the bytes needed (colibri_embed_size's figure) */
static void test_block_too_small(void **state) {
    (void)state;
    colibri_params p;
    src_ctx c;
    colibri_source s;
    const uint64_t need = bounded_setup(&p, &c, &s);
    char expect[64];
    snprintf(expect, sizeof expect, "needs %llu bytes", (unsigned long long)need);
    /* need is the measured peak plus CLB_HEAP_ALIGN (4096) for where the block's start falls, and the
       measuring run's layout may round one piece more up to a page than the real run does:
       a block a page short can fit, two pages short cannot */
    const size_t sizes[] = {16, 4096, (size_t)need / 2, (size_t)need - 2 * 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *block = malloc(sizes[i]);
        memset(block, 0xa5, sizes[i]);
        colibri_engine_t *e = colibri_init_ex(&s, &p, block, sizes[i]);
        assert_null(e);
        const char *msg = colibri_last_error();
        if (i == 2) printf("block of %zu bytes: %s\n", sizes[i], msg);
        assert_non_null(strstr(msg, "too small"));
        assert_non_null(strstr(msg, expect));
        assert_null(strchr(msg, '\n'));
        free(block);
    }
    /* and the exact figure is enough */
    void *block = malloc((size_t)need);
    colibri_engine_t *e = colibri_init_ex(&s, &p, block, (size_t)need);
    assert_non_null(e);
    colibri_free(e);
    free(block);
}

/* a failing or short read at any point of init: NULL and a message, never a crash; then
   the same during decoding in the bounded mode: COLIBRI_ERR_IO and the engine goes on */
static void test_read_errors(void **state) {
    (void)state;
    colibri_params p;
    src_ctx c;
    colibri_source s;
    const uint64_t need = bounded_setup(&p, &c, &s);
    const unsigned long init_calls = atomic_load(&c.calls);
    assert_true(init_calls > 3);
    void *block = malloc((size_t)need);
    for (int kind = 0; kind < 2; kind++)
        for (unsigned long k = 0; k < init_calls; k++) {
            ctx_init(&c);
            c.fail_kind = kind;
            atomic_store(&c.fail_after, (long)k);
            colibri_engine_t *e = colibri_init_ex(&s, &p, block, (size_t)need);
            assert_null(e);
            const char *msg = colibri_last_error();
            if (k == 1) printf("read %s at call %lu: %s\n", kind ? "short" : "error", k, msg);
            assert_non_null(strstr(msg, kind ? "short read" : "read callback failed"));
        }
    /* after init: the experts' reads fail */
    ctx_init(&c);
    colibri_engine_t *e = colibri_init_ex(&s, &p, block, (size_t)need);
    assert_non_null(e);
    atomic_store(&c.fail_after, (long)atomic_load(&c.calls));
    int32_t tok = 0;
    int rc = colibri_eval(e, PROMPT, NP, NULL, 0);
    assert_int_equal(rc, COLIBRI_ERR_IO);
    printf("expert read failing after init: %s\n", colibri_last_error());
    atomic_store(&c.fail_after, -1); /* the source recovers: so does the engine */
    colibri_reset(e);
    assert_int_equal(colibri_eval(e, PROMPT, NP, NULL, 0), COLIBRI_OK);
    assert_int_equal(colibri_forward(e, PROMPT[0], NULL, &tok), COLIBRI_OK);
    colibri_free(e);
    free(block);
}

/* bad sources: one line each */
static void test_bad_sources(void **state) {
    (void)state;
    colibri_params p = test_params(0);
    assert_null(colibri_init_ex(NULL, &p, NULL, 0));
    colibri_source none = {0};
    assert_null(colibri_init_ex(&none, &p, NULL, 0));
    assert_non_null(strstr(colibri_last_error(), "read callback"));
    src_ctx c;
    ctx_init(&c);
    colibri_source s = make_source(&c, 0);
    s.size = NULL;
    s.length = 0;
    assert_null(colibri_init_ex(&s, &p, NULL, 0));
    assert_non_null(strstr(colibri_last_error(), "empty"));
    /* garbage, a truncated file (header, metadata), a file past its length */
    unsigned char junk[4096];
    memset(junk, 'x', sizeof junk);
    c.bytes = junk;
    c.size = sizeof junk;
    s = make_source(&c, 0);
    assert_null(colibri_init_ex(&s, &p, NULL, 0));
    assert_non_null(strstr(colibri_last_error(), "not a model file"));
    const uint64_t cuts[] = {64, 200, 100000, 120000, model_size / 2};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        for (int bounded = 0; bounded < 2; bounded++) {
            colibri_params pb = test_params(bounded);
            ctx_init(&c);
            c.size = cuts[i];
            s = make_source(&c, 0);
            void *block = malloc(1 << 20);
            assert_null(colibri_init_ex(&s, &pb, block, 1 << 20));
            assert_true(strlen(colibri_last_error()) > 0);
            free(block);
        }
    /* refused options */
    ctx_init(&c);
    s = make_source(&c, 0);
    p.usage_stats = 1;
    assert_null(colibri_init_ex(&s, &p, NULL, 0));
    assert_non_null(strstr(colibri_last_error(), "usage_stats"));
    uint64_t need;
    assert_int_not_equal(colibri_embed_size(&s, &p, &need), COLIBRI_OK);
}

/* docs/EMBEDDING.md's example: its greedy tokens are colibri_init's */
static void test_doc_example(void **state) {
    (void)state;
    colibri_params p = colibri_params_default();
    p.n_threads = 1;
    p.max_seq_len = 64;
    p.expert_pool_bytes = 1 << 20;
    colibri_engine_t *ref = colibri_init_params(MODEL, &p);
    assert_non_null(ref);
    int32_t want[16], got[16];
    assert_int_equal(colibri_eval(ref, PROMPT, NP - 1, NULL, 0), COLIBRI_OK);
    int32_t tok = PROMPT[NP - 1];
    for (int i = 0; i < 16; i++) {
        assert_int_equal(colibri_forward(ref, tok, NULL, &tok), COLIBRI_OK);
        want[i] = tok;
    }
    colibri_free(ref);
    membuf m = {model_bytes, model_size};
    colibri_source s = {.read = membuf_read, .ctx = &m, .length = model_size};
    uint64_t need = 0;
    assert_int_equal(colibri_embed_size(&s, &p, &need), COLIBRI_OK);
    void *block = malloc((size_t)need);
    assert_int_equal(embed_example(model_bytes, model_size, block, (size_t)need, PROMPT, NP, got, 16), COLIBRI_OK);
    assert_memory_equal(want, got, sizeof want);
    free(block);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbounded),       cmocka_unit_test(test_unbounded_map),
        cmocka_unit_test(test_bounded),         cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_source_no_block),
        cmocka_unit_test(test_block_too_small), cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_bad_sources),     cmocka_unit_test(test_doc_example),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
