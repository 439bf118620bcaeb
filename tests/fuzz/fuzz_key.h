/* fuzz_key.h — the key of the encrypted fuzz seeds (gen_container_v2.c) and of the target
   that reads them (fuzz_container_v2.c). A test key, nothing else. */
#ifndef CLB_FUZZ_KEY_H
#define CLB_FUZZ_KEY_H
static const unsigned char FUZZ_KEY[32] = {0x66, 0x75, 0x7a, 0x7a, 0x20, 0x6b, 0x65, 0x79, 1, 2, 3, 4, 5, 6, 7, 8,
                                           9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
#endif
