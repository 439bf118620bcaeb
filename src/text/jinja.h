/* jinja.h — a Jinja2 subset for chat templates, with the environment Hugging Face
 * transformers uses (trim_blocks, lstrip_blocks, loop controls, tojson with
 * ensure_ascii=False, raise_exception, strftime_now), no autoescaping.
 *
 * Usage:
 *     clb_jinja_tpl *t;
 *     if (clb_jinja_parse(src, &t) != COLIBRI_OK) ...           // syntax error: clb_last_error
 *     char *out;
 *     if (clb_jinja_render(t, ctx_json_object, &out) != COLIBRI_OK) ...  // runtime error
 *     ... clb_free(out); clb_jinja_free(t);
 *
 * The context is a cJSON object: every member becomes a template variable (JSON null is None,
 * numbers without a fractional part become ints). Rendering never leaks: each render uses its
 * own arena. Limits (errors, never crashes): nesting depth of expressions/blocks, macro
 * recursion depth, total loop iterations, memory per render and output size.
 * What is supported and what is not: see the comment at the top of jinja_eval.c.
 * Files: jinja_lex.c (tokens), jinja_parse.c (AST), jinja_eval.c (rendering),
 * jinja_builtins.c (filters, tests, globals), jinja_str.c (str methods), jinja_value.c (values).
 */
#ifndef CLB_JINJA_H
#define CLB_JINJA_H

#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct clb_jinja_tpl clb_jinja_tpl;

/* Limits applied to every render (compile-time constants, exposed for tests). */
#define CLB_JINJA_MAX_DEPTH 200          /* parser nesting (expressions + blocks) */
#define CLB_JINJA_MAX_CALL_DEPTH 64      /* macro / caller() recursion */
#define CLB_JINJA_MAX_ITERATIONS 1000000 /* loop iterations in one render, all loops */
#define CLB_JINJA_MAX_OUTPUT (64u << 20) /* bytes of output */
#define CLB_JINJA_MAX_MEMORY (256u << 20) /* arena bytes per render */

/* Parses template source (UTF-8). On error returns a status (COLIBRI_ERR_FORMAT for syntax
   errors, with the line number in clb_last_error) and sets *out to NULL. */
int clb_jinja_parse(const char *src, clb_jinja_tpl **out);
void clb_jinja_free(clb_jinja_tpl *t); /* NULL is fine */

/* Renders t with the variables of ctx (a cJSON object or NULL; it must outlive the call).
   *out receives a NUL-terminated heap string (free with clb_free), NULL on error.
   Errors, each with a one-line "template error (line N): ..." message in clb_last_error():
   COLIBRI_ERR_FORMAT for runtime errors (undefined attribute access, type errors, and
   raise_exception(msg), whose msg follows verbatim), COLIBRI_ERR_RANGE for an exceeded
   depth / iteration / output limit, COLIBRI_ERR_NOMEM beyond CLB_JINJA_MAX_MEMORY. */
int clb_jinja_render(const clb_jinja_tpl *t, const cJSON *ctx, char **out);

/* parse + render + free in one call. */
int clb_jinja_render_string(const char *src, const cJSON *ctx, char **out);

#endif
