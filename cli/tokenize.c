/* tokenize.c — `colibri tokenize`: text -> ids, ids -> text, and a tokenizer benchmark. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenize.h"
#include "core/common.h"
#include "core/platform.h"
#include "format/container.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

#define MAX_JSON (512u << 20)

static void usage(FILE *f) {
    fputs("usage: colibri tokenize (-m MODEL | --tokenizer FILE) [options]\n"
          "  -m MODEL          a .colibri file, a .gguf file or a Hugging Face directory\n"
          "  --tokenizer FILE  a tokenizer.json (tokenizer_config.json beside it is used) or a\n"
          "                    .gguf vocabulary\n"
          "  --text T          the input (default: standard input)\n"
          "  --special         add BOS/EOS (the post-processor's template) as the tokenizer says\n"
          "  --no-parse-special  special tokens written in the text stay text (by default every\n"
          "                    added token, special or not, becomes its id, as Hugging Face's\n"
          "                    encode(text) and llama.cpp's llama-tokenize do)\n"
          "  --parse-special   the default (kept for scripts)\n"
          "  --decode          read token ids (space/comma separated), print the text\n"
          "  --skip-special    with --decode: drop special tokens\n"
          "  --jsonl           batch mode: each input line is a JSON string (with --decode a JSON\n"
          "                    array of ids); prints one line per input (ids, or a JSON string)\n"
          "  --bench FILE      tokenize FILE repeatedly and print MB/s\n"
          "  --help            this text\n",
          f);
}

static int fail(const char *msg) {
    fprintf(stderr, "colibri: %s\n", msg);
    return 1;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static bool is_gguf(const char *path) {
    FILE *f = fopen(path, "rb");
    char m[4] = {0};
    if (!f) return false;
    size_t r = fread(m, 1, 4, f);
    fclose(f);
    return r == 4 && memcmp(m, "GGUF", 4) == 0;
}

static clb_tokenizer *load_hf_file(const char *json_path) {
    char *js = NULL, *cfg = NULL;
    size_t jl = 0, cl = 0;
    if (clb_read_file(json_path, MAX_JSON, &js, &jl) != COLIBRI_OK) return NULL;
    /* tokenizer_config.json in the same directory */
    const char *slash = strrchr(json_path, '/');
    size_t dl = slash ? (size_t)(slash - json_path) : 0;
    char *dir = clb_malloc(dl + 2);
    if (dir) {
        if (slash) memcpy(dir, json_path, dl);
        else dir[dl++] = '.';
        dir[dl] = 0;
        char *cp = clb_path_join(dir, "tokenizer_config.json");
        if (cp && clb_file_exists(cp)) clb_read_file(cp, MAX_JSON, &cfg, &cl);
        clb_free(cp);
        clb_free(dir);
    }
    clb_tokenizer *t = clb_tokenizer_from_hf(js, jl, cfg);
    clb_free(js);
    clb_free(cfg);
    return t;
}

static clb_tokenizer *load_gguf_file(const char *path) {
    clb_gguf g;
    if (clb_gguf_open(path, &g) != COLIBRI_OK) return NULL;
    clb_tokenizer *t = clb_tokenizer_from_gguf(&g);
    clb_gguf_close(&g);
    return t;
}

static clb_tokenizer *load_model(const char *path) {
    if (clb_is_dir(path)) {
        char *p = clb_path_join(path, "tokenizer.json");
        clb_tokenizer *t = p ? load_hf_file(p) : NULL;
        clb_free(p);
        return t;
    }
    if (is_gguf(path)) return load_gguf_file(path);
    if (ends_with(path, ".json")) return load_hf_file(path);
    clb_container c;
    if (clb_container_open(path, &c) != COLIBRI_OK) return NULL;
    clb_tokenizer *t = NULL;
    if (!c.tokenizer) clb_err(COLIBRI_ERR_FORMAT, "%s: the model has no tokenizer", path);
    else t = clb_tokenizer_from_json(c.tokenizer);
    clb_container_close(&c);
    return t;
}

static int read_stdin(char **out, size_t *len) {
    size_t cap = 65536, n = 0;
    char *b = clb_malloc(cap + 1);
    if (!b) return COLIBRI_ERR_NOMEM;
    for (;;) {
        size_t r = fread(b + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) break;
        if (n == cap) {
            char *q = clb_realloc(b, (cap *= 2) + 1);
            if (!q) { clb_free(b); return COLIBRI_ERR_NOMEM; }
            b = q;
        }
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return COLIBRI_OK;
}

static int print_ids(const clb_tokenizer *t, const char *text, size_t len, bool add, bool parse) {
    size_t n = 0, cap = len + 16;
    int32_t *ids = clb_malloc(cap * sizeof *ids);
    if (!ids) return fail("out of memory");
    int rc = clb_tokenize(t, text, len, add, parse, ids, cap, &n);
    if (rc == COLIBRI_ERR_ARG && n > cap) {
        clb_free(ids);
        cap = n;
        ids = clb_malloc(cap * sizeof *ids);
        if (!ids) return fail("out of memory");
        rc = clb_tokenize(t, text, len, add, parse, ids, cap, &n);
    }
    if (rc != COLIBRI_OK) { clb_free(ids); return fail(clb_last_error()); }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    putchar('\n');
    clb_free(ids);
    return 0;
}

/* Parses "1 2, 3" into ids. */
static int parse_ids(const char *s, int32_t **out, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *ids = clb_malloc(cap * sizeof *ids);
    if (!ids) return COLIBRI_ERR_NOMEM;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < INT32_MIN || v > INT32_MAX) {
            clb_free(ids);
            return clb_err(COLIBRI_ERR_ARG, "not a token id: '%.20s'", p);
        }
        if (k == cap) {
            int32_t *q = clb_realloc(ids, (cap *= 2) * sizeof *ids);
            if (!q) { clb_free(ids); return COLIBRI_ERR_NOMEM; }
            ids = q;
        }
        ids[k++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n = k;
    return COLIBRI_OK;
}

static int decode_to(const clb_tokenizer *t, const int32_t *ids, size_t n, bool skip, char **out,
                     size_t *len) {
    size_t cap = n * 16 + 64;
    char *buf = clb_malloc(cap + 1);
    if (!buf) return COLIBRI_ERR_NOMEM;
    int rc = clb_detokenize(t, ids, n, skip, buf, cap, len);
    if (rc == COLIBRI_ERR_ARG && *len > cap) {
        clb_free(buf);
        cap = *len;
        if (!(buf = clb_malloc(cap + 1))) return COLIBRI_ERR_NOMEM;
        rc = clb_detokenize(t, ids, n, skip, buf, cap, len);
    }
    if (rc != COLIBRI_OK) { clb_free(buf); return rc; }
    buf[*len] = 0;
    *out = buf;
    return COLIBRI_OK;
}

/* The ids of a JSON array line; every element must be an integer token id (nothing is
   dropped, rounded or converted out of range). */
static int json_ids(const cJSON *j, size_t lineno, int32_t **out, size_t *n) {
    if (!cJSON_IsArray(j))
        return clb_err(COLIBRI_ERR_ARG, "--jsonl --decode: line %zu is not a JSON array of token ids", lineno);
    size_t k = 0;
    int32_t *ids = clb_malloc(((size_t)cJSON_GetArraySize(j) + 1) * sizeof *ids);
    if (!ids) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : 0;
        if (!cJSON_IsNumber(e) || !(d >= INT32_MIN && d <= INT32_MAX) || d != (double)(int64_t)d) {
            char *shown = cJSON_PrintUnformatted(e);
            clb_err(COLIBRI_ERR_ARG, "--jsonl --decode: line %zu, element %zu (%.40s) is not an integer token id",
                    lineno, k + 1, shown ? shown : "?");
            free(shown);
            clb_free(ids);
            return COLIBRI_ERR_ARG;
        }
        ids[k++] = (int32_t)d;
    }
    *out = ids;
    *n = k;
    return COLIBRI_OK;
}

static int run_jsonl(const clb_tokenizer *t, char *in, bool decode, bool add, bool parse, bool skip) {
    char *line = in;
    size_t lineno = 0;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        if (*line) {
            cJSON *j = cJSON_Parse(line);
            if (!j) return fail("--jsonl: a line is not valid JSON");
            int st = 0;
            if (!decode) {
                if (!cJSON_IsString(j)) st = fail("--jsonl: a line is not a JSON string");
                else st = print_ids(t, j->valuestring, strlen(j->valuestring), add, parse);
            } else {
                size_t n = 0;
                int32_t *ids = NULL;
                char *txt = NULL;
                size_t tl = 0;
                if (json_ids(j, lineno, &ids, &n) != COLIBRI_OK) st = fail(clb_last_error());
                else if (decode_to(t, ids, n, skip, &txt, &tl) != COLIBRI_OK) st = fail(clb_last_error());
                else {
                    cJSON *s = cJSON_CreateString(txt);
                    char *p = s ? cJSON_PrintUnformatted(s) : NULL;
                    if (p) puts(p);
                    else st = fail("out of memory");
                    free(p);
                    cJSON_Delete(s);
                }
                clb_free(txt);
                clb_free(ids);
            }
            cJSON_Delete(j);
            if (st) return st;
        }
        if (!nl) break;
        line = nl + 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench(const clb_tokenizer *t, const char *path, bool add, bool parse) {
    char *text = NULL;
    size_t len = 0;
    if (clb_read_file(path, MAX_JSON, &text, &len) != COLIBRI_OK) return fail(clb_last_error());
    size_t cap = len + 16, n = 0;
    int32_t *ids = clb_malloc(cap * sizeof *ids);
    if (!ids) { clb_free(text); return fail("out of memory"); }
    double times[32];
    int runs = 0;
    double t_start = clb_now();
    while (runs < 32 && (runs < 3 || clb_now() - t_start < 1.0)) {
        double t0 = clb_now();
        if (clb_tokenize(t, text, len, add, parse, ids, cap, &n) != COLIBRI_OK) {
            clb_free(ids);
            clb_free(text);
            return fail(clb_last_error());
        }
        times[runs++] = clb_now() - t0;
    }
    qsort(times, (size_t)runs, sizeof times[0], cmp_double);
    double med = times[runs / 2];
    printf("bench: %s: %.2f MB, %zu tokens, %d runs, median %.3f s, %.2f MB/s\n", path,
           (double)len / 1e6, n, runs, med, (double)len / 1e6 / (med > 0 ? med : 1e-9));
    clb_free(ids);
    clb_free(text);
    return 0;
}

int colibri_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *tokfile = NULL, *text = NULL, *bench_file = NULL;
    bool special = false, parse = true, decode = false, skip = false, jsonl = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_next) model = argv[++i];
        else if (!strcmp(a, "--tokenizer") && has_next) tokfile = argv[++i];
        else if (!strcmp(a, "--text") && has_next) text = argv[++i];
        else if (!strcmp(a, "--bench") && has_next) bench_file = argv[++i];
        else if (!strcmp(a, "--special")) special = true;
        else if (!strcmp(a, "--parse-special")) parse = true;
        else if (!strcmp(a, "--no-parse-special")) parse = false;
        else if (!strcmp(a, "--decode")) decode = true;
        else if (!strcmp(a, "--skip-special")) skip = true;
        else if (!strcmp(a, "--jsonl")) jsonl = true;
        else {
            fprintf(stderr, "colibri: tokenize: unknown or incomplete option '%s' (see --help)\n", a);
            return 1;
        }
    }
    if (!model == !tokfile) return fail("give exactly one of -m MODEL or --tokenizer FILE (see --help)");
    const char *src = model ? model : tokfile;
    clb_tokenizer *t = NULL;
    if (tokfile) t = is_gguf(tokfile) ? load_gguf_file(tokfile) : load_hf_file(tokfile);
    else t = load_model(model);
    if (!t) {
        fprintf(stderr, "colibri: %s: %s\n", src, clb_last_error());
        return 1;
    }
    bool add = special, prs = parse;
    int st = 0;
    if (bench_file) {
        st = bench(t, bench_file, add, prs);
        clb_tokenizer_free(t);
        return st;
    }
    char *in = NULL;
    size_t len = 0;
    if (text) {
        len = strlen(text);
        in = clb_malloc(len + 1);
        if (in) memcpy(in, text, len + 1);
    } else if (read_stdin(&in, &len) != COLIBRI_OK) {
        in = NULL;
    }
    if (!in) { clb_tokenizer_free(t); return fail("cannot read the input"); }
    if (jsonl) {
        st = run_jsonl(t, in, decode, add, prs, skip);
    } else if (decode) {
        int32_t *ids = NULL;
        size_t n = 0;
        char *txt = NULL;
        size_t tl = 0;
        if (parse_ids(in, &ids, &n) != COLIBRI_OK || decode_to(t, ids, n, skip, &txt, &tl) != COLIBRI_OK)
            st = fail(clb_last_error());
        else
            fwrite(txt, 1, tl, stdout);
        clb_free(ids);
        clb_free(txt);
    } else {
        st = print_ids(t, in, len, add, prs);
    }
    clb_free(in);
    clb_tokenizer_free(t);
    if (fflush(stdout) != 0 && !st) st = fail("write error on standard output");
    return st;
}
