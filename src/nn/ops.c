/* ops.c — norms, activations and rotary embeddings. */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "nn/ops.h"

enum { VBLOCK = 16 }; /* a loop over VBLOCK elements is what -O2 vectorises */

void clb_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0; /* double: the sum of squares of a few thousand floats loses bits in float */
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    int64_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) out[i + j] = x[i + j] * scale * w[i + j];
    for (; i < n; i++) out[i] = x[i] * scale * w[i];
}

void clb_layernorm(float *out, const float *x, const float *w, const float *b, int64_t n, float eps) {
    double sum = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    const double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    const float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps)), m = (float)mean;
    for (int64_t i = 0; i < n; i++) out[i] = (x[i] - m) * scale * w[i] + (b ? b[i] : 0.0f);
}

void clb_norm(int kind, float *out, const float *x, const float *w, const float *b, int64_t n, float eps) {
    if (kind == CLB_NORM_LAYER) clb_layernorm(out, x, w, b, n, eps);
    else clb_rmsnorm(out, x, w, n, eps);
}

void clb_add_scaled(float *restrict y, const float *restrict x, float a, int64_t n) {
    int64_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) y[i + j] += a * x[i + j];
    for (; i < n; i++) y[i] += a * x[i];
}

bool clb_all_finite(const float *x, int64_t n) {
    /* all exponent bits set (an infinity or a NaN) carries into bit 31 when 2^23 is added */
    const uint32_t *r = (const uint32_t *)(const void *)x;
    uint32_t bad = 0;
    int64_t i = 0;
    for (; i + 4 * VBLOCK <= n; i += 4 * VBLOCK)
        for (int j = 0; j < 4 * VBLOCK; j++) bad |= (r[i + j] & 0x7f800000u) + 0x00800000u;
    for (; i < n; i++) bad |= (r[i] & 0x7f800000u) + 0x00800000u;
    return !(bad >> 31);
}

void clb_softmax(float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void clb_relu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = (g[i] > 0 ? g[i] : 0.0f) * u[i];
}

void clb_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void clb_swiglu_clamp(float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        const float gi = fminf(g[i], limit), ui = fmaxf(fminf(u[i], limit), -limit);
        g[i] = (ui + 1.0f) * (gi * (1.0f / (1.0f + expf(-gi * alpha))));
    }
}

/* YaRN helpers, as Hugging Face's _compute_yarn_parameters defines them. */
static double yarn_find_dim(double n_rot_rotations, int dim, double base, double max_pos) {
    return (dim * log(max_pos / (n_rot_rotations * 2 * M_PI))) / (2 * log(base));
}
static double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

int clb_rope_init(clb_rope *r, const clb_hparams *hp, const float *freqs, int n_ctx) {
    memset(r, 0, sizeof *r);
    r->n_rot = hp->n_rot;
    r->style = hp->rope_style;
    r->attn_factor = 1.0f;
    int half = hp->n_rot / 2;
    r->inv_freq = clb_calloc((size_t)half, sizeof(double));
    if (!r->inv_freq) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int i = 0; i < half; i++) r->inv_freq[i] = 1.0 / pow((double)hp->rope_theta, (2.0 * i) / hp->n_rot);
    switch (hp->rope_scaling) {
    case CLB_ROPE_SCALING_NONE: break;
    case CLB_ROPE_SCALING_FREQS:
        if (!freqs) {
            clb_rope_free(r);
            return clb_err(COLIBRI_ERR_FORMAT, "rope frequency factors missing");
        }
        for (int i = 0; i < half; i++) {
            if (!(freqs[i] > 0)) {
                clb_rope_free(r);
                return clb_err(COLIBRI_ERR_FORMAT, "rope_freqs.weight[%d] = %g is not positive", i, (double)freqs[i]);
            }
            r->inv_freq[i] /= freqs[i];
        }
        break;
    case CLB_ROPE_SCALING_LINEAR:
        for (int i = 0; i < half; i++) r->inv_freq[i] /= hp->rope_factor;
        break;
    case CLB_ROPE_SCALING_LONGROPE: {
        /* HF picks the set by the sequence's length (> original: long) and recomputes the
           whole sequence when generation crosses it; a KV cache keeps one rotation, so the
           set is chosen once from the context a sequence may reach (as llama.cpp does) */
        const bool lng = n_ctx > hp->rope_orig_ctx;
        if (!hp->rope_ext || hp->rope_ext_n != half) {
            clb_rope_free(r);
            return clb_err(COLIBRI_ERR_FORMAT, "longrope factors missing");
        }
        for (int i = 0; i < half; i++) r->inv_freq[i] /= hp->rope_ext[(lng ? half : 0) + i];
        r->attn_factor = lng ? hp->rope_long_mscale : hp->rope_short_mscale;
        break;
    }
    case CLB_ROPE_SCALING_LLAMA3: {
        double f = hp->rope_factor, lo = hp->rope_low_freq_factor, hi = hp->rope_high_freq_factor;
        double old = hp->rope_orig_ctx;
        double lo_wl = old / lo, hi_wl = old / hi;
        for (int i = 0; i < half; i++) {
            double wl = 2 * M_PI / r->inv_freq[i];
            if (wl < hi_wl) continue;
            if (wl > lo_wl) {
                r->inv_freq[i] /= f;
                continue;
            }
            double smooth = (old / wl - lo) / (hi - lo);
            r->inv_freq[i] = (1 - smooth) * r->inv_freq[i] / f + smooth * r->inv_freq[i];
        }
        break;
    }
    case CLB_ROPE_SCALING_YARN: {
        double f = hp->rope_factor, base = hp->rope_theta, opos = hp->rope_orig_ctx;
        double lo = yarn_find_dim(hp->rope_beta_fast, hp->n_rot, base, opos);
        double hi = yarn_find_dim(hp->rope_beta_slow, hp->n_rot, base, opos);
        if (!hp->rope_yarn_exact) { /* truncate (the default): whole dims */
            lo = floor(lo);
            hi = ceil(hi);
        }
        if (lo < 0) lo = 0;
        if (hi > hp->n_rot - 1) hi = hp->n_rot - 1;
        if (lo == hi) hi += 0.001;
        for (int i = 0; i < half; i++) {
            double ramp = ((double)i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap_factor = 1 - ramp; /* 1 keeps the original frequency */
            double interp = r->inv_freq[i] / f, extrap = r->inv_freq[i];
            r->inv_freq[i] = interp * (1 - extrap_factor) + extrap * extrap_factor;
        }
        /* as transformers' _compute_yarn_parameters: an explicit attention_factor, else
           mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are given */
        double ms = hp->rope_mscale, msa = hp->rope_mscale_all_dim;
        if (hp->rope_attn_factor > 0) r->attn_factor = hp->rope_attn_factor;
        else if (ms != 0 && msa != 0) r->attn_factor = (float)(yarn_mscale(f, ms) / yarn_mscale(f, msa));
        else r->attn_factor = (float)yarn_mscale(f, 1.0);
        break;
    }
    default:
        clb_rope_free(r);
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "rope scaling type %d is not supported", hp->rope_scaling);
    }
    return COLIBRI_OK;
}

void clb_rope_free(clb_rope *r) {
    if (!r) return;
    clb_free(r->inv_freq);
    r->inv_freq = NULL;
}

static void rope_rotate(const clb_rope *r, float *x, int n_heads, int head_dim, int offset, int pos, float scale) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        double a = (double)pos * r->inv_freq[i];
        float c = (float)cos(a) * scale, s = (float)sin(a) * scale;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (int64_t)h * head_dim + offset;
            int i0, i1;
            if (r->style == CLB_ROPE_NEOX) {
                i0 = i;
                i1 = i + half;
            } else {
                i0 = 2 * i;
                i1 = 2 * i + 1;
            }
            float x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * c - x1 * s;
            v[i1] = x0 * s + x1 * c;
        }
    }
}

void clb_rope_apply(const clb_rope *r, float *x, int n_heads, int head_dim, int offset, int pos) {
    rope_rotate(r, x, n_heads, head_dim, offset, pos, r->attn_factor);
}

void clb_rope_shift(const clb_rope *r, float *x, int n_heads, int head_dim, int offset, int delta) {
    rope_rotate(r, x, n_heads, head_dim, offset, delta, 1.0f);
}
