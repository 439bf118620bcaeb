/* attn_opts.h — the attention and KV-cache options shared by `colibri run`, `chat`, `bench`
 * and `perplexity` (llama.cpp's names). Header-only, like mem_opts.h. */
#ifndef CLB_CLI_ATTN_OPTS_H
#define CLB_CLI_ATTN_OPTS_H

#include <string.h>

#include "cli.h"
#include "colibri.h"

#define ATTN_OPTS_HELP                                                                             \
    "  -ctk, --cache-type-k T  KV cache type of the keys: f32, f16 (default), bf16, q8_0, q4_0\n"  \
    "  -ctv, --cache-type-v T  ... of the values (MLA models cache one latent: -ctk sets it)\n"     \
    "  -fa, --flash-attn on|off|auto  flash attention (auto: on unless both caches are f32;\n"     \
    "                        off needs f32 caches and keeps the plain path's exact arithmetic)\n"  \
    "  --mla latent|decompressed  DeepSeek MLA: cache the compressed latent and attend in the\n"  \
    "                        latent space (default), or cache K and V decompressed per head\n"

/* Context options of the subcommands that generate (run, chat): a full context shifts by
   default (llama.cpp's context shift), --no-context-shift stops instead. */
#define CTX_OPTS_HELP                                                                              \
    "  --no-context-shift    stop when the context (max_seq_len) is full, instead of dropping\n"  \
    "                        the older half of it after the kept start and going on\n"           \
    "  --keep N              tokens of the prompt a context shift keeps (default 0 besides BOS;\n" \
    "                        -1 = the whole prompt)\n"                                            \
    "  --prompt-cache FILE   reuse the evaluated prompt saved in FILE (same model and cache\n"    \
    "                        types) and save the prompt's state there\n"

typedef struct ctx_opts {
    long keep;                /* --keep (-1: the whole prompt) */
    const char *prompt_cache; /* --prompt-cache FILE */
} ctx_opts;

/* Like attn_opts_parse for the options above (c: their values; p->ctx_shift). */
static inline int ctx_opts_parse(colibri_params *p, ctx_opts *c, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    if (!strcmp(a, "--no-context-shift")) return p->ctx_shift = 0, 1;
    if (!strcmp(a, "--context-shift")) return p->ctx_shift = 1, 1;
    if (strcmp(a, "--keep") && strcmp(a, "--prompt-cache")) return 0;
    if (!(val = cli_value(argc, argv, i))) return -1;
    if (a[2] == 'p') {
        c->prompt_cache = val;
    } else if (!cli_int(val, -1, 1 << 24, &c->keep)) {
        return cli_fail("--keep: '%s' is not a count (or -1)", val), -1;
    }
    return 1;
}

/* Sets what a context shift keeps of a prompt of n ids: --keep (plus a leading BOS), or all. */
static inline void ctx_opts_keep(colibri_engine_t *e, const ctx_opts *c, const int32_t *ids, size_t n) {
    long k = c->keep < 0 ? (long)n : c->keep + (n && ids[0] == colibri_bos_id(e) ? 1 : 0);
    if (k > (long)n) k = (long)n;
    if (k >= colibri_max_seq_len(e)) k = colibri_max_seq_len(e) / 2;
    colibri_seq_set_keep(e, 0, (int32_t)k);
}

/* Returns 1 when argv[*i] was one of these options (consumed), 0 when not, -1 on a bad value. */
static inline int attn_opts_parse(colibri_params *p, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val;
    const bool k = !strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k");
    const bool v = !strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v");
    const bool fa = !strcmp(a, "-fa") || !strcmp(a, "--flash-attn"), mla = !strcmp(a, "--mla");
    if (!k && !v && !fa && !mla) return 0;
    if (!(val = cli_value(argc, argv, i))) return -1;
    if (mla) {
        if (!strcmp(val, "latent")) p->mla = 1;
        else if (!strcmp(val, "decompressed")) p->mla = -1;
        else return cli_fail("--mla: '%s' is not latent or decompressed", val), -1;
        return 1;
    }
    if (fa) {
        if (!strcmp(val, "on") || !strcmp(val, "1")) p->flash_attn = 1;
        else if (!strcmp(val, "off") || !strcmp(val, "0")) p->flash_attn = -1;
        else if (!strcmp(val, "auto")) p->flash_attn = 0;
        else return cli_fail("%s: '%s' is not on, off or auto", a, val), -1;
        return 1;
    }
    const int t = colibri_kv_type_from_name(val);
    if (t < 0) return cli_fail("%s: '%s' is not f32, f16, bf16, q8_0 or q4_0", a, val), -1;
    if (k) p->cache_type_k = t;
    else p->cache_type_v = t;
    return 1;
}

#endif
