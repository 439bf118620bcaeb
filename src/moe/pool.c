/* pool.c — the expert pool's memory and guard mode.
 *
 * The pool is one anonymous mapping of n_slots fixed-size slots, each a whole number of
 * 4 KiB pages. Every expert of a model has the same byte size in practice (all experts of
 * a layer always do), so a slot allocator has no fragmentation at all, where a buddy
 * allocator would round each ~99 MB Mixtral expert up to 128 MiB (docs/MEMORY.md). Pages
 * are untouched (not resident) until a load writes them.
 *
 * Guard mode (COLIBRI_GUARD=1): a slot is PROT_NONE except while a load writes it
 * (read-write) or an acquire pins it (read-only). A SIGSEGV inside the pool is reported
 * with the layer and expert of the slot, then the process exits with CLB_GUARD_EXIT: the
 * one place the library ends the process, and only in this opt-in debugging mode. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/common.h"
#include "core/platform.h"
#include "moe/store_impl.h"

int clb_pool_map(clb_expert_store *s) {
    uint64_t bytes;
    if (!clb_mul_u64(s->slot_bytes, (uint64_t)s->n_slots, &bytes) || bytes > SIZE_MAX)
        return clb_err(COLIBRI_ERR_NOMEM, "expert pool of %d x %llu bytes is too large", s->n_slots,
                       (unsigned long long)s->slot_bytes);
    /* from the caller's block under colibri_init_ex (core/heap.h) */
    void *p = clb_map_anon(bytes, s->cfg.guard);
    if (!p)
        return clb_err(COLIBRI_ERR_NOMEM, "cannot map an expert pool of %llu bytes: %s", (unsigned long long)bytes,
                       strerror(errno));
    /* A decoded (decrypted, decompressed) expert is written by user code, which faults a page
       at a time; O_DIRECT reads fault the pages in inside the kernel. Huge pages make the
       first fill of a slot cheap either way (guard mode protects slot by slot: left alone). */
    if (!s->cfg.guard) clb_advise_huge(p, bytes);
    s->pool = p;
    s->pool_map_bytes = bytes;
    return COLIBRI_OK;
}

void clb_pool_unmap(clb_expert_store *s) {
    clb_unmap(s->pool, s->pool_map_bytes);
    s->pool = NULL;
}

uint8_t *clb_pool_slot(clb_expert_store *s, int slot) { return s->pool + (uint64_t)slot * s->slot_bytes; }

void clb_pool_protect(clb_expert_store *s, int slot, int mode) {
    static const int prots[3] = {PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE};
    mprotect(clb_pool_slot(s, slot), (size_t)s->slot_bytes, prots[mode]);
}

/* ---- the SIGSEGV handler (async-signal-safe: write(2) and _exit only) ---- */

#define GUARD_MAX 8
static clb_expert_store *volatile g_guarded[GUARD_MAX];
static struct sigaction g_old;
static int g_installed;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t put_str(char *b, size_t k, size_t cap, const char *s) {
    while (*s && k + 1 < cap) b[k++] = *s++;
    return k;
}

static size_t put_u64(char *b, size_t k, size_t cap, uint64_t v, int base) {
    char t[24];
    int n = 0;
    do {
        t[n++] = "0123456789abcdef"[v % (uint64_t)base];
        v /= (uint64_t)base;
    } while (v && n < 24);
    while (n && k + 1 < cap) b[k++] = t[--n];
    return k;
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARD_MAX; i++) {
        clb_expert_store *s = g_guarded[i];
        if (!s || !s->pool || a < (uintptr_t)s->pool || a >= (uintptr_t)s->pool + s->pool_map_bytes) continue;
        int slot = (int)((a - (uintptr_t)s->pool) / s->slot_bytes);
        int xi = s->slot_owner[slot];
        char b[320];
        size_t k = put_str(b, 0, sizeof b, "colibri guard: access to expert pool address 0x");
        k = put_u64(b, k, sizeof b, a, 16);
        k = put_str(b, k, sizeof b, " (slot ");
        k = put_u64(b, k, sizeof b, (uint64_t)slot, 10);
        if (xi >= 0 && s->n_expert > 0) {
            const clb_st_expert *x = &s->ex[xi];
            k = put_str(b, k, sizeof b, ") of layer ");
            k = put_u64(b, k, sizeof b, (uint64_t)(xi / s->n_expert), 10);
            k = put_str(b, k, sizeof b, " expert ");
            k = put_u64(b, k, sizeof b, (uint64_t)(xi % s->n_expert), 10);
            k = put_str(b, k, sizeof b,
                        x->state == ES_LOADING ? ", which is still loading" : ", which is resident but not acquired");
        } else {
            k = put_str(b, k, sizeof b, "), a slot holding no expert (evicted or never loaded)");
        }
        k = put_str(b, k, sizeof b, "\n");
        ssize_t w = write(2, b, k);
        (void)w;
        _exit(CLB_GUARD_EXIT);
    }
    /* not ours: hand over to whatever handled SIGSEGV before */
    if ((g_old.sa_flags & SA_SIGINFO) && g_old.sa_sigaction) {
        g_old.sa_sigaction(sig, si, uc);
        return;
    }
    if (g_old.sa_handler != SIG_IGN && g_old.sa_handler != SIG_DFL && g_old.sa_handler) {
        g_old.sa_handler(sig);
        return;
    }
    signal(SIGSEGV, SIG_DFL); /* the faulting access repeats and ends the process */
}

int clb_guard_install(clb_expert_store *s) {
    pthread_mutex_lock(&g_mu);
    int rc = COLIBRI_OK, free_i = -1;
    for (int i = 0; i < GUARD_MAX; i++)
        if (!g_guarded[i]) {
            free_i = i;
            break;
        }
    if (free_i < 0) {
        rc = clb_err(COLIBRI_ERR_ARG, "guard mode: at most %d guarded engines at once", GUARD_MAX);
    } else {
        if (!g_installed) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_segv;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            if (sigaction(SIGSEGV, &sa, &g_old) != 0)
                rc = clb_err(COLIBRI_ERR_INTERNAL, "guard mode: sigaction: %s", strerror(errno));
        }
        if (!rc) {
            g_installed++;
            g_guarded[free_i] = s;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

void clb_guard_remove(clb_expert_store *s) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < GUARD_MAX; i++)
        if (g_guarded[i] == s) {
            g_guarded[i] = NULL;
            if (--g_installed == 0) sigaction(SIGSEGV, &g_old, NULL);
        }
    pthread_mutex_unlock(&g_mu);
}
