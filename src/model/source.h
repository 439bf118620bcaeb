/* source.h — one view over every model file kind: a .colibri container, a GGUF file or a
 * Hugging Face directory becomes hyper-parameters + a table of canonically named tensors
 * (model.h) + the tokenizer in the stored JSON form. The loader and the converter both
 * work on this view, so they never care where the bytes came from. */
#ifndef CLB_SOURCE_H
#define CLB_SOURCE_H

#include <cjson/cJSON.h>

#include "core/platform.h"
#include "model/model.h"

typedef enum { CLB_SRC_COLIBRI = 0, CLB_SRC_GGUF = 1, CLB_SRC_HF = 2 } clb_source_kind;

typedef struct clb_src_tensor {
    char name[96];              /* canonical name (model.h) */
    int dtype;
    int n_dims;
    int64_t shape[CLB_MAX_DIMS]; /* numpy order */
    const uint8_t *data;        /* into a mapping; NULL when the dtype is unknown */
    uint64_t size;
    int layer, expert;          /* -1 when none */
    int fd;                     /* file holding the bytes, for pread-based loading */
    const clb_io *io;           /* or the caller's source holding them (fd -1) */
    bool streamed;              /* a routed expert of a streamed source: data NULL, its bytes
                                   are read through io (the bounded mode's pool) */
    uint64_t file_offset;       /* absolute offset of data in fd */
    /* an encoded .colibri's routed expert: data is NULL; its plain bytes are at chunk_off in
       the decoded chunk `chunk` of the container (clb_source_container) */
    bool deferred;
    int chunk;
    uint64_t chunk_off;
    bool copied;                /* the loader computes from its own copy (packed weights) and
                                   gave these pages back: nothing to lock or keep resident */
} clb_src_tensor;

typedef struct clb_source {
    int kind; /* clb_source_kind */
    char *path;
    clb_hparams hp;
    clb_src_tensor *tensors; /* sorted by name */
    int n_tensors;
    cJSON *tokenizer;        /* stored form ({"hf": ...} / {"gguf": ...}) or NULL; owned */
    void *impl;              /* the open container / gguf / hf dir */
    clb_io io;               /* a caller's source instead of a path (has_io) */
    bool has_io, io_stream;  /* io_stream: experts stay in the source (clb_source_open_io) */
    struct clb_src_owned *owned; /* buffers of tensors the source rearranged (gpt-oss's HF experts) */
} clb_source;

/* Opens path: a directory is a Hugging Face model, otherwise the magic decides
   ("COLIBRI\0" or "GGUF"). Errors name the file and the problem. */
int clb_source_open(const char *path, clb_source *out);
/* Opens a caller's source (colibri_init_ex): a .colibri or GGUF file. stream (a plain
   .colibri without a map callback): only the header, metadata and dense tensors are read;
   every routed expert is `streamed`. */
int clb_source_open_io(const clb_io *io, bool stream, clb_source *out);
void clb_source_close(clb_source *s);
const clb_src_tensor *clb_source_find(const clb_source *s, const char *name);
/* The .colibri container behind a source (NULL for other kinds): encoded experts are
   decoded through it (container.h). */
const struct clb_container *clb_source_container(const clb_source *s);
/* Bytes the routed experts occupy (all layers) and the rest. */
void clb_source_sizes(const clb_source *s, uint64_t *dense_bytes, uint64_t *expert_bytes);

#endif
