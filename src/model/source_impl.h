/* source_impl.h — internals shared by source.c and source_gguf.c. */
#ifndef CLB_SOURCE_IMPL_H
#define CLB_SOURCE_IMPL_H

#include "model/source.h"

int clb_source_finish_table(clb_source *s); /* sorts by name, rejects duplicates */
int clb_source_open_gguf(const char *path, clb_source *s);
void clb_source_close_gguf(clb_source *s);

#endif
