/* tok_session.h — the per-call state of an encode, shared by the encoder's files (not a public
 * header): tok_encode.c (pipeline, pre-tokenizers, BPE/SentencePiece), tok_normalize.c,
 * tok_added.c (added tokens) and tok_models.c (WordPiece, WordLevel, Unigram). */
#ifndef CLB_TOK_SESSION_H
#define CLB_TOK_SESSION_H

#include "text/tok_internal.h"

typedef struct clb_span {
    size_t off, len; /* into session.work */
} clb_span;

typedef struct clb_seg {
    size_t a, b; /* [a, b) within the piece */
    bool m;      /* a match (after invert) */
} clb_seg;

typedef struct clb_sym {
    int32_t id;
    int32_t prev, next;
    uint32_t start, len; /* bytes of the piece this symbol covers */
} clb_sym;

typedef struct clb_heap_ent {
    double prio; /* lower first: BPE rank, or -score for SPM */
    int32_t pos;
    int32_t a, b;    /* BPE: expected ids; SPM: b = right symbol index */
    uint32_t size;   /* SPM: expected byte length of the merge */
} clb_heap_ent;

typedef struct clb_cache_ent {
    uint64_t hash;
    size_t key_off;  /* into cache_keys */
    uint32_t key_len;
    uint32_t ids_off, n_ids; /* into cache_ids */
} clb_cache_ent;

/* Unigram best path ending at a byte offset */
typedef struct clb_vit {
    double score;
    int32_t start; /* -1: no path yet */
    int32_t id;
} clb_vit;

typedef struct clb_session {
    const clb_tokenizer *tok;
    int32_t *out;
    size_t cap, n;
    clb_buf work;            /* normalized text and piece contents */
    clb_buf norm_tmp;        /* normalizer scratch */
    clb_buf key;             /* model lookups (prefix + piece) */
    clb_span *pieces, *next; /* current and next piece lists */
    clb_seg *segs;           /* split scratch */
    size_t nseg, segcap;
    size_t np, nn, pcap, ncap;
    clb_sym *syms;
    size_t scap;
    clb_heap_ent *heap;
    size_t hn, hcap;
    clb_vit *vit;
    size_t vitcap;
    clb_cache_ent *cache;    /* open addressing, cache_cap slots (hash 0 = empty) */
    size_t cache_cap, cache_n;
    clb_buf cache_keys;
    int32_t *cache_ids;
    size_t cache_ids_n, cache_ids_cap;
    pcre2_match_data *md;
    const size_t *plain;     /* [2 * n_plain] [start, end) of text where no special token may match */
    size_t n_plain;
    size_t seg_off, seg_len; /* the current segment in the caller's text */
    bool parse_special;
    bool at_text_start;      /* the current segment starts the text (Metaspace "first") */
} clb_session;

static inline void clb_emit(clb_session *s, int32_t id) {
    if (s->n < s->cap) s->out[s->n] = id;
    s->n++;
}

static inline int clb_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return COLIBRI_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = clb_realloc(*p, nc * elem);
    if (!q) return clb_err(COLIBRI_ERR_NOMEM, "tokenizer: out of memory");
    *p = q;
    *cap = nc;
    return COLIBRI_OK;
}

/* tok_normalize.c: runs the tokenizer's normalizers over s->work (growth bounded). */
int clb_tok_normalize(clb_session *s);

/* tok_models.c: one pre-tokenized word through the WordPiece / WordLevel / Unigram model;
   the llama.cpp vocabularies (WPM, UGM) take a whole segment between added tokens. */
int clb_wordpiece_word(clb_session *s, const char *w, size_t n);
int clb_wordlevel_word(clb_session *s, const char *w, size_t n);
int clb_unigram_word(clb_session *s, const char *w, size_t n);
int clb_wpm_segment(clb_session *s, const char *text, size_t len);
int clb_ugm_segment(clb_session *s, const char *text, size_t len);

/* tok_added.c: the next added token to split on in text[from, len) (Hugging Face's rules:
   leftmost-longest, lstrip/rstrip/single_word, specials skipped unless parse_special or
   inside a plain span). normalized selects the set matched after normalization. Returns the
   token's index into tok->added or -1; [*start, *end) is the span it takes. */
int clb_find_added(const clb_session *s, const char *text, size_t len, size_t from, bool normalized,
                   size_t *start, size_t *end);

#endif
