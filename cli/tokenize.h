/* tokenize.h — the `colibri tokenize` subcommand. */
#ifndef CLB_CLI_TOKENIZE_H
#define CLB_CLI_TOKENIZE_H

/* colibri tokenize (-m MODEL | --tokenizer FILE) [--text T] [--special] [--decode] [--bench FILE]
   Returns the process exit status (0 on success; errors print one line on stderr). */
int colibri_cmd_tokenize(int argc, char **argv);

#endif
