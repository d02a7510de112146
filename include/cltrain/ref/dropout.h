/* ref/dropout.h: the float64 reference of [dropout] (inverted dropout), in src/ref/dropout.c:
 * the specification its kernels are checked against in tests/test_dropout.c. Shared
 * definitions (activations: t, act) are cltrain/ref.h's. */
#ifndef CLTRAIN_REF_DROPOUT_H
#define CLTRAIN_REF_DROPOUT_H
#include "cltrain/ref.h"

/* inverted dropout: keep element i when hash(seed, step, layer, i) >> 8 >= p * 2^24 */
uint32_t ref_hash(uint32_t a, uint32_t b, uint32_t c, uint32_t d);
void ref_dropout(float *y, const float *x, long n, float p, uint32_t seed, uint32_t step, uint32_t layer);
#endif
