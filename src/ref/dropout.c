/* ref/dropout.c: references for dropout (same hash as kernels/dropout.cl) and
 * global average pooling. */
#include "cltrain/ref.h"
#include "cltrain/ref/avgpool.h"
#include "cltrain/ref/dropout.h"

uint32_t ref_hash(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    uint32_t h = a * 0x9E3779B1u ^ b * 0x85EBCA77u ^ c * 0xC2B2AE3Du ^ d * 0x27D4EB2Fu;
    h ^= h >> 16; h *= 0x7FEB352Du; h ^= h >> 15; h *= 0x846CA68Bu; h ^= h >> 16;
    return h;
}

static int keep(long i, float p, uint32_t seed, uint32_t step, uint32_t layer) {
    float u = (float)(ref_hash(seed, step, layer, (uint32_t)i) >> 8) * (1.0f / 16777216.0f);
    return u >= p;
}

void ref_dropout(float *y, const float *x, long n, float p, uint32_t seed, uint32_t step, uint32_t layer) {
    for (long i = 0; i < n; i++) y[i] = keep(i, p, seed, step, layer) ? (float)((double)x[i] / (1.0 - p)) : 0.0f;
}

void ref_avgpool_forward(float *y, const float *x, int B, int HW, int C) {
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int p = 0; p < HW; p++) s += x[((long)b * HW + p) * C + c];
            y[(long)b * C + c] = (float)(s / HW);
        }
}

void ref_avgpool_backward(float *dx, const float *dy, int B, int HW, int C) {
    for (int b = 0; b < B; b++)
        for (int p = 0; p < HW; p++)
            for (int c = 0; c < C; c++) dx[((long)b * HW + p) * C + c] = (float)((double)dy[(long)b * C + c] / HW);
}
