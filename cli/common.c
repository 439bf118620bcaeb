/* common.c — argument parsing and progress display for the CLI. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int cli_fail(const char *fmt, ...) {
    va_list ap;
    fputs("colibri: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

bool cli_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_float(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_size(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !isfinite(v)) return false;
    double mul = 1;
    if (*end) {
        char u = (char)toupper((unsigned char)*end);
        if (u == 'K') mul = 1024.0;
        else if (u == 'M') mul = 1024.0 * 1024;
        else if (u == 'G') mul = 1024.0 * 1024 * 1024;
        else if (u == 'T') mul = 1024.0 * 1024 * 1024 * 1024;
        else return false;
        end++;
        if (!strcasecmp(end, "ib") || !strcasecmp(end, "b") || !*end) end += strlen(end);
        if (*end) return false;
    }
    double b = v * mul;
    if (b > 1.8e19) return false;
    *out = (uint64_t)b;
    return true;
}

bool cli_token_list(const char *s, int32_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return false;
    const char *p = s;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < INT32_MIN || x > INT32_MAX || (*end && *end != ',' && !isspace((unsigned char)*end))) {
            free(v);
            return false;
        }
        if (k == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                return false;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *out = v;
    *n = k;
    return true;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail("option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, const char *label, double delay) {
    p->start = cli_now();
    p->delay = delay;
    p->last = 0;
    p->label = label;
    p->shown = false;
}

void cli_progress_update(cli_progress *p, double f) {
    double now = cli_now();
    if (now - p->start < p->delay || now - p->last < 0.1) return;
    p->last = now;
    p->shown = true;
    if (f < 0) f = 0;
    if (f > 1) f = 1;
    int w = 40, fill = (int)(f * w);
    char bar[48];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "\r%s [%s] %5.1f%%", p->label, bar, f * 100);
    fflush(stderr);
}

void cli_progress_done(cli_progress *p) {
    if (p->shown) {
        p->last = 0;
        p->delay = 0;
        cli_progress_update(p, 1.0);
        fputc('\n', stderr);
    }
}

void cli_run_timing(size_t n_tok, double t_prompt, long n_gen, double t_gen) {
    fprintf(stderr, "colibri: prompt %zu tokens in %.3f s (%.1f tok/s); generated %ld tokens in %.3f s (%.1f tok/s)\n",
            n_tok, t_prompt, (double)n_tok / (t_prompt > 0 ? t_prompt : 1e-9), n_gen, t_gen,
            n_gen > 1 ? (double)(n_gen - 1) / (t_gen > 0 ? t_gen : 1e-9) : 0.0);
}
