/* container_none.c — MINIMAL=1 stand-in for src/format/container_v2.c and codec.c: this
 * build carries no compression or encryption code (no zstd, zlib, OpenSSL), so a version 2
 * (compressed or encrypted) .colibri file is refused when its header is read, with one line
 * that says why; plain version 1 files and GGUF files open as in the full build. */
#include "core/common.h"
#include "format/codec.h"
#include "format/container.h"
#include "format/container_impl.h"

int clb_ct_v2_header(const char *path, const uint8_t *h, clb_container *c) {
    (void)h;
    return clb_err(COLIBRI_ERR_UNSUPPORTED,
                   "%s: a %s%s%s .colibri file (version 2); this minimal build has no codecs (MINIMAL=1): "
                   "use a full build, or convert the model without --compress / --encrypt",
                   path, c->flags & CLB_CONTAINER_FLAG_COMPRESSED ? "compressed" : "",
                   (c->flags & CLB_CONTAINER_FLAG_COMPRESSED) && (c->flags & CLB_CONTAINER_FLAG_ENCRYPTED) ? " and " : "",
                   c->flags & CLB_CONTAINER_FLAG_ENCRYPTED ? "encrypted" : "");
}

/* never reached: the header above refuses every version 2 file before these */
int clb_ct_v2_open(const char *path, int flags, clb_container *c) {
    (void)flags, (void)c;
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: version 2 files need a full build", path);
}
int clb_ct_v2_verify(const clb_container *c, uint64_t *bytes_checked, int *authenticated) {
    (void)c, (void)bytes_checked, (void)authenticated;
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "version 2 files need a full build");
}
void clb_ct_v2_close(clb_container *c) { (void)c; }
int clb_ct_v2_writer_init(clb_cwriter *w, const clb_cw_encoding *enc) {
    (void)w, (void)enc;
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "this minimal build writes no compressed or encrypted files");
}
int clb_ct_v2_write(clb_cwriter *w, int i, const uint8_t *data, uint64_t len) {
    (void)w, (void)i, (void)data, (void)len;
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "this minimal build writes no compressed or encrypted files");
}
int clb_ct_v2_finish(clb_cwriter *w) { return clb_ct_v2_write(w, 0, NULL, 0); }
void clb_ct_v2_writer_free(clb_cwriter *w) { (void)w; }
uint64_t clb_ct_v2_data_bytes(const clb_cwriter *w) {
    (void)w;
    return 0;
}

struct clb_codec *clb_container_codec(const clb_container *c) {
    (void)c;
    clb_err(COLIBRI_ERR_UNSUPPORTED, "no decoders in this minimal build");
    return NULL;
}
int clb_container_decode_seg(const clb_container *c, int ci, int seg, uint8_t *stored, uint64_t stored_len,
                             uint8_t *plain, struct clb_codec *k) {
    (void)c, (void)ci, (void)seg, (void)stored, (void)stored_len, (void)plain, (void)k;
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "no decoders in this minimal build");
}
int clb_container_read_chunk(const clb_container *c, int ci, uint8_t *plain, uint8_t *scratch, struct clb_codec *k) {
    (void)c, (void)ci, (void)plain, (void)scratch, (void)k;
    return clb_err(COLIBRI_ERR_UNSUPPORTED, "no decoders in this minimal build");
}
void clb_container_release_chunk(const clb_container *c, int ci) { (void)c, (void)ci; } /* no v2 files open */
uint64_t clb_container_max_seg(const clb_container *c) {
    (void)c;
    return 0;
}
uint64_t clb_container_max_plain_seg(const clb_container *c) {
    (void)c;
    return 0;
}
void clb_codec_free(clb_codec *c) { (void)c; }
const char *clb_codec_name(int codec) { return codec == CLB_CODEC_NONE ? "none" : "?"; }
