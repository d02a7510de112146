/* ref/prep.c: the input normalisation reference in float64 (prep.h). */
#include "cltrain/ref.h"

void ref_prep(double *out, const uint8_t *in, long px, int c, const double *mean, const double *std) {
    for (long i = 0; i < px; i++)
        for (int k = 0; k < c; k++) out[i * c + k] = ((double)in[i * c + k] / 255.0 - mean[k]) / std[k];
}
