/* convert.c — `colibri convert`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"

static void help(void) {
    puts("usage: colibri convert SRC -o OUT.colibri [--dtype T | --mix M] [--expert-dtype T] [--threads N]\n"
         "                       [--standin-dtype T]\n"
         "                       [--compress zstd[:L] | zlib[:L] | none] [--byte-split on|off] [--encrypt | --decrypt]\n"
         "\n"
         "SRC is a Hugging Face model directory (config.json + model.safetensors or sharded\n"
         "safetensors with model.safetensors.index.json; F32/F16/BF16), a .gguf file or a .colibri file.\n"
         "\n"
         "  -o, --output PATH     the .colibri file to write\n"
         "  --dtype T             every weight matrix: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,\n"
         "                        q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs or mxfp4 (default: keep\n"
         "                        the source's; a GGUF's quantized blocks stay bit-exact), or a\n"
         "                        llama.cpp mix Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M\n"
         "  --mix M               a llama.cpp mix by any llama-quantize name (the above, Q2_K, Q6_K,\n"
         "                        IQ4_NL, IQ4_XS, Q4_0, Q8_0, ...): each tensor gets the type\n"
         "                        llama-quantize gives it without an importance matrix, block for block\n"
         "  --expert-dtype T      routed experts: a type or a suffixed mix (default: as --dtype)\n"
         "  --expert-dtype-map M  per-expert dtypes (heterogeneous experts): \"0-3:q8_0,4-7:q4_0\" for\n"
         "                        every layer, or JSON {\"*\": \"0-7:q4_0\", \"0-1\": \"0-3:q8_0\"} inline or\n"
         "                        in a .json file (later keys win)\n"
         "  --standin-dtype T     also give every routed FFN expert a low-bit stand-in of type T (e.g.\n"
         "                        q2_k), which a run with --moe-standin W computes instead of waiting\n"
         "                        for an expert not in memory (docs/MEMORY.md)\n"
         "  --threads N           converting threads (default: every CPU)\n"
         "  --compress C          compress each expert and each dense tensor on its own: zstd (level 1..19,\n"
         "                        default 3), zlib (1..9, default 6) or none (default: as the source)\n"
         "  --byte-split on|off   16-bit weights: compress their exponent bytes apart (default on)\n"
         "  --segment-size SIZE   compressed or encrypted: plain bytes per segment, each decoded and\n"
         "                        authenticated on its own (a power of two, 64K..64M; default 4M)\n"
         "  --encrypt             AES-256-GCM: the config, tokenizer, tensor table and every expert and\n"
         "                        dense tensor, each its own authenticated chunk. The key (32 bytes) comes\n"
         "                        from --key-file FILE (before or after the command) or COLIBRI_KEY_FILE,\n"
         "                        never from the command line; make one with: colibri keygen FILE\n"
         "  --decrypt             write an encrypted source in the clear\n"
         "  -h, --help            this help\n"
         "\n"
         "Router weights, norms and biases always stay f32. Every type is GGUF's block layout, quantized\n"
         "as ggml's reference quantizer does (no importance matrix). A single type (q4_k) goes to every\n"
         "matrix; a matrix whose rows do not fit its blocks is stored f16. Note llama-quantize's Q4_K and\n"
         "Q5_K are its Q4_K_M and Q5_K_M mixes: use --mix Q4_K for those.");
}

static void on_progress(double f, void *user) { cli_progress_update(user, f); }

int cmd_encrypt(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    colibri_convert_params p = {.encrypt = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts("usage: colibri encrypt IN OUT [--compress zstd[:L] | zlib[:L] | none] [--threads N]\n"
                 "\n"
                 "Writes OUT, the model IN (a .colibri, .gguf or Hugging Face directory) with every tensor's\n"
                 "bytes unchanged, encrypted with AES-256-GCM: the configuration, the tokenizer, the tensor\n"
                 "table and each expert and dense tensor, each its own authenticated chunk. The key is the\n"
                 "32-byte key file given with --key-file FILE (before or after the command) or the\n"
                 "environment variable COLIBRI_KEY_FILE; it is never taken from the command line.\n"
                 "Compression: as IN unless --compress says otherwise.");
            return 0;
        } else if (!strcmp(a, "--compress")) {
            if (!(p.compress = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--threads")) {
            const char *v = cli_value(argc, argv, &i);
            long t;
            if (!v) return 2;
            if (!cli_int(v, 1, 1024, &t)) return cli_fail("encrypt: --threads wants 1..1024, not '%s'", v), 2;
            p.n_threads = (int32_t)t;
        } else if (a[0] == '-') {
            return cli_fail("encrypt: unknown option '%s' (see colibri encrypt --help)", a), 2;
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            return cli_fail("encrypt: want IN and OUT, got a third path '%s'", a), 2;
        }
    }
    if (!in || !out) return cli_fail("encrypt: want IN and OUT (see colibri encrypt --help)"), 2;
    uint64_t bi = 0, bo = 0;
    double t0 = cli_now();
    if (colibri_convert(in, out, &p, &bi, &bo)) return cli_fail("%s", colibri_last_error());
    double dt = cli_now() - t0;
    fprintf(stderr, "colibri: wrote %s (encrypted): %.2f MiB in %.2f s (%.1f MB/s)\n", out, bo / 1048576.0, dt,
            dt > 0 ? bi / 1e6 / dt : 0.0);
    return 0;
}

int cmd_convert(int argc, char **argv) {
    const char *src = NULL, *out = NULL;
    colibri_convert_params p = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--dtype")) {
            if (!(p.dtype = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--expert-dtype")) {
            if (!(p.expert_dtype = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--compress")) {
            if (!(p.compress = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--byte-split")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v) return 2;
            if (strcmp(v, "on") && strcmp(v, "off")) return cli_fail("convert: --byte-split wants on or off, not '%s'", v), 2;
            p.byte_split = !strcmp(v, "on") ? 0 : -1;
        } else if (!strcmp(a, "--segment-size")) {
            const char *v = cli_value(argc, argv, &i);
            uint64_t b;
            if (!v) return 2;
            if (!cli_size(v, &b) || b < (1u << 16) || b > (1u << 26) || (b & (b - 1)))
                return cli_fail("convert: --segment-size wants a power of two from 64K to 64M, not '%s'", v), 2;
            p.segment_bytes = (uint32_t)b;
        } else if (!strcmp(a, "--encrypt")) {
            p.encrypt = 1;
        } else if (!strcmp(a, "--decrypt")) {
            p.encrypt = -1;
        } else if (!strcmp(a, "--mix")) {
            if (!(p.mix = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--threads")) {
            const char *v = cli_value(argc, argv, &i);
            long t;
            if (!v) return 2;
            if (!cli_int(v, 1, 1024, &t)) return cli_fail("convert: --threads wants 1..1024, not '%s'", v), 2;
            p.n_threads = (int32_t)t;
        } else if (!strcmp(a, "--expert-dtype-map")) {
            if (!(p.expert_dtype_map = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--standin-dtype")) {
            if (!(p.standin_dtype = cli_value(argc, argv, &i))) return 2;
        } else if (a[0] == '-') {
            return cli_fail("convert: unknown option '%s' (see colibri convert --help)", a), 2;
        } else if (!src) {
            src = a;
        } else {
            return cli_fail("convert: more than one source given ('%s' and '%s')", src, a), 2;
        }
    }
    if (!src) return cli_fail("convert: no source given"), 2;
    if (!out) return cli_fail("convert: no output given (-o OUT.colibri)"), 2;
    cli_progress pr;
    cli_progress_init(&pr, "converting", 1.0);
    p.progress = on_progress;
    p.user = &pr;
    uint64_t in = 0, outb = 0;
    double t0 = cli_now();
    int rc = colibri_convert(src, out, &p, &in, &outb);
    cli_progress_done(&pr);
    if (rc) return cli_fail("%s", colibri_last_error());
    double dt = cli_now() - t0;
    fprintf(stderr, "colibri: wrote %s: %.2f MiB from %.2f MiB of tensors in %.2f s (%.1f MB/s)\n", out,
            outb / 1048576.0, in / 1048576.0, dt, dt > 0 ? in / 1e6 / dt : 0.0);
    return 0;
}
