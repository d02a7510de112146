/* ref/ops.c: softmax cross-entropy and optimizer references in float64. */
#include "cltrain/ref.h"
#include <math.h>

double ref_softmax_xent_smooth(float *dlogits, const float *logits, const int32_t *labels, int B, int C, double e,
                              int *correct) {
    double total = 0;
    int ok = 0;
    for (int b = 0; b < B; b++) {
        const float *z = logits + (long)b * C;
        double m = z[0];
        int arg = 0;
        for (int j = 1; j < C; j++)
            if (z[j] > m) { m = z[j]; arg = j; }
        double s = 0;
        for (int j = 0; j < C; j++) s += exp(z[j] - m);
        double lse = m + log(s);
        /* target q_j = (1-e)*[j == label] + e/C; loss = sum_j q_j * (lse - z_j) */
        for (int j = 0; j < C; j++) {
            double q = (j == labels[b]) * (1.0 - e) + e / C;
            if (q != 0) total += q * (lse - z[j]);
        }
        ok += arg == labels[b];
        if (dlogits)
            for (int j = 0; j < C; j++)
                dlogits[(long)b * C + j] = (float)((exp(z[j] - lse) - ((j == labels[b]) * (1.0 - e) + e / C)) / B);
    }
    if (correct) *correct = ok;
    return total;
}

double ref_softmax_xent(float *dlogits, const float *logits, const int32_t *labels, int B, int C, int *correct) {
    return ref_softmax_xent_smooth(dlogits, logits, labels, B, C, 0.0, correct);
}

void ref_adam(float *p, float *m, float *v, const float *g, long n, float lr, float b1, float b2, float eps, float wd, int t) {
    double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    for (long i = 0; i < n; i++) {
        double mi = (double)b1 * m[i] + (1.0 - b1) * g[i];
        double vi = (double)b2 * v[i] + (1.0 - b2) * (double)g[i] * g[i];
        m[i] = (float)mi;
        v[i] = (float)vi;
        double upd = (mi / bc1) / (sqrt(vi / bc2) + eps) + (double)wd * p[i];
        p[i] = (float)(p[i] - lr * upd);
    }
}

void ref_sgd(float *p, float *mom, const float *g, long n, float lr, float momentum, float wd) {
    for (long i = 0; i < n; i++) {
        double gi = g[i] + (double)wd * p[i];
        double b = (double)momentum * mom[i] + gi;
        mom[i] = (float)b;
        p[i] = (float)(p[i] - lr * b);
    }
}
