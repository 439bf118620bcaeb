/* mix.h — llama.cpp's quantization mixes ("Q4_K_M", "Q5_K_S", ...): which tensor gets which
 * type, as llama-quantize decides it without an importance matrix (llama-quant.cpp,
 * llama_tensor_get_type, at the llama.cpp commit the fixtures were written with). */
#ifndef CLB_MIX_H
#define CLB_MIX_H

#include <stdbool.h>

#include "model/source.h"

/* llama_ftype numbers of the mixes convert can write (no importance matrix). */
typedef enum clb_mix {
    CLB_MIX_NONE = -1,
    CLB_MIX_F32 = 0,
    CLB_MIX_F16 = 1,
    CLB_MIX_Q4_0 = 2,
    CLB_MIX_Q4_1 = 3,
    CLB_MIX_Q8_0 = 7,
    CLB_MIX_Q5_0 = 8,
    CLB_MIX_Q5_1 = 9,
    CLB_MIX_Q2_K = 10,
    CLB_MIX_Q3_K_S = 11,
    CLB_MIX_Q3_K_M = 12,
    CLB_MIX_Q3_K_L = 13,
    CLB_MIX_Q4_K_S = 14,
    CLB_MIX_Q4_K_M = 15,
    CLB_MIX_Q5_K_S = 16,
    CLB_MIX_Q5_K_M = 17,
    CLB_MIX_Q6_K = 18,
    CLB_MIX_IQ4_NL = 25,
    CLB_MIX_IQ4_XS = 30,
    CLB_MIX_BF16 = 32
} clb_mix;

/* A mix by llama-quantize's name, case-insensitive ("Q4_K_M"; "Q4_K", "Q3_K", "Q5_K" are its
   aliases of the _M mixes). strict: only names that are not also a single type's name (the
   _S/_M/_L mixes), which --dtype accepts. Returns the mix or CLB_MIX_NONE with an error
   naming the mixes (Q2_K_S and the IQ1/IQ2/IQ3 mixes need an importance matrix). */
int clb_mix_from_name(const char *name, bool strict);
const char *clb_mix_name(int mix);

/* The type of every tensor of s under the mix, in s->tensors order: a clb_dtype, or -1 for a
   tensor llama-quantize leaves unquantized (norms, biases, routers, 1-D tensors). *n_fallback
   (may be NULL) counts tensors whose columns did not fit the mix's type (llama.cpp's
   fallback chain: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/IQ4_XS -> IQ4_NL,
   then F16). Errors: out of memory, a tensor name without its layer. */
int clb_mix_plan(const clb_source *s, int mix, int *types, int *n_fallback);

#endif
