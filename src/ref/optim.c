/* ref/optim.c: float64 references of the optimizer steps in kernels/optim.cl
 * (the specification of each src/optim/<name>.c). Checked against the device
 * by tests/test_layers.c. */
#include "cltrain/ref.h"
#include <math.h>

/* moments of step t; returns mhat/(sqrt(vhat)+eps) of element i */
static double adam_dir(float *m, float *v, const float *g, long i, float b1, float b2, float eps, double bc1, double bc2) {
    double mi = (double)b1 * m[i] + (1.0 - b1) * g[i];
    double vi = (double)b2 * v[i] + (1.0 - b2) * (double)g[i] * g[i];
    m[i] = (float)mi;
    v[i] = (float)vi;
    return (mi / bc1) / (sqrt(vi / bc2) + eps);
}

void ref_adam(float *p, float *m, float *v, const float *g, long n, float lr, float b1, float b2, float eps, float wd, int t) {
    double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    for (long i = 0; i < n; i++) {
        double upd = adam_dir(m, v, g, i, b1, b2, eps, bc1, bc2) + (double)wd * p[i];
        p[i] = (float)(p[i] - lr * upd);
    }
}

void ref_adamw(float *p, float *m, float *v, const float *g, long n, float lr, float b1, float b2, float eps, double wdt, int t) {
    double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    for (long i = 0; i < n; i++) {
        double d = adam_dir(m, v, g, i, b1, b2, eps, bc1, bc2);
        p[i] = (float)(p[i] - lr * d - wdt * p[i]);
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

void ref_nesterov(float *p, float *mom, const float *g, long n, float lr, float momentum, float wd) {
    for (long i = 0; i < n; i++) {
        double gi = g[i] + (double)wd * p[i];
        double b = (double)momentum * mom[i] + gi;
        mom[i] = (float)b;
        p[i] = (float)(p[i] - lr * (gi + momentum * b));
    }
}

void ref_lookahead(float *p, float *avg, long n, double w) {
    for (long i = 0; i < n; i++) {
        double a = avg[i] + w * ((double)p[i] - avg[i]);
        avg[i] = p[i] = (float)a;
    }
}
