/* colibri.c — the command-line tool: subcommand dispatch (cli_main; main.c calls it, and so
   does the MPI driver, mpi/driver.c, on every rank). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"
#include "tokenize.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"run", cmd_run, "generate text (-p) or a greedy continuation of token ids (--tokens)"},
    {"chat", cmd_chat, "an interactive chat with the model's chat template"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with a chat page (docs/SERVER.md)"},
    {"perplexity", cmd_perplexity, "perplexity of a text file"},
    {"tokenize", colibri_cmd_tokenize, "text to token ids and back, with the model's tokenizer"},
    {"convert", cmd_convert, "convert a Hugging Face directory or GGUF file to .colibri"},
    {"encrypt", cmd_encrypt, "encrypt a model (AES-256-GCM) with the key of --key-file"},
    {"keygen", cmd_keygen, "write a new random 32-byte key file (mode 0600)"},
    {"inspect", cmd_inspect, "print a model's header, configuration and tensor table"},
    {"verify", cmd_verify, "check every CRC32 of a .colibri file (and authenticate an encrypted one)"},
    {"bench", cmd_bench, "measure prefill and decode speed"},
};

static void usage(FILE *f) {
    fprintf(f, "colibri %s — Mixture-of-Experts inference on CPUs\n\nusage: colibri COMMAND [options]\n\ncommands:\n",
            colibri_version());
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\n'colibri COMMAND --help' documents each command's options. Encrypted models: give the key\n"
               "file with --key-file FILE anywhere on the command line, or COLIBRI_KEY_FILE.\n");
}

/* Takes --key-file FILE / --key-file=FILE out of argv (any command may open an encrypted
   model); the key itself never appears on the command line. */
static int take_key_file(int *argc, char **argv) {
    int o = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--key-file") || !strncmp(a, "--key-file=", 11)) {
            const char *v = a[10] == '=' ? a + 11 : (i + 1 < *argc ? argv[++i] : NULL);
            if (!v || !*v) return cli_fail("--key-file needs a file name"), 2;
            if (colibri_set_key_file(v)) return cli_fail("%s", colibri_last_error()), 1;
            continue;
        }
        argv[o++] = argv[i];
    }
    *argc = o;
    argv[o] = NULL;
    return 0;
}

int cli_main(int argc, char **argv) {
    int krc = take_key_file(&argc, argv);
    if (krc) return krc;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("colibri %s\n", colibri_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
    cli_fail("unknown command '%s' (see colibri --help)", argv[1]);
    return 2;
}
