/* ref/bn.c: batch normalisation reference in float64 over x[M, C] (NHWC rows). */
#include "cltrain/ref.h"
#include "cltrain/ref/batchnorm.h"
#include <math.h>
#include <stdlib.h>

void ref_bn_forward(float *y, double *mean, double *invstd, const float *x, const float *gamma, const float *beta,
                    int M, int C, float eps, int act) {
    for (int c = 0; c < C; c++) {
        double s = 0, v = 0;
        for (int r = 0; r < M; r++) s += x[(long)r * C + c];
        double mu = s / M;
        for (int r = 0; r < M; r++) v += (x[(long)r * C + c] - mu) * (x[(long)r * C + c] - mu);
        double is = 1.0 / sqrt(v / M + eps);
        if (mean) mean[c] = mu;
        if (invstd) invstd[c] = is;
        for (int r = 0; r < M; r++) {
            double o = gamma[c] * (x[(long)r * C + c] - mu) * is + beta[c];
            o = ref_act(o, act);
            y[(long)r * C + c] = (float)o;
        }
    }
}

void ref_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *t, const float *x,
                     const float *gamma, int M, int C, float eps, int act) {
    double *mean = malloc(sizeof(double) * C), *is = malloc(sizeof(double) * C);
    float *tmp = malloc(sizeof(float) * (size_t)M * C);
    float *beta0 = calloc((size_t)C, sizeof(float));
    ref_bn_forward(tmp, mean, is, x, gamma, beta0, M, C, eps, 0);
    for (int c = 0; c < C; c++) {
        double sdy = 0, sdyx = 0;
        for (int r = 0; r < M; r++) {
            long i = (long)r * C + c;
            double g = ref_act_bwd(dy[i], t[i], act);
            sdy += g;
            sdyx += g * (x[i] - mean[c]) * is[c];
        }
        dbeta[c] += (float)sdy;
        dgamma[c] += (float)sdyx;
        for (int r = 0; r < M; r++) {
            long i = (long)r * C + c;
            double g = ref_act_bwd(dy[i], t[i], act);
            double xh = (x[i] - mean[c]) * is[c];
            dx[i] = (float)(gamma[c] * is[c] * (g - sdy / M - xh * sdyx / M));
        }
    }
    free(mean); free(is); free(tmp); free(beta0);
}
