/* convert.c — `colibri convert`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "colibri.h"

static void help(void) {
    puts("usage: colibri convert SRC -o OUT.colibri [--dtype T] [--expert-dtype T]\n"
         "\n"
         "SRC is a Hugging Face model directory (config.json + model.safetensors or sharded\n"
         "safetensors with model.safetensors.index.json; F32/F16/BF16), a .gguf file or a .colibri file.\n"
         "\n"
         "  -o, --output PATH     the .colibri file to write\n"
         "  --dtype T             dense weights: f32, f16, bf16, q8_0 or q4_0 (default: keep the\n"
         "                        source's; a GGUF's quantized blocks stay bit-exact)\n"
         "  --expert-dtype T      routed experts (default: as --dtype)\n"
         "  --expert-dtype-map M  per-expert dtypes (heterogeneous experts): \"0-3:q8_0,4-7:q4_0\" for\n"
         "                        every layer, or JSON {\"*\": \"0-7:q4_0\", \"0-1\": \"0-3:q8_0\"} inline or\n"
         "                        in a .json file (later keys win)\n"
         "  -h, --help            this help\n"
         "\n"
         "Router weights, norms and biases always stay f32. q8_0 and q4_0 are GGUF's Q8_0/Q4_0 blocks.");
}

static void on_progress(double f, void *user) { cli_progress_update(user, f); }

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
        } else if (!strcmp(a, "--expert-dtype-map")) {
            if (!(p.expert_dtype_map = cli_value(argc, argv, &i))) return 2;
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
