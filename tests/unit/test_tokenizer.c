/* test_tokenizer.c — unit tests of the tokenizer pieces (UTF-8 helpers, byte-level alphabet,
   byte fallback, added-token matching, streaming decode, bad ids, buffer sizes) on a small
   hand-written tokenizer.json and on the real fixtures. Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/platform.h"
#include "format/gguf.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

#define FIX "tests/fixtures/tokenizers/"

/* A tiny SentencePiece-style BPE: Prepend/Replace normalizer, byte fallback for bytes 0xC3,
   0xA9, 0xE2, 0x82, 0xAC; "<s>" special, "<tool>" non-special, "<r>" rstrip. */
static const char *k_small =
    "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"fuse_unk\": true,"
    " \"unk_token\": \"<unk>\","
    " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"<0xC3>\": 3, \"<0xA9>\": 4,"
    "  \"<0xE2>\": 5, \"<0x82>\": 6, \"<0xAC>\": 7, \"\\u2581\": 8, \"a\": 9, \"b\": 10,"
    "  \"ab\": 11, \"\\u2581ab\": 12, \"c\": 13, \"\\u2581a\": 14},"
    " \"merges\": [\"a b\", \"\\u2581 ab\", \"\\u2581 a\"]},"
    " \"added_tokens\": ["
    "  {\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
    "  {\"id\": 1, \"content\": \"<s>\", \"special\": true},"
    "  {\"id\": 2, \"content\": \"</s>\", \"special\": true},"
    "  {\"id\": 15, \"content\": \"<tool>\", \"special\": false},"
    "  {\"id\": 16, \"content\": \"<r>\", \"special\": true, \"rstrip\": true}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": ["
    "  {\"type\": \"Prepend\", \"prepend\": \"\\u2581\"},"
    "  {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]},"
    " \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\","
    "  \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
    "             {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],"
    "  \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
    "  {\"type\": \"Replace\", \"pattern\": {\"String\": \"\\u2581\"}, \"content\": \" \"},"
    "  {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
    "  {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}}";

static clb_tokenizer *small(void) {
    clb_tokenizer *t = clb_tokenizer_from_hf(k_small, strlen(k_small), NULL);
    if (!t) fprintf(stderr, "small tokenizer: %s\n", clb_last_error());
    assert_non_null(t);
    return t;
}

static clb_tokenizer *load_hf_fixture(const char *name) {
    char path[256], cpath[256];
    snprintf(path, sizeof path, FIX "%s/tokenizer.json", name);
    snprintf(cpath, sizeof cpath, FIX "%s/tokenizer_config.json", name);
    char *js = NULL, *cfg = NULL;
    size_t jl = 0, cl = 0;
    assert_int_equal(clb_read_file(path, 64u << 20, &js, &jl), COLIBRI_OK);
    assert_int_equal(clb_read_file(cpath, 1u << 20, &cfg, &cl), COLIBRI_OK);
    clb_tokenizer *t = clb_tokenizer_from_hf(js, jl, cfg);
    if (!t) fprintf(stderr, "%s: %s\n", name, clb_last_error());
    assert_non_null(t);
    clb_free(js);
    clb_free(cfg);
    return t;
}

static size_t enc(const clb_tokenizer *t, const char *s, bool add, bool parse, int32_t *ids, size_t cap) {
    size_t n = 0;
    int rc = clb_tokenize(t, s, strlen(s), add, parse, ids, cap, &n);
    if (rc != COLIBRI_OK) fprintf(stderr, "tokenize: %s\n", clb_last_error());
    assert_int_equal(rc, COLIBRI_OK);
    return n;
}

static void assert_ids(const int32_t *got, size_t n, const int32_t *want, size_t wn) {
    assert_int_equal(n, wn);
    for (size_t i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
}

static void test_utf8_helpers(void **st) {
    (void)st;
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"a", 1), 1);
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\xc3\xa9", 2), 2);
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\xe2\x82\xac", 3), 3);
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\xf0\x9f\xa4\x97", 4), 4);
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\xe2\x82", 2), 0);    /* short */
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\xc0\xaf", 2), 0);    /* overlong */
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\xed\xa0\x80", 3), 0); /* surrogate */
    assert_int_equal(clb_utf8_valid_char((const unsigned char *)"\x80", 1), 0);
    char out[8];
    assert_int_equal(clb_bytelevel_decode("\xc4\xa0", 2, out), 1); /* "Ġ" */
    assert_int_equal(out[0], ' ');
    assert_int_equal(clb_bytelevel_decode("\xc4\x8a", 2, out), 1); /* "Ċ" */
    assert_int_equal(out[0], '\n');
    assert_int_equal(clb_bytelevel_decode("Hi", 2, out), 2);
    assert_int_equal(clb_bytelevel_decode("\xe2\x96\x81", 3, out), -1); /* "▁" is not in it */
}

static void test_small_bpe_and_byte_fallback(void **st) {
    (void)st;
    clb_tokenizer *t = small();
    int32_t ids[64];
    size_t n = enc(t, "ab ab", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){12, 12}, 2); /* "▁ab ▁ab" */
    /* "é" and "€" are not in the vocabulary: their bytes become <0xXX> tokens */
    n = enc(t, "a\xc3\xa9\xe2\x82\xac", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){14, 3, 4, 5, 6, 7}, 6);
    char text[64];
    size_t tn = 0;
    assert_int_equal(clb_detokenize(t, ids, n, false, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 6);
    assert_memory_equal(text, "a\xc3\xa9\xe2\x82\xac", 6); /* leading space stripped */
    /* an incomplete byte sequence decodes to one U+FFFD per byte */
    int32_t broken[] = {14, 5, 6, 9};
    assert_int_equal(clb_detokenize(t, broken, 4, false, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 8);
    assert_memory_equal(text, "a\xef\xbf\xbd\xef\xbf\xbd" "a", 8);
    /* add_special prepends BOS per the template */
    n = enc(t, "ab", true, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 12}, 2);
    assert_true(clb_tokenizer_adds_bos(t));
    assert_false(clb_tokenizer_adds_eos(t));
    assert_int_equal(clb_tokenizer_bos(t), 1);
    assert_int_equal(clb_tokenizer_unk(t), 0);
    clb_tokenizer_free(t);
}

static void test_added_tokens(void **st) {
    (void)st;
    clb_tokenizer *t = small();
    int32_t ids[64];
    /* special "<s>" only with parse_special */
    size_t n = enc(t, "<s>ab", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 12}, 2);
    n = enc(t, "<s>", false, false, ids, 64);
    assert_true(n > 1);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 1);
    /* non-special "<tool>" always; the text on each side is normalized on its own */
    n = enc(t, "ab<tool>ab", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){12, 15, 12}, 3);
    /* rstrip eats the spaces after "<r>" */
    n = enc(t, "<r>   ab", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){16, 12}, 2);
    assert_true(clb_token_is_special(t, 1));
    assert_false(clb_token_is_special(t, 15));
    /* skip_special drops <s> but keeps <tool> */
    int32_t seq[] = {1, 12, 15, 2};
    char text[64];
    size_t tn;
    assert_int_equal(clb_detokenize(t, seq, 4, true, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 8);
    assert_memory_equal(text, "ab<tool>", 8);
    assert_int_equal(clb_detokenize(t, seq, 4, false, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 16);
    assert_memory_equal(text, "<s> ab<tool></s>", 16);
    clb_tokenizer_free(t);
}

static void test_bad_ids_and_sizes(void **st) {
    (void)st;
    clb_tokenizer *t = small();
    int32_t bad[] = {12, 99999}, neg[] = {-1};
    char text[64];
    size_t tn = 0, len = 0;
    assert_int_equal(clb_detokenize(t, bad, 2, false, text, sizeof text, &tn), COLIBRI_ERR_ARG);
    assert_int_equal(clb_detokenize(t, neg, 1, false, text, sizeof text, &tn), COLIBRI_ERR_ARG);
    assert_null(clb_token_to_piece(t, 17, &len));
    assert_null(clb_token_to_piece(t, -5, &len));
    assert_null(clb_token_text(t, 1 << 20));
    assert_non_null(clb_token_to_piece(t, 12, &len));
    assert_int_equal(len, 3); /* " ab" */
    clb_detok_stream *s = clb_detok_stream_new(t, false);
    assert_non_null(s);
    assert_int_equal(clb_detok_stream_push(s, 100, text, sizeof text, &tn), COLIBRI_ERR_ARG);
    clb_detok_stream_free(s);
    /* too small an output buffer reports the size needed */
    int32_t ids[2];
    size_t n = 0;
    assert_int_equal(clb_tokenize(t, "ab ab ab", 8, false, false, ids, 2, &n), COLIBRI_ERR_ARG);
    assert_int_equal(n, 3);
    assert_int_equal(clb_tokenize(t, "ab ab ab", 8, false, false, NULL, 0, &n), COLIBRI_OK);
    assert_int_equal(n, 3);
    int32_t three[] = {12, 12, 12};
    assert_int_equal(clb_detokenize(t, three, 3, false, text, 4, &tn), COLIBRI_ERR_ARG);
    assert_int_equal(tn, 8);
    clb_tokenizer_free(t);
    /* malformed input fails cleanly */
    assert_null(clb_tokenizer_from_hf("{\"model\": 3", 11, NULL));
    assert_null(clb_tokenizer_from_hf("{\"model\": {\"type\": \"WordPiece\"}}", 32, NULL));
    assert_null(clb_tokenizer_from_hf("{\"model\": {\"type\": \"Frobnicate\", \"vocab\": {}}}", 46, NULL));
}

/* Pushes ids one by one; every chunk must be whole UTF-8 and the sum equal the full decode. */
static void check_stream(const clb_tokenizer *t, const char *s) {
    int32_t ids[512];
    size_t n = enc(t, s, false, true, ids, 512);
    char full[2048], acc[2048], chunk[1024];
    size_t fn = 0, an = 0, cn = 0;
    assert_int_equal(clb_detokenize(t, ids, n, false, full, sizeof full, &fn), COLIBRI_OK);
    clb_detok_stream *st = clb_detok_stream_new(t, false);
    assert_non_null(st);
    bool split_seen = false;
    for (size_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = clb_token_to_piece(t, ids[i], &pl);
        assert_non_null(p);
        if (pl && clb_utf8_valid_char((const unsigned char *)p, pl) == 0) split_seen = true;
        assert_int_equal(clb_detok_stream_push(st, ids[i], chunk, sizeof chunk, &cn), COLIBRI_OK);
        for (size_t k = 0; k < cn;) { /* whole characters only */
            size_t l = clb_utf8_valid_char((const unsigned char *)chunk + k, cn - k);
            assert_true(l > 0);
            k += l;
        }
        memcpy(acc + an, chunk, cn);
        an += cn;
    }
    assert_int_equal(clb_detok_stream_flush(st, chunk, sizeof chunk, &cn), COLIBRI_OK);
    assert_int_equal(cn, 0);
    clb_detok_stream_free(st);
    assert_int_equal(an, fn);
    assert_memory_equal(acc, full, fn);
    assert_true(split_seen); /* the text really has tokens that end inside a character */
}

static void test_stream_never_splits_utf8(void **st) {
    (void)st;
    clb_tokenizer *q = load_hf_fixture("qwen3");
    check_stream(q, "caf\xc3\xa9 \xf0\x9f\xa4\x97 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 "
                    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa");
    clb_tokenizer *l = load_hf_fixture("llama2");
    check_stream(l, " \xf0\x9f\xa4\x97 hugs \xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88");
    /* an invalid byte run streams out as U+FFFD, like the full decode */
    clb_detok_stream *s = clb_detok_stream_new(l, false);
    char out[64];
    size_t n;
    int32_t e2 = clb_token_lookup(l, "<0xE2>", 6), a = clb_token_lookup(l, "a", 1);
    assert_true(e2 >= 0 && a >= 0);
    assert_int_equal(clb_detok_stream_push(s, e2, out, sizeof out, &n), COLIBRI_OK);
    assert_int_equal(n, 0); /* buffered: could still become a character */
    assert_int_equal(clb_detok_stream_push(s, a, out, sizeof out, &n), COLIBRI_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\xef\xbf\xbd" "a", 4);
    assert_int_equal(clb_detok_stream_push(s, e2, out, sizeof out, &n), COLIBRI_OK);
    assert_int_equal(clb_detok_stream_flush(s, out, sizeof out, &n), COLIBRI_OK);
    assert_int_equal(n, 3);
    clb_detok_stream_free(s);
    clb_tokenizer_free(q);
    clb_tokenizer_free(l);
}

static void test_fixture_examples(void **st) {
    (void)st;
    clb_tokenizer *l = load_hf_fixture("llama2");
    int32_t ids[64];
    size_t n = enc(l, "  a\n\n b", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){259, 264, 13, 13, 287}, 5);
    n = enc(l, "<s>Hello</s>", true, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 1, 22557, 2}, 4);
    assert_null(clb_tokenizer_chat_template(l));
    assert_int_equal(clb_tokenizer_n_vocab(l), 32000);
    clb_tokenizer *q = load_hf_fixture("qwen3");
    n = enc(q, "<|im_start|>user", false, true, ids, 64);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 151644);
    assert_int_equal(clb_tokenizer_eos(q), 151645);
    assert_int_equal(clb_tokenizer_bos(q), -1);
    assert_int_equal(clb_tokenizer_pad(q), 151643);
    assert_false(clb_tokenizer_adds_bos(q));
    const char *ct = clb_tokenizer_chat_template(q);
    assert_non_null(ct);
    assert_non_null(strstr(ct, "<|im_start|>"));
    /* NFC: a decomposed e + U+0301 tokenizes like the composed é */
    int32_t a[16], b[16];
    size_t na = enc(q, "cafe\xcc\x81", false, false, a, 16), nb = enc(q, "caf\xc3\xa9", false, false, b, 16);
    assert_ids(a, na, b, nb);
    /* the HF stored form round-trips */
    char *js = NULL;
    size_t jl;
    assert_int_equal(clb_read_file(FIX "llama2/tokenizer.json", 64u << 20, &js, &jl), COLIBRI_OK);
    cJSON *tj = cJSON_Parse(js);
    cJSON *stored = clb_tokenizer_hf_to_json(tj, NULL);
    clb_tokenizer *r = clb_tokenizer_from_json(stored);
    assert_non_null(r);
    n = enc(r, "Hello world", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){22557, 1526}, 2);
    clb_tokenizer_free(r);
    cJSON_Delete(stored);
    cJSON_Delete(tj);
    clb_free(js);
    clb_tokenizer_free(l);
    clb_tokenizer_free(q);
}

static void test_gguf_vocab(void **st) {
    (void)st;
    clb_gguf g;
    assert_int_equal(clb_gguf_open(FIX "llamacpp-suite/ggml-vocab-llama-spm.gguf", &g), COLIBRI_OK);
    clb_tokenizer *t = clb_tokenizer_from_gguf(&g);
    assert_non_null(t);
    int32_t ids[64];
    size_t n = enc(t, "Hello world", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){15043, 3186}, 2);
    n = enc(t, " Hello world", true, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 29871, 15043, 3186}, 4);
    assert_int_equal(clb_tokenizer_n_vocab(t), 32000);
    assert_int_equal(clb_tokenizer_eos(t), 2);
    char text[64];
    size_t tn;
    assert_int_equal(clb_detokenize(t, ids, n, true, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 12);
    assert_memory_equal(text, " Hello world", 12);
    /* the stored JSON form gives the same tokenizer */
    cJSON *j = clb_tokenizer_gguf_to_json(&g);
    assert_non_null(j);
    char *printed = cJSON_PrintUnformatted(j);
    cJSON *back = cJSON_Parse(printed);
    clb_tokenizer *t2 = clb_tokenizer_from_json(back);
    assert_non_null(t2);
    int32_t ids2[64];
    size_t n2 = enc(t2, " Hello world", true, true, ids2, 64);
    assert_ids(ids2, n2, ids, n);
    free(printed);
    cJSON_Delete(back);
    cJSON_Delete(j);
    clb_tokenizer_free(t2);
    clb_tokenizer_free(t);
    clb_gguf_close(&g);
    /* byte-level BPE: GPT-2 */
    assert_int_equal(clb_gguf_open(FIX "llamacpp-suite/ggml-vocab-gpt-2.gguf", &g), COLIBRI_OK);
    t = clb_tokenizer_from_gguf(&g);
    assert_non_null(t);
    n = enc(t, "Hello world", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){15496, 995}, 2);
    assert_int_equal(clb_detokenize(t, ids, n, false, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 11);
    assert_memory_equal(text, "Hello world", 11);
    clb_tokenizer_free(t);
    clb_gguf_close(&g);
}

/* Added tokens by Hugging Face's rules: lstrip/rstrip/single_word/normalized, specials only
   with parse_special, never inside a plain span. */
static const char *k_flags =
    "{\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"[UNK]\","
    " \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"b\": 2, \"<\": 3, \">\": 4, \"x\": 5}},"
    " \"added_tokens\": ["
    "  {\"id\": 6, \"content\": \"<sp>\", \"special\": true, \"lstrip\": true, \"rstrip\": false,"
    "   \"single_word\": false, \"normalized\": false},"
    "  {\"id\": 7, \"content\": \"<w>\", \"special\": false, \"lstrip\": false, \"rstrip\": true,"
    "   \"single_word\": true, \"normalized\": false},"
    "  {\"id\": 8, \"content\": \"AB\", \"special\": false, \"lstrip\": false, \"rstrip\": false,"
    "   \"single_word\": false, \"normalized\": true}],"
    " \"normalizer\": {\"type\": \"Lowercase\"},"
    " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \".\"}, \"behavior\": \"Isolated\"},"
    " \"post_processor\": null, \"decoder\": null}";

static void test_added_token_flags(void **st) {
    (void)st;
    clb_tokenizer *t = clb_tokenizer_from_hf(k_flags, strlen(k_flags), NULL);
    if (!t) fprintf(stderr, "flags tokenizer: %s\n", clb_last_error());
    assert_non_null(t);
    int32_t ids[64];
    /* lstrip eats the spaces before <sp> (the pre-tokenizer would keep them as [UNK]s) */
    size_t n = enc(t, "a  <sp>b", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 6, 2}, 3);
    /* without parse_special <sp> is text */
    n = enc(t, "<sp>", false, false, ids, 64);
    assert_ids(ids, n, (int32_t[]){3, 0, 0, 4}, 4);
    /* single_word: not between word characters; rstrip eats what follows */
    n = enc(t, "a<w>b", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 3, 0, 4, 2}, 5);
    n = enc(t, "a <w>  b", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){1, 0, 7, 2}, 4);
    /* normalized: matched after lowercasing, by its normalized content "ab" */
    n = enc(t, "xABx", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){5, 8, 5}, 3);
    n = enc(t, "xabx", false, true, ids, 64);
    assert_ids(ids, n, (int32_t[]){5, 8, 5}, 3);
    /* a plain span (typed by a user) keeps <sp> as text even with parse_special */
    const char *s = "<sp>a<sp>";
    size_t plain[2] = {5, 9};
    assert_int_equal(clb_tokenize_plain(t, s, strlen(s), false, true, plain, 1, ids, 64, &n), COLIBRI_OK);
    assert_ids(ids, n, (int32_t[]){6, 1, 3, 0, 0, 4}, 6);
    /* no decoder: tokens joined by spaces */
    char text[64];
    size_t tn;
    int32_t seq[] = {1, 2, 8};
    assert_int_equal(clb_detokenize(t, seq, 3, false, text, sizeof text, &tn), COLIBRI_OK);
    assert_int_equal(tn, 6);
    assert_memory_equal(text, "a b ab", 6);
    clb_tokenizer_free(t);
}

/* A WordLevel tokenizer whose only pre-tokenizer is Split(re, Isolated); re is JSON-escaped. */
static clb_tokenizer *split_tokenizer(const char *re) {
    char js[1024];
    snprintf(js, sizeof js,
             "{\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"!\", \"vocab\": {\"!\": 0, \"a\": 1,"
             " \"b\": 2, \"9\": 3, \" \": 4, \"\\t\": 5, \"\\n\": 6, \"\\u000b\": 7, \"q\": 8, \"z\": 9,"
             " \"\\u180e\": 10}}, \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"},"
             " \"behavior\": \"Isolated\", \"invert\": false}}",
             re);
    return clb_tokenizer_from_hf(js, strlen(js), NULL);
}

/* Regex escapes with Oniguruma's meaning (Hugging Face's tokenizers run Split patterns with it):
   \s is White_Space, without U+180E; \h a hex digit; \v U+000B alone. Expected ids from
   Hugging Face's Rust tokenizers (npm tokenizers@0.23.2) on this very tokenizer.json. */
static void test_regex_escapes(void **st) {
    (void)st;
    static const struct {
        const char *re;
        int32_t want1[8], want2[5];
        size_t n1, n2;
    } cases[] = {
        {"\\\\s", {0, 4, 5, 6, 7, 0}, {10, 4, 0}, 6, 3},
        {"\\\\S", {1, 2, 3, 0, 8, 10, 9}, {10, 4, 10, 0, 0}, 7, 5},
        {"[^\\\\S]", {0, 4, 5, 6, 7, 0}, {10, 4, 0}, 6, 3},
        {"\\\\h", {1, 2, 3, 0}, {0}, 4, 1},
        {"[\\\\h]", {1, 2, 3, 0}, {0}, 4, 1},
        {"\\\\H", {0, 4, 5, 6, 7, 8, 10, 9}, {10, 4, 10, 0, 0}, 8, 5},
        {"\\\\v", {0, 7, 0}, {0}, 3, 1},
        {"[\\\\v]", {0, 7, 0}, {0}, 3, 1},
    };
    const char *s1 = "ab9 \t\n\vq\xe1\xa0\x8ez", *s2 = "\xe1\xa0\x8e \xe1\xa0\x8e\\s";
    int32_t ids[16];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clb_tokenizer *t = split_tokenizer(cases[i].re);
        if (!t) fprintf(stderr, "%s: %s\n", cases[i].re, clb_last_error());
        assert_non_null(t);
        size_t n = enc(t, s1, false, true, ids, 16);
        assert_ids(ids, n, cases[i].want1, cases[i].n1);
        n = enc(t, s2, false, true, ids, 16);
        assert_ids(ids, n, cases[i].want2, cases[i].n2);
        clb_tokenizer_free(t);
    }
    /* refused, naming the escape: \H in a class, PCRE2's \Q...\E quoting */
    assert_null(split_tokenizer("[\\\\H]"));
    assert_non_null(strstr(clb_last_error(), "\\H"));
    assert_null(split_tokenizer("\\\\Qa\\\\E"));
    assert_non_null(strstr(clb_last_error(), "\\Q"));
}

/* Hostile precompiled charsmaps fail cleanly or give no match, never read outside. */
static void test_charsmap_bounds(void **st) {
    (void)st;
    clb_charsmap m;
    unsigned char tiny[3] = {1, 2, 3};
    assert_int_not_equal(clb_charsmap_parse(tiny, 3, &m), COLIBRI_OK);
    unsigned char big[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0}; /* trie larger than the blob */
    assert_int_not_equal(clb_charsmap_parse(big, 8, &m), COLIBRI_OK);
    /* units pointing far outside the array */
    unsigned char wild[4 + 8 + 2] = {8, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 'x', 0};
    assert_int_equal(clb_charsmap_parse(wild, sizeof wild, &m), COLIBRI_OK);
    clb_buf out = {0};
    assert_int_equal(clb_charsmap_hf(&m, "abc\xc3\xa9", 5, &out), COLIBRI_OK);
    assert_int_equal(out.n, 5);
    assert_memory_equal(out.p, "abc\xc3\xa9", 5);
    const char *r;
    size_t rl;
    assert_int_equal(clb_charsmap_spm_prefix(&m, "abc", 3, &r, &rl), 0);
    clb_buf_free(&out);
    clb_charsmap_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_helpers),
        cmocka_unit_test(test_small_bpe_and_byte_fallback),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_bad_ids_and_sizes),
        cmocka_unit_test(test_stream_never_splits_utf8),
        cmocka_unit_test(test_fixture_examples),
        cmocka_unit_test(test_gguf_vocab),
        cmocka_unit_test(test_added_token_flags),
        cmocka_unit_test(test_charsmap_bounds),
        cmocka_unit_test(test_regex_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
