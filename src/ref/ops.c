/* ref/ops.c: the activations and the softmax cross-entropy reference in
 * float64 (optimizers: ref/optim.c). */
#include "cltrain/ref.h"
#include <math.h>

double ref_act(double z, int act) {
    if (act == 1) return z < 0 ? 0 : z;
    if (act == 2) return 0.5 * z * (1 + erf(z / sqrt(2.0)));
    return z;
}

double ref_act_bwd(double g, double t, int act) {
    if (act == 1) return t > 0 ? g : 0;
    if (act == 2) return g * (0.5 * (1 + erf(t / sqrt(2.0))) + t * exp(-0.5 * t * t) / sqrt(2 * M_PI));
    return g;
}

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
