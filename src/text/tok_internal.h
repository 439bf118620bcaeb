/* tok_internal.h — data structures shared by the tokenizer's files (not a public header).
 *
 * Token strings are stored in the form the model works on: for byte-level vocabularies
 * (GPT-2 style "Ġ" characters) the string is mapped back to the raw bytes it stands for, so the
 * BPE runs on raw bytes and decoding is plain concatenation; file_text keeps the original. */
#ifndef CLB_TOK_INTERNAL_H
#define CLB_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/common.h"
#include "text/tokenizer.h"

/* growable byte buffer */
typedef struct clb_buf {
    char *p;
    size_t n, cap;
} clb_buf;
int clb_buf_put(clb_buf *b, const void *s, size_t n);
void clb_buf_free(clb_buf *b);

/* ---- string -> id hash map over the token pool (open addressing, power-of-two size) ---- */
typedef struct clb_strmap {
    int32_t *slots; /* [cap] id, -1 empty */
    size_t cap;
    size_t n;
} clb_strmap;

/* another vocabulary string of a token (tokenizer.json: several strings may share an id) */
typedef struct clb_alias {
    uint64_t off; /* model form in the pool */
    uint32_t len;
    int32_t id;
} clb_alias;

/* ---- (left id, right id) -> merge hash map ---- */
typedef struct clb_pairmap {
    uint64_t *keys;  /* [cap] (left << 32 | right), UINT64_MAX empty */
    int32_t *rank;   /* [cap] merge priority, lower first */
    int32_t *result; /* [cap] id of the merged token */
    size_t cap;
    size_t n;
} clb_pairmap;

enum {
    CLB_TA_SPECIAL = 1,      /* special / control token: skipped by skip_special */
    CLB_TA_ADDED = 2,        /* an added token matched in text before the model */
    CLB_TA_BYTE = 4,         /* <0xXX> byte-fallback token */
    CLB_TA_UNKNOWN = 8,
    CLB_TA_USER_DEFINED = 16, /* GGUF user-defined: matched in text even without parse_special */
    CLB_TA_UNUSED = 32        /* GGUF unused */
};

typedef struct clb_added_tok {
    int32_t id;
    char *content; /* raw text matched */
    size_t len;
    char *norm;    /* normalized=true: the pattern matched in normalized text (owned) */
    size_t norm_len;
    bool special, lstrip, rstrip, single_word, normalized;
} clb_added_tok;

/* Largest id a tokenizer.json may use: below 2 x its entries + this (see tok_hf.c). */
#define CLB_TOK_ID_SLACK 1024
/* Growth allowed to normalizers (each one, and the chain): N x the input + EXTRA bytes. The
   worst real case is NFKD/NFKC of U+FDFA, 3 bytes -> 33. */
#define CLB_NORM_GROWTH 16
#define CLB_NORM_EXTRA 256
/* The place of the text in a post-processor template (every other entry is a token id). */
#define CLB_TMPL_SEQ (-1)

/* BPE, SPM: merges (tok_encode.c); WORDPIECE, WORDLEVEL, UNIGRAM: tokenizer.json models;
   WPM, UGM: llama.cpp's GGUF "bert" and "t5" vocabularies (tok_models.c) */
enum { CLB_MODEL_BPE = 1, CLB_MODEL_SPM, CLB_MODEL_WORDPIECE, CLB_MODEL_WORDLEVEL, CLB_MODEL_UNIGRAM,
       CLB_MODEL_WPM, CLB_MODEL_UGM };

/* SentencePiece's precompiled normalization map (tok_charsmap.c) */
typedef struct clb_charsmap {
    uint32_t *units; /* [n_units] double-array trie */
    size_t n_units;
    char *norm;      /* [norm_len + 1] NUL-separated replacements */
    size_t norm_len;
} clb_charsmap;

/* normalizer steps (a Sequence is flattened) */
enum { CLB_N_NFC = 1, CLB_N_NFKC, CLB_N_NFD, CLB_N_NFKD, CLB_N_LOWER, CLB_N_PREPEND,
       CLB_N_REPLACE, CLB_N_REPLACE_RE, CLB_N_STRIP, CLB_N_BERT, CLB_N_STRIP_ACCENTS, CLB_N_NMT,
       CLB_N_PRECOMPILED };
typedef struct clb_norm_op {
    int kind;
    char *a;   /* prepend text / replace pattern */
    size_t alen;
    char *b;   /* replacement */
    size_t blen;
    pcre2_code *re;
    bool left, right;  /* strip */
    bool clean, chinese, strip_accents, lowercase; /* BertNormalizer */
    clb_charsmap *cm;  /* Precompiled (owned) */
} clb_norm_op;

/* pre-tokenizer steps */
enum { CLB_SPLIT_REMOVED = 0, CLB_SPLIT_ISOLATED, CLB_SPLIT_MERGED_PREV, CLB_SPLIT_MERGED_NEXT,
       CLB_SPLIT_CONTIGUOUS };
enum { CLB_P_SPLIT = 1, CLB_P_PREFIX_SPACE, CLB_P_METASPACE };
typedef struct clb_pre_op {
    int kind;
    pcre2_code *re;    /* SPLIT */
    int behavior;      /* SPLIT */
    bool invert;       /* SPLIT */
    char *repl;        /* METASPACE replacement (UTF-8) */
    size_t repl_len;
    int prepend;       /* METASPACE: 0 never, 1 always, 2 first */
    bool split;        /* METASPACE */
} clb_pre_op;

struct clb_tokenizer {
    int model; /* CLB_MODEL_* */
    int32_t n_vocab;
    clb_buf pool;       /* token strings: model form, file form, piece, each NUL-terminated */
    uint64_t *off;      /* [n_vocab] model form (what the BPE/SPM works on) offset in pool */
    uint32_t *len;      /* [n_vocab] its length */
    uint64_t *foff;     /* [n_vocab] file form offset (as in the file) */
    uint32_t *flen;
    uint64_t *poff;     /* [n_vocab] decoded piece offset (what the decoder outputs) */
    uint32_t *plen;
    uint8_t *attr;      /* [n_vocab] CLB_TA_* */
    float *scores;      /* [n_vocab] SPM scores (or NULL) */
    clb_strmap vocab;
    clb_alias *aliases;  /* [n_aliases] more strings of tokens, found by the vocab map too */
    int32_t n_aliases;
    clb_pairmap merges;
    /* every pair of adjacent UTF-8 characters inside some token (non-byte-level models): a
       long piece can be cut exactly between two characters that no token contains together,
       since no merge can ever span that boundary */
    clb_pairmap char_pairs;
    uint8_t ascii_pairs[128 * 128 / 8]; /* the same for two ASCII characters, as a bitmap */
    int32_t ascii_id[128];              /* id of each single ASCII character token, or -1 */
    int32_t byte_id[256]; /* byte-level: id of the single byte; byte_fallback: <0xXX>; -1 */
    bool byte_level, byte_fallback, fuse_unk, ignore_merges;
    char *cont_prefix, *eow_suffix; /* BPE continuing_subword_prefix / end_of_word_suffix */
    int32_t unk_id, bos_id, eos_id, pad_id;
    bool add_bos, add_eos;
    int32_t *tmpl;    /* post-processor single template: ids, CLB_TMPL_SEQ marks the sequence */
    int n_tmpl;
    clb_added_tok *added;
    int n_added;
    uint8_t added_first[256]; /* 1 when some added token starts with that byte */
    clb_norm_op *norm;
    int n_norm;
    clb_pre_op *pre;
    int n_pre;
    /* decoder */
    int dec_strip;     /* leading spaces removed at the start of the output */
    char *dec_from, *dec_to; /* decoder Replace (string pattern), e.g. "▁" -> " " */
    bool dec_utf8_lossy;
    char *chat_template;
    size_t max_piece;
    /* WordPiece / WordLevel / Unigram / WPM / UGM */
    double *dscores;     /* [n_vocab] Unigram scores (GGUF: the file's floats) */
    double unk_score;    /* Unigram: the score of an unknown character */
    int32_t *sorted;     /* [n_sorted] ids the Unigram lattice may use, by their bytes */
    int32_t n_sorted;
    int32_t n_model;     /* Unigram: ids [0, n_model) are the model's pieces */
    int max_chars;       /* WordPiece max_input_chars_per_word */
    size_t max_token_len;
    clb_charsmap charsmap;                                   /* UGM */
    bool ugm_add_prefix, ugm_merge_spaces, ugm_escape_ws, ugm_ws_suffix; /* UGM */
    bool gguf_added_rules; /* llama.cpp's rules for control tokens (tok_added.c) */
    int n_raw_added, n_norm_added; /* added tokens matched before / after normalization */
    bool dec_join;       /* decoder: pieces joined by spaces (no decoder, WordPiece) */
    bool dec_wordpiece;  /* decoder WordPiece: "##" pieces glue, the rest get a space */
    bool dec_cleanup;    /* WordPiece decoder's cleanup (" ." -> "." ...) */
    char *dec_prefix;    /* WordPiece decoder's prefix */
};

/* tok_util.c */
uint64_t clb_tok_hash(const void *p, size_t n);
int clb_strmap_init(clb_strmap *m, size_t n_expected);
void clb_strmap_free(clb_strmap *m);
/* Inserts id under its pool string; keeps an existing entry for an equal string. */
int clb_strmap_put(clb_strmap *m, const clb_tokenizer *tok, int32_t id);
/* Inserts every alias (after the tokens: a token's own string wins over an alias). */
int clb_strmap_put_aliases(clb_strmap *m, const clb_tokenizer *tok);
int32_t clb_strmap_get(const clb_strmap *m, const clb_tokenizer *tok, const char *s, size_t n);
int clb_pairmap_init(clb_pairmap *m, size_t n_expected);
void clb_pairmap_free(clb_pairmap *m);
void clb_pairmap_put(clb_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t result);
bool clb_pairmap_get(const clb_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *result);
/* Length of the UTF-8 sequence starting with byte c (1 for invalid lead bytes). */
size_t clb_utf8_len(unsigned char c);
/* Length of a complete valid UTF-8 character at s (n bytes available), 0 if invalid/incomplete. */
size_t clb_utf8_valid_char(const unsigned char *s, size_t n);
/* Byte-level (GPT-2) alphabet: decodes a byte-level string to raw bytes into out (>= n bytes);
   returns the byte count or -1 if some character is not in the alphabet. */
long clb_bytelevel_decode(const char *s, size_t n, char *out);
/* Unicode normalization via utf8proc; returns a heap NUL-terminated string. kind CLB_N_*. */
int clb_unicode_normalize(int kind, const char *s, size_t n, char **out, size_t *out_len);
pcre2_code *clb_regex_compile(const char *pattern, size_t len, const char *what);
bool clb_cp_is_space(uint32_t c); /* Unicode White_Space (Rust regex \s) */
bool clb_cp_is_word(uint32_t c);  /* Rust regex \w */
/* A JSON number that is an integer in [lo, hi) (checked before any conversion): true and *out
   set, else false. */
bool clb_json_int(const cJSON *v, double lo, double hi, int32_t *out);


/* tok_build.c: common construction */
clb_tokenizer *clb_tok_alloc(int32_t n_vocab);
/* Sets token id's strings from its file form s (n bytes). Call after byte_level/byte_fallback
   and the decoder replacements (dec_repl) are known. */
int clb_tok_set_token(clb_tokenizer *tok, int32_t id, const char *s, size_t n);
/* Adds s as one more string of token id (model form as clb_tok_set_token makes it). */
int clb_tok_add_alias(clb_tokenizer *tok, int32_t id, const char *s, size_t n);
int clb_tok_finish(clb_tokenizer *tok); /* vocab map, byte ids, pieces, added-token tables */
int clb_tok_add_added(clb_tokenizer *tok, const clb_added_tok *a);
int clb_tok_add_norm(clb_tokenizer *tok, const clb_norm_op *op);
int clb_tok_add_pre(clb_tokenizer *tok, const clb_pre_op *op);
int clb_tok_add_split_regex(clb_tokenizer *tok, const char *pattern, int behavior, bool invert);

/* Packs the UTF-8 character at s (l bytes, 1..4) into a 32-bit code. */
static inline uint32_t clb_char_code(const char *s, size_t l) {
    uint32_t c = 0;
    for (size_t i = 0; i < l; i++) c |= (uint32_t)(unsigned char)s[i] << (8 * i);
    return c;
}

/* tok_encode.c */
int clb_tok_encode(const clb_tokenizer *tok, const char *text, size_t len, bool add_special,
                   bool parse_special, const size_t *plain, size_t n_plain, int32_t *out, size_t cap,
                   size_t *n_out);

/* tok_normalize.c: the tokenizer's normalizers over s[0, n) into out (for added tokens with
   normalized=true; the growth limits apply). */
int clb_tok_normalize_text(const clb_tokenizer *tok, const char *s, size_t n, clb_buf *out);

/* tok_charsmap.c */
int clb_charsmap_parse(const unsigned char *blob, size_t n, clb_charsmap *m);
void clb_charsmap_free(clb_charsmap *m);
/* Hugging Face's Precompiled normalizer over s[0, n), appended to out. */
int clb_charsmap_hf(const clb_charsmap *m, const char *s, size_t n, clb_buf *out);
/* SentencePiece's rule: the longest key at s[0, n): its length (0: none) and replacement. */
size_t clb_charsmap_spm_prefix(const clb_charsmap *m, const char *s, size_t n, const char **repl,
                               size_t *repl_len);
/* base64 (standard alphabet, padding optional) -> bytes; heap, NULL on bad input */
unsigned char *clb_base64_decode(const char *s, size_t *n_out);

/* tok_gguf.c */
clb_tokenizer *clb_tok_from_gguf_json(const cJSON *g);

#endif
