/* cli/tfrecord.c: TFRecord files for `cltrain images` and `cltrain pack`
 * (reader in data/tfrecord.c): the --tfrecord-image/-label/-shape and
 * --train/--test options, taken out of argv before the command's own option
 * parser runs (the image set over the files is data/imageset.c).
 * Tested by tests/tfrecord.sh. */
#include "cli.h"
#include <errno.h>
#include <glob.h>
#include <string.h>
#include <sys/stat.h>

int cli_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* pattern's matches (sorted) appended to *v, or the pattern itself when it names a file */
static int add_glob(const char *opt, const char *pattern, char ***v, int *n) {
    glob_t g;
    memset(&g, 0, sizeof g);
    int r = glob(pattern, 0, NULL, &g);
    if (r == GLOB_NOMATCH && cli_is_file(pattern)) r = -1;
    else if (r) {
        globfree(&g);
        return ct_fail(CT_EINPUT, "--%s %s: no such file%s", opt, pattern, strpbrk(pattern, "*?[") ? " matches" : "");
    }
    size_t k = r == -1 ? 1 : g.gl_pathc;
    *v = realloc(*v, (*n + k) * sizeof **v);
    if (!*v) ct_abort("out of memory listing files", __FILE__, __LINE__);
    for (size_t i = 0; i < k; i++) (*v)[(*n)++] = strdup(r == -1 ? pattern : g.gl_pathv[i]);
    globfree(&g);
    return 0;
}

static int parse_shape(const char *s, ct_tfr_opts *o) {
    int h, w, c, used = 0;
    if (sscanf(s, "%d,%d,%d%n", &h, &w, &c, &used) != 3 || s[used] || h < 1 || w < 1 || h > 16384 || w > 16384 || c < 1 ||
        c > 4)
        return ct_fail(CT_EINPUT, "--tfrecord-shape %s: expected H,W,C (e.g. 28,28,1), sides 1..16384, 1..4 channels", s);
    o->raw_h = h;
    o->raw_w = w;
    o->raw_c = c;
    return 0;
}

int cli_tfr_args(int *argc, char **argv, ct_tfr_files *t) {
    memset(t, 0, sizeof *t);
    static const char *const names[] = {"tfrecord-image", "tfrecord-label", "tfrecord-shape", "train", "test"};
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *val = NULL;
        int which = -1;
        for (int k = 0; k < 5 && which < 0 && a[0] == '-' && a[1] == '-'; k++) {
            size_t l = strlen(names[k]);
            if (!strncmp(a + 2, names[k], l) && (a[2 + l] == 0 || a[2 + l] == '=')) {
                which = k;
                val = a[2 + l] == '=' ? a + 3 + l : NULL;
            }
        }
        if (!strcmp(a, "--")) which = -2;
        if (which < 0) { argv[out++] = argv[i]; continue; }
        if (!val && i + 1 < *argc) val = argv[++i];
        if (!val) return ct_fail(CT_EINPUT, "option %s needs a value; see `cltrain --help`", a);
        int rc = 0;
        switch (which) {
        case 0: t->o.image_key = val; break;
        case 1: t->o.label_key = val; break;
        case 2: rc = parse_shape(val, &t->o); break;
        case 3: rc = add_glob("train", val, &t->train, &t->n_train); break;
        case 4: rc = add_glob("test", val, &t->test, &t->n_test); break;
        }
        if (rc) return rc;
        t->given = 1;
    }
    *argc = out;
    argv[out] = NULL;
    if (t->n_test && !t->n_train) return ct_fail(CT_EINPUT, "--test needs --train: give the training files too");
    return 0;
}

int cli_tfr_files(int argc, char **argv, ct_tfr_files *t) {
    int k = 1;
    while (k < argc && argv[k][0] != '-' && cli_is_file(argv[k])) k++;
    if (k > 1 && t->n_train)
        return ct_fail(CT_EINPUT, "%s: give TFRecord files either before the options or with --train/--test, not both", argv[1]);
    for (int i = 1; i < k; i++) {
        int rc = add_glob("train", argv[i], &t->train, &t->n_train);
        if (rc) return rc;
    }
    return k - 1;
}
