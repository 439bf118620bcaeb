/* chat.c — builds the transformers-style context for a chat template and renders it
   with the Jinja subset (jinja.h). */
#include "text/chat.h"

#include "core/common.h"
#include "text/jinja.h"

static const char chatml_template[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

const char *clb_chat_default_template(void) { return chatml_template; }

int clb_chat_render_ex(const char *template_src, const clb_chat_msg *msgs, size_t n,
                       bool add_generation_prompt, const char *bos_token, const char *eos_token,
                       const cJSON *extra, char **out) {
    if (!out) return clb_err(COLIBRI_ERR_ARG, "chat template: NULL output pointer");
    *out = NULL;
    if (n && !msgs) return clb_err(COLIBRI_ERR_ARG, "chat template: NULL messages with n = %zu", n);
    if (extra && !cJSON_IsObject(extra))
        return clb_err(COLIBRI_ERR_ARG, "chat template: extra variables must be a JSON object");
    const char *src = template_src ? template_src : chatml_template;
    int rc = COLIBRI_OK;
    cJSON *ctx = cJSON_CreateObject(), *list = cJSON_CreateArray();
    if (!ctx || !list) {
        cJSON_Delete(list);
        rc = clb_err(COLIBRI_ERR_NOMEM, "chat template: out of memory building the context");
        goto done;
    }
    cJSON_AddItemToObject(ctx, "messages", list);
    for (size_t i = 0; i < n && rc == COLIBRI_OK; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            rc = clb_err(COLIBRI_ERR_ARG, "chat template: message %zu has a NULL role or content", i);
            break;
        }
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddStringToObject(m, "role", msgs[i].role) ||
            !cJSON_AddStringToObject(m, "content", msgs[i].content)) {
            cJSON_Delete(m);
            rc = clb_err(COLIBRI_ERR_NOMEM, "chat template: out of memory building the context");
            break;
        }
        cJSON_AddItemToArray(list, m);
    }
    if (rc) goto done;
    if (!cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt) ||
        !cJSON_AddNullToObject(ctx, "tools") || !cJSON_AddNullToObject(ctx, "documents") ||
        (bos_token && !cJSON_AddStringToObject(ctx, "bos_token", bos_token)) ||
        (eos_token && !cJSON_AddStringToObject(ctx, "eos_token", eos_token))) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "chat template: out of memory building the context");
        goto done;
    }
    for (const cJSON *e = extra ? extra->child : NULL; e; e = e->next) {
        if (!e->string) continue;
        cJSON *dup = cJSON_Duplicate(e, 1);
        if (!dup) {
            rc = clb_err(COLIBRI_ERR_NOMEM, "chat template: out of memory building the context");
            goto done;
        }
        if (cJSON_GetObjectItemCaseSensitive(ctx, e->string))
            cJSON_ReplaceItemInObjectCaseSensitive(ctx, e->string, dup);
        else cJSON_AddItemToObject(ctx, e->string, dup);
    }
    rc = clb_jinja_render_string(src, ctx, out);
    if (rc) clb_err_prefix("chat template");
done:
    cJSON_Delete(ctx);
    return rc;
}

int clb_chat_render(const char *template_src, const clb_chat_msg *msgs, size_t n,
                    bool add_generation_prompt, const char *bos_token, const char *eos_token,
                    char **out) {
    return clb_chat_render_ex(template_src, msgs, n, add_generation_prompt, bos_token, eos_token,
                              NULL, out);
}
