/* tokenizer.h — text <-> token ids for Hugging Face tokenizer.json files and GGUF vocabularies.
 *
 * Supported:
 *   - HF tokenizer.json, models BPE (byte-level like GPT-2/Qwen, or SentencePiece-style with
 *     byte_fallback like Llama/Mistral), WordPiece (BERT), WordLevel and Unigram (SentencePiece
 *     models converted by tokenizers, with their Precompiled charsmap), with the normalizers,
 *     pre-tokenizers, post-processors and decoders real files use; added tokens (special and
 *     not) split out as tokenizers does (flags lstrip/rstrip/single_word/normalized).
 *   - GGUF tokenizer.ggml.*: model "llama" (SentencePiece merge-by-score, <0xXX> byte tokens),
 *     "gpt2" (byte-level BPE with the pre-tokenizer regexes chosen by tokenizer.ggml.pre),
 *     "bert" (llama.cpp's WPM) and "t5" (llama.cpp's UGM: Unigram + precompiled charsmap).
 *
 * A tokenizer is immutable after creation: clb_tokenize / clb_detokenize may be called from
 * several threads at once on the same tokenizer (each call keeps its own scratch state).
 *
 * Usage:
 *     clb_tokenizer *tok = clb_tokenizer_from_hf(json, json_len, config_json_or_NULL);
 *     int32_t ids[256]; size_t n;
 *     if (clb_tokenize(tok, "Hello", 5, true, true, ids, 256, &n) != COLIBRI_OK) ...
 *     char text[1024]; size_t tn;
 *     clb_detokenize(tok, ids, n, false, text, sizeof text, &tn);
 *     clb_tokenizer_free(tok);
 */
#ifndef CLB_TOKENIZER_H
#define CLB_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "format/gguf.h"

typedef struct clb_tokenizer clb_tokenizer;

/* Builds a tokenizer from the text of a tokenizer.json (len bytes, need not be NUL-terminated)
   and, optionally, the NUL-terminated text of its tokenizer_config.json (add_bos_token,
   add_eos_token, bos/eos tokens, chat_template). Returns NULL on error (clb_last_error says why:
   malformed JSON, an unsupported model/normalizer/pre-tokenizer type, a bad regex). */
clb_tokenizer *clb_tokenizer_from_hf(const char *tokenizer_json, size_t len,
                                     const char *tokenizer_config_json);

/* The same from already parsed JSON (config may be NULL). The tokenizer copies what it needs. */
clb_tokenizer *clb_tokenizer_from_hf_json(const cJSON *tokenizer, const cJSON *config);

/* Builds a tokenizer from an open GGUF file's tokenizer.ggml.* / tokenizer.chat_template keys.
   Returns NULL on error (missing keys, unknown model, inconsistent array lengths). */
clb_tokenizer *clb_tokenizer_from_gguf(const clb_gguf *g);

/* The tokenizer.* keys of a GGUF file as a JSON object {"gguf": {"tokenizer.ggml.model": ...,
   "tokenizer.ggml.tokens": [...], ...}} (numbers, strings, bools and arrays of them), the form the
   .colibri converter stores. NULL on error. The caller frees it with cJSON_Delete. */
cJSON *clb_tokenizer_gguf_to_json(const clb_gguf *g);

/* The HF form for the .colibri metadata: {"hf": {"tokenizer_json": <object>,
   "tokenizer_config": <object or null>}}. Both inputs are duplicated; NULL on error. */
cJSON *clb_tokenizer_hf_to_json(const cJSON *tokenizer, const cJSON *config);

/* Builds a tokenizer from either stored form above ({"hf": ...} or {"gguf": ...}). */
clb_tokenizer *clb_tokenizer_from_json(const cJSON *stored);

void clb_tokenizer_free(clb_tokenizer *tok); /* NULL is fine */

/* Tokenizes len bytes of text (UTF-8; invalid bytes are tokenized as bytes where the model can).
   add_special: add BOS/EOS (or the post-processor's template) as the tokenizer files say.
   parse_special: special added tokens written in the text (e.g. "<|im_start|>") become their
   ids, as Hugging Face's encode(text) does; without it they are tokenized as plain text
   (tokenizers' split_special_tokens). Non-special added tokens are always matched (as Hugging
   Face and llama.cpp do).
   Writes up to cap ids to out and the count to *n_out. When cap is too small, returns
   COLIBRI_ERR_ARG with *n_out set to the number needed (out may then be partly written). */
int clb_tokenize(const clb_tokenizer *tok, const char *text, size_t len, bool add_special,
                 bool parse_special, int32_t *out, size_t cap, size_t *n_out);

/* The same, except that no special token is matched where it would overlap one of the
   n_plain byte spans [plain[2i], plain[2i + 1]) of text (text a user typed: it stays text,
   whatever parse_special says). */
int clb_tokenize_plain(const clb_tokenizer *tok, const char *text, size_t len, bool add_special,
                       bool parse_special, const size_t *plain, size_t n_plain, int32_t *out, size_t cap,
                       size_t *n_out);

/* Length of the longest special added token whose text starts at s[0, n), 0 if none. */
size_t clb_tokenizer_special_at(const clb_tokenizer *tok, const char *s, size_t n);

/* Turns n ids back into text (what the tokenizer's decoder gives; for HF files this equals
   tokenizers' decode with clean_up_tokenization_spaces false). skip_special drops special
   tokens (BOS/EOS/control). Writes up to cap bytes (no NUL) and the length to *n_out; when cap
   is too small returns COLIBRI_ERR_ARG with *n_out the length needed. An out-of-range id is
   COLIBRI_ERR_ARG. */
int clb_detokenize(const clb_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special,
                   char *out, size_t cap, size_t *n_out);

/* The raw bytes one token stands for (byte-level and <0xXX> tokens give their byte, the
   SentencePiece "▁" becomes a space, added tokens give their content). Not NUL-terminated; a
   piece may be part of a UTF-8 sequence. NULL (with an error set) for an out-of-range id. */
const char *clb_token_to_piece(const clb_tokenizer *tok, int32_t id, size_t *len);

/* The token's vocabulary string as stored in the file (e.g. "▁Hello", "Ġworld", "<0x0A>"),
   NUL-terminated; NULL for an out-of-range id. */
const char *clb_token_text(const clb_tokenizer *tok, int32_t id);

/* Id of an exact vocabulary string (file form, as clb_token_text gives), -1 if none. */
int32_t clb_token_lookup(const clb_tokenizer *tok, const char *text, size_t len);

int32_t clb_tokenizer_n_vocab(const clb_tokenizer *tok); /* ids are 0..n_vocab-1 */
int32_t clb_tokenizer_bos(const clb_tokenizer *tok);     /* -1 when none */
int32_t clb_tokenizer_eos(const clb_tokenizer *tok);     /* -1 when none */
int32_t clb_tokenizer_pad(const clb_tokenizer *tok);     /* -1 when none */
int32_t clb_tokenizer_unk(const clb_tokenizer *tok);     /* -1 when none */
/* true for special/control tokens (skipped by skip_special, never produced from plain text). */
bool clb_token_is_special(const clb_tokenizer *tok, int32_t id);
/* The chat template (Jinja source) or NULL when the files have none. */
const char *clb_tokenizer_chat_template(const clb_tokenizer *tok);
/* Whether add_special adds a BOS / an EOS. */
bool clb_tokenizer_adds_bos(const clb_tokenizer *tok);
bool clb_tokenizer_adds_eos(const clb_tokenizer *tok);

/* ---- streaming detokenizer: feeds ids one at a time, never emits a partial UTF-8 sequence ---- */

typedef struct clb_detok_stream clb_detok_stream;

/* NULL on allocation failure. The tokenizer must outlive the stream. */
clb_detok_stream *clb_detok_stream_new(const clb_tokenizer *tok, bool skip_special);
/* Appends token id; writes the text that became complete (0..n bytes, whole UTF-8 characters;
   invalid bytes come out as U+FFFD) to out and its length to *n_out. cap >= 64 + the longest
   token piece is always enough; a too-small cap is COLIBRI_ERR_ARG with *n_out the size needed
   and the state unchanged. Concatenating all outputs and the final flush equals clb_detokenize
   of the whole sequence for valid UTF-8. */
int clb_detok_stream_push(clb_detok_stream *s, int32_t id, char *out, size_t cap, size_t *n_out);
/* Emits what is still buffered (an incomplete sequence becomes U+FFFD per byte) and resets. */
int clb_detok_stream_flush(clb_detok_stream *s, char *out, size_t cap, size_t *n_out);
void clb_detok_stream_free(clb_detok_stream *s);

#endif
