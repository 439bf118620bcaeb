/* text_none.c — MINIMAL=1 stand-in for src/text/ and src/text_api.c: the minimal build runs
 * token ids only (`colibri run --tokens`), so it has no tokenizer (no PCRE2, no utf8proc),
 * no chat templates and no sampler. A GGUF file's vocabulary is left unread. */
#include "core/common.h"
#include "text/tokenizer.h"

cJSON *clb_tokenizer_gguf_to_json(const clb_gguf *g) {
    (void)g;
    return NULL; /* source_gguf.c: no tokenizer (see clb_minimal_no_tokenizer) */
}
void clb_tokenizer_free(clb_tokenizer *tok) { (void)tok; }
