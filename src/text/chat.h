/* chat.h — chat templates: renders a conversation with a model's Jinja chat template
 * (tokenizer_config.json "chat_template") the way Hugging Face transformers does.
 *
 * Usage:
 *     clb_chat_msg msgs[] = {{"system", "You are terse."}, {"user", "Hi"}};
 *     char *prompt;
 *     if (clb_chat_render(tpl, msgs, 2, true, NULL, "<|im_end|>", &prompt) != COLIBRI_OK)
 *         ... clb_last_error() ...
 *     ... clb_free(prompt);
 */
#ifndef CLB_CHAT_H
#define CLB_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* colibri_chat_tokenize refuses a rendered conversation longer than this many bytes per
   position of the context (no real token is that long) before tokenizing it. */
#define CLB_CHAT_MAX_BYTES_PER_TOKEN 64

typedef struct clb_chat_msg {
    const char *role;
    const char *content;
} clb_chat_msg;

/* Renders template_src (NULL: clb_chat_default_template()) with the variables transformers
   passes: messages (a list of {role, content} dicts), add_generation_prompt, tools = None,
   documents = None, and bos_token / eos_token when non-NULL (absent, i.e. undefined,
   when NULL). *out receives a heap string (free with clb_free). Errors (syntax, runtime,
   raise_exception) leave the message in clb_last_error(). */
int clb_chat_render(const char *template_src, const clb_chat_msg *msgs, size_t n,
                    bool add_generation_prompt, const char *bos_token, const char *eos_token,
                    char **out);

/* The same with extra variables: every member of the cJSON object `extra` (may be NULL) is
   added to the context, overriding the defaults above — e.g. "tools" (a list of JSON
   schemas), "enable_thinking", "documents", other special tokens, or "messages" itself
   (a full list of message objects with tool_calls, reasoning_content, ...; then msgs/n
   are ignored). */
int clb_chat_render_ex(const char *template_src, const clb_chat_msg *msgs, size_t n,
                       bool add_generation_prompt, const char *bos_token, const char *eos_token,
                       const cJSON *extra, char **out);

/* A ChatML template, for models that ship none:
   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n] */
const char *clb_chat_default_template(void);

#endif
