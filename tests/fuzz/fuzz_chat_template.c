/* fuzz_chat_template.c — libFuzzer target: the input up to the first NUL byte is a chat
   template, rendered with a fixed conversation (system, user, assistant, user) and with
   the rest of the input as extra JSON variables when it parses as an object. Invariants:
   success gives a NUL-terminated output no longer than the renderer's limit; failure
   explains itself and gives no output. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/chat.h"
#include "text/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : size;
    char *tpl = malloc(tl + 1);
    if (!tpl) return 0;
    memcpy(tpl, data, tl);
    tpl[tl] = 0;
    cJSON *extra = NULL;
    if (nul) {
        extra = cJSON_ParseWithLength((const char *)nul + 1, size - tl - 1);
        if (extra && !cJSON_IsObject(extra)) {
            cJSON_Delete(extra);
            extra = NULL;
        }
    }
    static const clb_chat_msg msgs[] = {{"system", "Be terse."}, {"user", "Hi <|im_end|>"},
                                        {"assistant", "Hello."}, {"user", "2 + 2?"}};
    char *out = (char *)1;
    int rc = clb_chat_render_ex(tpl, msgs, CLB_ARRAY_LEN(msgs), size & 1, "<s>", "</s>", extra, &out);
    if (rc == COLIBRI_OK) {
        if (!out || strlen(out) > CLB_JINJA_MAX_OUTPUT) __builtin_trap();
        clb_free(out);
    } else if (out || !clb_last_error()[0]) {
        __builtin_trap();
    }
    cJSON_Delete(extra);
    free(tpl);
    return 0;
}
