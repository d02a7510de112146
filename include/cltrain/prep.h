/* prep.h: a model's own input preparation, the [net] keys mean= and std=:
 * each pixel p (0..255) of channel c becomes (p / 255 - mean[c]) / std[c],
 * as torchvision's ToTensor + Normalize. A model that has them is fed so by
 * every data set (in place of a set's default, e.g. CIFAR's per-image
 * standardisation), by eval, predict and export; its checkpoint's .cfg text
 * carries them. Applied on the host by the producers (ct_augment, data
 * sets without producers through an equivalent scale and shift).
 * Depends on nothing. Reference: ref_prep (ref.h). Tested by
 * tests/test_augment.c and tests/test_model.c. */
#ifndef CLTRAIN_PREP_H
#define CLTRAIN_PREP_H
#include <stddef.h>

#define CT_PREP_MAX 16 /* channels mean= and std= can name */

typedef struct ct_prep {
    int c;                       /* channels; 0: none (the data set's default preparation) */
    float mean[CT_PREP_MAX];     /* in [0, 1] units */
    float std[CT_PREP_MAX];      /* > 0 */
} ct_prep;

/* In place on px pixels of p->c channels (HWC), already x / 255:
 * img[i * c + k] = (img[i * c + k] - mean[k]) / std[k]. p->c > 0. */
void ct_prep_apply(const ct_prep *p, float *img, size_t px);

/* 1 when every channel has mean 0 and std 1 (x / 255 unchanged). */
int ct_prep_is_unit(const ct_prep *p);

/* "mean=a,b,c std=d,e,f" into buf, each value in the fewest digits that
 * read back as the same float (messages, cfg text); "" when p->c is 0. */
void ct_prep_describe(const ct_prep *p, char *buf, size_t cap);

/* A comma-separated list of finite numbers (at most CT_PREP_MAX; std: each
 * > 0) into out[], the count into *n. Returns 0, or -1 with why (a phrase
 * naming the problem) set. Used by the .cfg reader and `cltrain import`. */
int ct_prep_parse_list(const char *s, int positive, float *out, int *n, const char **why);
#endif
