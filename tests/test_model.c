/* test_model.c: .cfg model definitions and one end-to-end training check.
 *
 * Parsing: the built-ins (mnist-cnn must have 1,199,882 parameters), the
 * summary, aliases and formatting freedom, the shape arithmetic; then every
 * kind of malformed definition must return CT_EINPUT with a one-line
 * message naming the file and, where a line is to blame, its number.
 * End to end (needs a device, skipped without one): a tiny net (8x8x1, conv
 * 4 3x3 ReLU, maxpool 2, dense 3) trained for 5 Adam steps on a fixed batch
 * fed as bytes through ct_model_set_batch, against the same 5 steps computed
 * on the host by the float64 references; per-step losses and the final
 * parameters must match. */
#include "ct_test.h"
#include "cltrain/layer.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"
#include "cltrain/ref.h"
#include "cltrain/ref/conv.h"
#include "cltrain/ref/maxpool.h"
#include <unistd.h>

/* ---------------- valid definitions ---------------- */

static void test_builtin_mnist_cnn(void **state) {
    (void)state;
    ct_model m;
    int rc = ct_model_load(&m, "mnist-cnn");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    /* 320 + 18496 + 1179776 + 1290 */
    assert_int_equal(m.n_params, 1199882);
    assert_int_equal(m.n_layers, 5);
    assert_int_equal(m.in_h, 28);
    assert_int_equal(m.in_w, 28);
    assert_int_equal(m.in_c, 1);
    assert_int_equal(m.n_classes, 10);
    static const int shape[5][7] = {
        /* type       oh  ow  oc  k  relu n_w */
        {CT_L_CONV, 26, 26, 32, 3, 1, 288},
        {CT_L_CONV, 24, 24, 64, 3, 1, 18432},
        {CT_L_MAXPOOL, 12, 12, 64, 2, 0, 0},
        {CT_L_DENSE, 1, 1, 128, 0, 1, 1179648},
        {CT_L_DENSE, 1, 1, 10, 0, 0, 1280},
    };
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        const ct_layer *L = &m.layers[i];
        assert_int_equal(L->type, shape[i][0]);
        assert_int_equal(L->oh, shape[i][1]);
        assert_int_equal(L->ow, shape[i][2]);
        assert_int_equal(L->oc, shape[i][3]);
        if (L->type != CT_L_DENSE) assert_int_equal(L->k, shape[i][4]);
        assert_int_equal(L->act, shape[i][5]);
        assert_int_equal(L->n_w, shape[i][6]);
        assert_int_equal(L->n_b, L->type == CT_L_MAXPOOL ? 0 : L->oc);
        /* parameters are packed in layer order: weights then bias */
        assert_int_equal(L->w_off, off);
        assert_int_equal(L->b_off, off + L->n_w);
        off += L->n_w + L->n_b;
        if (i) {
            assert_int_equal(L->ih, m.layers[i - 1].oh);
            assert_int_equal(L->iw, m.layers[i - 1].ow);
            assert_int_equal(L->ic, m.layers[i - 1].oc);
        }
    }
    assert_int_equal(off, m.n_params);
    /* forward multiply-adds: 2 * (26*26*32*9 + 24*24*64*288 + 9216*128 + 128*10) */
    double flops = 2.0 * (26 * 26 * 32 * 9 + 24 * 24 * 64 * 288.0 + 9216 * 128 + 1280);
    assert_true(fabs(m.flops_fwd - flops) < 1);
    assert_non_null(m.cfg);
    assert_non_null(strstr(m.cfg, "[softmax]"));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ct_model_summary(&m, f);
    fclose(f);
    fputs(text, stderr);
    assert_non_null(strstr(text, "mnist-cnn"));
    assert_non_null(strstr(text, "1199882 parameters"));
    assert_non_null(strstr(text, "28x28x1"));
    int lines = 0;
    for (char *p = text; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 1 + 5);
    free(text);
    assert_int_equal(ct_model_check_input(&m, 28, 28, 1, 10, "mnist", "pick another --model"), 0);
    ct_model_free(&m);
}

static void test_builtin_mlp(void **state) {
    (void)state;
    ct_model m;
    assert_int_equal(ct_model_load(&m, "mlp"), 0);
    assert_int_equal(m.n_params, 784 * 256 + 256 + 256 * 10 + 10);
    assert_int_equal(m.n_layers, 2);
    assert_int_equal(m.layers[0].act, CT_ACT_RELU);
    assert_int_equal(m.layers[1].act, CT_ACT_LINEAR);
    ct_model_free(&m);
}

static void test_check_input(void **state) {
    (void)state;
    ct_model m;
    assert_int_equal(ct_model_load(&m, "mnist-cnn"), 0);
    assert_int_equal(ct_model_check_input(&m, 32, 32, 3, 10, "cifar", "pick another --model"), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "mnist-cnn"));
    assert_non_null(strstr(ct_last_error(), "cifar"));
    assert_int_equal(ct_model_check_input(&m, 28, 28, 1, 26, "emnist", "pick another --model"), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "26"));
    ct_model_free(&m);
}

/* aliases, comments, blank lines, spaces around '=', CRLF line ends, the shape arithmetic */
static void test_parse_formats(void **state) {
    (void)state;
    const char *cfg = "# a comment\n; another\n\n[net]\nheight = 9\nwidth=8\nchannels=3\nclasses=5\n\n"
                      "[convolutional]\nfilters=7\nsize=3\nstride=2\npad=1\nactivation=relu\n"
                      "[maxpool]\nsize=2\n"          /* stride defaults to size */
                      "[conv]\nfilters=4\nsize=1\n"  /* linear by default */
                      "[maxpool]\nsize=2\nstride=1\n"
                      "[connected]\noutputs=5\n[softmax]\n";
    ct_model m;
    int rc = ct_model_parse(&m, cfg, "fmt.cfg");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(m.n_layers, 5);
    /* conv: (9 + 2 - 3)/2 + 1 = 5, (8 + 2 - 3)/2 + 1 = 4 */
    assert_int_equal(m.layers[0].oh, 5);
    assert_int_equal(m.layers[0].ow, 4);
    assert_int_equal(m.layers[0].oc, 7);
    assert_int_equal(m.layers[0].act, CT_ACT_RELU);
    assert_int_equal(m.layers[0].line, 10);
    /* maxpool 2 (stride 2, floor): 2x2 */
    assert_int_equal(m.layers[1].stride, 2);
    assert_int_equal(m.layers[1].oh, 2);
    assert_int_equal(m.layers[1].ow, 2);
    assert_int_equal(m.layers[1].line, 16);
    assert_int_equal(m.layers[2].act, CT_ACT_LINEAR);
    assert_int_equal(m.layers[2].oc, 4);
    assert_int_equal(m.layers[3].oh, 1);
    assert_int_equal(m.layers[3].ow, 1);
    assert_int_equal(m.layers[4].n_w, 4 * 5);
    assert_int_equal(m.n_params, 3 * 3 * 3 * 7 + 7 + 7 * 4 + 4 + 4 * 5 + 5);
    ct_model_free(&m);

    const char *crlf = "[net]\r\nheight=4\r\nwidth=4\r\nchannels=1\r\nclasses=2\r\n[dense]\r\noutputs=2\r\n[softmax]\r\n";
    rc = ct_model_parse(&m, crlf, "crlf.cfg");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(m.n_params, 16 * 2 + 2);
    ct_model_free(&m);
}

/* A definition in a file: the path is the model's name, errors name it. */
static void test_load_file(void **state) {
    (void)state;
    char dir[] = "/tmp/cltrain-test-model-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bad[128], bin[128];
    snprintf(path, sizeof path, "%s/tiny.cfg", dir);
    snprintf(bad, sizeof bad, "%s/bad.cfg", dir);
    snprintf(bin, sizeof bin, "%s/binary.cfg", dir);
    FILE *f = fopen(path, "w");
    fputs("[net]\nheight=4\nwidth=4\nchannels=1\nclasses=2\n[dense]\noutputs=2\n[softmax]\n", f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("[net]\nheight=4\nwidth=4\nchannels=1\nclasses=2\n[dense]\noutputs=2\nsize=3x\n[softmax]\n", f);
    fclose(f);
    f = fopen(bin, "wb");
    fwrite("[net]\n\0\x01\x02", 1, 9, f);
    fclose(f);
    ct_model m;
    assert_int_equal(ct_model_load(&m, path), 0);
    assert_string_equal(m.name, path);
    assert_int_equal(m.n_params, 34);
    ct_model_free(&m);
    assert_int_equal(ct_model_load(&m, bad), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), bad));
    assert_non_null(strstr(ct_last_error(), "size=3x"));
    ct_model_free(&m);
    assert_int_equal(ct_model_load(&m, bin), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), bin));
    ct_model_free(&m);
    unlink(path); unlink(bad); unlink(bin);
    rmdir(dir);
}

/* ---------------- malformed definitions ---------------- */

#define NET "[net]\nheight=8\nwidth=8\nchannels=1\nclasses=3\n" /* lines 1-5 */
#define TAIL "[dense]\noutputs=3\n[softmax]\n"

typedef struct bad_case {
    const char *why, *cfg;
    int line, line2;   /* the line the message must name (0: none); line2: also accepted (a key's line vs its section's) */
    const char *want;  /* a piece of the message */
} bad_case;

static const bad_case bad_cases[] = {
    /* the parameter keys: bias, init, lr multipliers, scale, batch norm's, whiten */
    {"init not a known one", NET "[conv]\nfilters=4\nsize=3\ninit=xavier\n" TAIL, 9, 0, "init=xavier"},
    {"dirac on a dense", NET "[dense]\noutputs=3\ninit=dirac\n[softmax]\n", 6, 0, "init=dirac"},
    {"lr not a number", NET "[conv]\nfilters=4\nsize=3\nlr=fast\n" TAIL, 9, 0, "lr=fast"},
    {"negative lr multiplier", NET "[conv]\nfilters=4\nsize=3\nbias_lr=-2\n" TAIL, 9, 0, "bias_lr=-2"},
    {"fraction by zero", NET "[dense]\noutputs=3\nscale=1/0\n[softmax]\n", 8, 0, "scale=1/0"},
    {"fraction with junk", NET "[dense]\noutputs=3\nscale=1/9x\n[softmax]\n", 8, 0, "scale=1/9x"},
    {"scale zero", NET "[dense]\noutputs=3\nscale=0\n[softmax]\n", 6, 0, "scale=0"},
    {"bias=2", NET "[conv]\nfilters=4\nsize=3\nbias=2\n" TAIL, 9, 0, "bias=2"},
    {"bias_lr without a bias", NET "[conv]\nfilters=4\nsize=3\nbias=0\nbias_lr=64\n" TAIL, 6, 0, "bias_lr= with bias=0"},
    {"bias_decay without a bias", NET "[dense]\noutputs=3\nbias=0\nbias_decay=1\n[softmax]\n", 6, 0, "bias_decay= with bias=0"},
    {"momentum above 1", NET "[batchnorm]\nmomentum=1.5\n" TAIL, 7, 0, "momentum=1.5"},
    {"eps 0", NET "[batchnorm]\neps=0\n" TAIL, 6, 0, "eps=0"},
    {"eps nan", NET "[batchnorm]\neps=nan\n" TAIL, 7, 0, "eps=nan"},
    {"whiten with the wrong filters", NET "[conv]\nfilters=12\nsize=2\nwhiten=500\n" TAIL, 6, 0, "needs filters=8"},
    {"whiten with lr", NET "[conv]\nfilters=8\nsize=2\nwhiten=500\nlr=1\n" TAIL, 6, 0, "leave out lr="},
    {"whiten with init", NET "[conv]\nfilters=8\nsize=2\nwhiten=500\ninit=dirac\n" TAIL, 6, 0, "leave out init="},
    {"unknown layer section", NET "[conv2d]\nfilters=4\nsize=3\n" TAIL, 6, 0, "[conv2d]"},
    {"filters not a number", NET "\n# comment\n[conv]\nfilters=abc\nsize=3\n" TAIL, 8, 9, "filters=abc"},
    {"size=0", NET "[conv]\nfilters=4\nsize=0\n" TAIL, 6, 8, "size=0"},
    {"trailing garbage", NET "[conv]\nfilters=4\nsize=3x\n" TAIL, 6, 8, "size=3x"},
    {"negative pad", NET "[conv]\nfilters=4\nsize=3\npad=-1\n" TAIL, 6, 9, "pad=-1"},
    {"number overflows", NET "[conv]\nfilters=99999999999999999999\nsize=3\n" TAIL, 6, 7, "filters="},
    {"classes=1", "[net]\nheight=8\nwidth=8\nchannels=1\nclasses=1\n[dense]\noutputs=1\n[softmax]\n", 1, 5, "classes=1"},
    {"unknown key", NET "[conv]\nfilters=4\nsize=3\nkernel=3\n" TAIL, 6, 9, "kernel"},
    {"bad activation", NET "[conv]\nfilters=4\nsize=3\nactivation=tanh\n" TAIL, 6, 9, "activation=tanh: expected one of linear, relu, gelu"},
    {"missing [net]", "[conv]\nfilters=4\nsize=3\n" TAIL, 1, 0, "[net]"},
    {"[net] not first", "# model\n[dense]\noutputs=3\n" NET "[softmax]\n", 2, 0, "[net]"},
    {"[net] twice", NET TAIL NET, 9, 0, "[net]"},
    {"[net] incomplete", "[net]\nheight=8\nwidth=8\nclasses=3\n" TAIL, 1, 0, "channels="},
    {"conv larger than its input", NET "[conv]\nfilters=4\nsize=9\n" TAIL, 6, 0, "size=9"},
    {"second conv larger than its input", NET "[conv]\nfilters=4\nsize=3\nstride=2\n[conv]\nfilters=2\nsize=5\npad=0\n" TAIL, 10, 0, "size=5"},
    {"maxpool larger than its input", NET "[maxpool]\nsize=9\n" TAIL, 6, 0, "size=9"},
    {"conv without size", NET "[conv]\nfilters=4\n" TAIL, 6, 0, "size="},
    {"dense without outputs", NET "[dense]\nactivation=relu\n" TAIL, 6, 0, "outputs="},
    {"last dense outputs != classes", NET "[dense]\noutputs=4\n[softmax]\n", 0, 0, "outputs=3"},
    {"last layer not dense", NET "[conv]\nfilters=3\nsize=3\n[softmax]\n", 0, 0, "[dense]"},
    {"missing [softmax]", NET "[dense]\noutputs=3\n", 0, 0, "[softmax]"},
    {"[softmax] not last", NET "[dense]\noutputs=3\n[softmax]\n[dense]\noutputs=3\n", 9, 0, "[softmax]"},
    {"no layers", NET "[softmax]\n", 0, 0, "no layers"},
    {"empty", "", 0, 0, "[net]"},
    {"text before the first section", "height=8\n" NET TAIL, 1, 0, "height=8"},
    {"a line that is not key=value", NET "[dense]\noutputs=3\nthis is not a setting\n[softmax]\n", 8, 0, "line"},
    /* keys that do not apply to the section: each was once accepted and ignored */
    {"activation on maxpool", NET "[maxpool]\nsize=2\nactivation=relu\n" TAIL, 8, 0, "[maxpool] takes no key 'activation'"},
    {"activation on avgpool", NET "[avgpool]\nactivation=relu\n" TAIL, 7, 0, "[avgpool] takes no key 'activation'"},
    {"activation on globalmaxpool", NET "[globalmaxpool]\nactivation=gelu\n" TAIL, 7, 0, "[globalmaxpool] takes no key 'activation'"},
    {"activation on dropout", NET "[dropout]\nactivation=relu\n" TAIL, 7, 0, "[dropout] takes no key 'activation'"},
    {"avgpool with a window", NET "[avgpool]\nsize=2\n" TAIL, 7, 0, "[avgpool] takes no key 'size'"},
    {"pad on maxpool", NET "[maxpool]\nsize=2\npad=1\n" TAIL, 8, 0, "[maxpool] takes no key 'pad'"},
    {"outputs on conv", NET "[conv]\nfilters=4\nsize=3\noutputs=3\n" TAIL, 9, 0, "[conv] takes no key 'outputs'"},
    {"filters on dense", NET "[dense]\nfilters=3\noutputs=3\n[softmax]\n", 7, 0, "[dense] takes no key 'filters'"},
    {"probability on conv", NET "[conv]\nfilters=4\nsize=3\nprobability=0.5\n" TAIL, 9, 0, "probability"},
    {"height outside [net]", NET "[dense]\noutputs=3\nheight=8\n[softmax]\n", 8, 0, "[dense] takes no key 'height'"},
    {"a key in [softmax]", NET TAIL "outputs=3\n", 9, 0, "[softmax] takes no key 'outputs'"},
    {"keys on the header line", NET "[conv] filters=4 size=3\nfilters=4\nsize=3\n" TAIL, 6, 0, "filters=4 size=3"},
    /* the input normalisation: a key's own line is named */
#define NET3 "[net]\nheight=8\nwidth=8\nchannels=3\nclasses=3\n" /* lines 1-5 */
    {"mean of the wrong count", NET3 "mean=0.5,0.5\nstd=0.2,0.2,0.2\n" TAIL, 6, 0, "mean= has 2 values but channels=3"},
    {"std of the wrong count", NET3 "mean=0.5,0.5,0.5\nstd=0.2,0.2,0.2,0.2\n" TAIL, 7, 0, "std= has 4 values but channels=3"},
    {"std = 0", NET3 "mean=0.5,0.5,0.5\nstd=0.2,0,0.2\n" TAIL, 7, 0, "std=0.2,0,0.2: value 2 (0) must be > 0"},
    {"std < 0", NET3 "mean=0.5,0.5,0.5\nstd=0.2,0.2,-1\n" TAIL, 7, 0, "value 3 (-1) must be > 0"},
    {"mean not a number", NET3 "mean=0.5,red,0.5\nstd=0.2,0.2,0.2\n" TAIL, 6, 0, "mean=0.5,red,0.5: value 2 is not a number"},
    {"mean nan", NET3 "mean=nan,0.5,0.5\nstd=0.2,0.2,0.2\n" TAIL, 6, 0, "value 1 (nan) is not a finite number"},
    {"std inf", NET3 "std=0.2,inf,0.2\nmean=0.5,0.5,0.5\n" TAIL, 6, 0, "std=0.2,inf,0.2"},
    {"mean with a blank separator", NET3 "mean=0.5 0.5 0.5\nstd=0.2,0.2,0.2\n" TAIL, 6, 0, "separate the values with commas"},
    {"mean empty", NET3 "mean=\nstd=0.2,0.2,0.2\n" TAIL, 6, 0, "mean=: value 1 is not a number"},
    {"a trailing comma", NET3 "mean=0.5,0.5,0.5,\nstd=0.2,0.2,0.2\n" TAIL, 6, 0, "value 4 is not a number"},
    {"mean without std", NET3 "mean=0.5,0.5,0.5\n" TAIL, 6, 0, "mean= without std="},
    {"std without mean", NET3 "classes=3\nstd=0.5,0.5,0.5\n" TAIL, 7, 0, "std= without mean="},
    {"mean outside [net]", NET3 "[dense]\noutputs=3\nmean=0.5\n[softmax]\n", 8, 0, "[dense] takes no key 'mean'"},
    {"more than 16 channels", "[net]\nheight=8\nwidth=8\nchannels=17\nclasses=3\nmean=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n"
     "std=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\n" TAIL, 6, 0, "more than 16 values"},
    /* a long line was split by inih into two: outputs=10 then 5 */
    {"a line of 300 bytes", NET "[dense]\noutputs=3                                                                     "
     "                                                                                                          "
     "                                                                                                      5\n[softmax]\n", 7, 0, "outputs=3"},
};

static void test_bad_cfgs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const bad_case *c = &bad_cases[i];
        ct_model m;
        int rc = ct_model_parse(&m, c->cfg, "bad.cfg");
        const char *msg = ct_last_error();
        fprintf(stderr, "# %-32s -> %s\n", c->why, rc ? msg : "(accepted)");
        assert_int_equal(rc, CT_EINPUT);
        assert_non_null(strstr(msg, "bad.cfg"));
        assert_null(strchr(msg, '\n'));
        if (!strstr(msg, c->want)) fprintf(stderr, "# %s: message lacks '%s'\n", c->why, c->want);
        assert_non_null(strstr(msg, c->want));
        if (c->line) {
            char at[32], at2[32];
            snprintf(at, sizeof at, "bad.cfg:%d:", c->line);
            snprintf(at2, sizeof at2, "bad.cfg:%d:", c->line2);
            if (!strstr(msg, at) && !(c->line2 && strstr(msg, at2)))
                fprintf(stderr, "# %s: message lacks '%s'%s%s\n", c->why, at, c->line2 ? " or " : "", c->line2 ? at2 : "");
            assert_true(strstr(msg, at) || (c->line2 && strstr(msg, at2)));
        }
        ct_model_free(&m);  /* safe after a failed parse */
    }
}

/* [net] mean= and std= reach the model (one value per channel, blanks allowed), none without them */
static void test_net_normalisation(void **state) {
    (void)state;
    ct_model m;
    assert_int_equal(ct_model_parse(&m, NET3 "mean = 0.4914, 0.4822,0.4465 ; CIFAR-10's\nstd=0.2470,0.2435,0.2616\n" TAIL,
                                    "ok.cfg"), 0);
    assert_int_equal(m.prep.c, 3);
    assert_true(m.prep.mean[1] == 0.4822f && m.prep.std[2] == 0.2616f);
    char d[200];
    ct_prep_describe(&m.prep, d, sizeof d);
    assert_string_equal(d, "mean=0.4914,0.4822,0.4465 std=0.247,0.2435,0.2616");
    assert_false(ct_prep_is_unit(&m.prep));
    ct_model_free(&m);
    assert_int_equal(ct_model_parse(&m, NET "mean=0\nstd=1\n" TAIL, "ok.cfg"), 0);
    assert_true(m.prep.c == 1 && ct_prep_is_unit(&m.prep));
    ct_model_free(&m);
    assert_int_equal(ct_model_parse(&m, NET TAIL, "ok.cfg"), 0);
    assert_int_equal(m.prep.c, 0);
    ct_model_free(&m);
    /* reshaped to a set of another channel count, the counts no longer match: refused, naming the key */
    char path[] = "/tmp/ct-prep-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *txt = NET3 "mean=0.5,0.5,0.5\nstd=0.25,0.25,0.25\n" TAIL;
    assert_int_equal(write(fd, txt, strlen(txt)), (int)strlen(txt));
    close(fd);
    assert_int_equal(ct_model_load_shaped(&m, path, 8, 8, 1, 3), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "mean= has 3 values but channels=1"));
    ct_model_free(&m);
    assert_int_equal(ct_model_load_shaped(&m, path, 16, 16, 3, 5), 0);
    assert_int_equal(m.prep.c, 3);
    ct_model_free(&m);
    unlink(path);
    /* the keys written into a model's text (import): after [net]'s header, old ones replaced, c 0 removes them */
    ct_prep p = {.c = 3, .mean = {0.5f, 0.25f, 0.125f}, .std = {1, 2, 0.3f}};
    char *t = ct_model_cfg_set_prep(txt, &p);
    assert_non_null(strstr(t, "[net]\nmean=0.5,0.25,0.125\nstd=1,2,0.3\nheight=8"));
    assert_null(strstr(t, "mean=0.5,0.5,0.5"));
    assert_int_equal(ct_model_parse(&m, t, "set.cfg"), 0);
    assert_true(m.prep.c == 3 && m.prep.mean[2] == 0.125f && m.prep.std[2] == 0.3f);
    ct_model_free(&m);
    ct_prep none = {0};
    char *u = ct_model_cfg_set_prep(t, &none);
    assert_null(strstr(u, "mean"));
    assert_null(strstr(u, "std"));
    assert_int_equal(ct_model_parse(&m, u, "unset.cfg"), 0);
    assert_int_equal(m.prep.c, 0);
    ct_model_free(&m);
    free(t);
    free(u);
}

static void test_load_errors(void **state) {
    (void)state;
    ct_model m;
    assert_int_equal(ct_model_load(&m, "/nonexistent/dir/model.cfg"), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "/nonexistent/dir/model.cfg"));
    assert_null(strchr(ct_last_error(), '\n'));
    ct_model_free(&m);
    assert_int_equal(ct_model_load(&m, "no-such-model.cfg"), CT_EINPUT);  /* .cfg: a file, not a built-in */
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "no-such-model.cfg"));
    ct_model_free(&m);
    assert_int_equal(ct_model_load(&m, "resnet50"), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "resnet50"));
    assert_non_null(strstr(ct_last_error(), "mnist-cnn"));  /* lists the built-ins */
    assert_non_null(strstr(ct_last_error(), "mlp"));
    assert_null(strchr(ct_last_error(), '\n'));
    ct_model_free(&m);
}

/* Every slot of the layer table holds its own type's ops, each with a name,
 * shape, forward and backward; the section names parse back to the slot. */
static void test_layer_table(void **state) {
    (void)state;
    for (int t = 0; t < CT_LAYER_TYPES; t++) {
        const ct_layer_ops *o = ct_layer_table[t];
        assert_non_null(o);
        assert_int_equal(o->type, t);
        assert_string_equal(o->name, ct_layer_table[t]->name);
        assert_true(o->shape && o->forward && o->backward);
        assert_true(o->n_keys <= 32 && (o->n_keys == 0 || o->keys));
    }
}

/* Comment lines and values of any length: a 5000-byte comment is a comment,
 * and a value padded with 500 blanks is still one value. */
static void test_long_lines(void **state) {
    (void)state;
    size_t n = 20000;
    char *cfg = malloc(n), *p = cfg;
    p += sprintf(p, "# ");
    for (int i = 0; i < 5000; i++) *p++ = 'c';
    p += sprintf(p, "\n" NET "[dense]\noutputs=3");
    for (int i = 0; i < 500; i++) *p++ = ' ';
    p += sprintf(p, "\n[softmax]\n");
    ct_model m;
    int rc = ct_model_parse(&m, cfg, "long.cfg");
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(m.layers[0].oc, 3);
    assert_int_equal(m.in_h, 8);
    ct_model_free(&m);
    free(cfg);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ct_model_load_shaped once sized its rewritten text as the input + 256 bytes:
 * 300 repeats of height=8 rewritten as height=65536 wrote past the end. An
 * empty file left the rewritten text unterminated. */
static void test_load_shaped_rewrites(void **state) {
    (void)state;
    char dir[] = "/tmp/cltrain-test-shaped-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char big[128], empty[128];
    snprintf(big, sizeof big, "%s/repeat.cfg", dir);
    snprintf(empty, sizeof empty, "%s/empty.cfg", dir);
    char *text = malloc(8192), *p = text;
    p += sprintf(p, "[net]\n");
    for (int i = 0; i < 300; i++) p += sprintf(p, "height=8\n");
    sprintf(p, "width=8\nchannels=1\nclasses=3\n[avgpool]\n[dense]\noutputs=3\n[softmax]\n");
    write_file(big, text);
    free(text);
    write_file(empty, "");
    ct_model m;
    int rc = ct_model_load_shaped(&m, big, 65536, 4096, 3, 1000);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(m.in_h, 65536);
    assert_int_equal(m.in_w, 4096);
    assert_int_equal(m.n_classes, 1000);
    assert_int_equal(m.layers[1].oc, 1000);
    ct_model_free(&m);
    assert_int_equal(ct_model_load_shaped(&m, empty, 8, 8, 1, 3), CT_EINPUT);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), empty));
    assert_non_null(strstr(ct_last_error(), "[net]"));
    ct_model_free(&m);
    unlink(big); unlink(empty);
    rmdir(dir);
}

/* Element counts are 64-bit, and a batch whose tensors pass the kernels'
 * int indexing is refused at setup with one line, before any allocation. */
static void test_huge_batch_refused(void **state) {
    (void)state;
    if (!g_have_cl) skip();
    ct_model m;
    /* 1024x1024x16 floats per image after the conv: 16.7 M; batch 256 is 4.3 G values */
    const char *cfg = "[net]\nheight=1024\nwidth=1024\nchannels=1\nclasses=2\n[conv]\nfilters=16\nsize=1\n"
                      "[avgpool]\n[dense]\noutputs=2\n[softmax]\n";
    assert_int_equal(ct_model_parse(&m, cfg, "huge.cfg"), 0);
    int rc = ct_model_setup(&m, &g_cl, 256, CT_GEMM_NATIVE);
    fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, CT_EINPUT);
    assert_non_null(strstr(ct_last_error(), "huge.cfg"));
    assert_non_null(strstr(ct_last_error(), "--batch"));
    assert_null(strchr(ct_last_error(), '\n'));
    assert_null(m.params); /* refused before any allocation */
    ct_model_free(&m);
}

/* ---------------- end to end ---------------- */

enum { E_B = 6, E_STEPS = 5 };

/* One training step on the host with the references; returns the loss sum. */
static double host_step(const ct_model *m, float *P, float *M1, float *M2, const float *x, const int32_t *lab,
                        const ct_optim_hparams *o, int t) {
    const ct_layer *c = &m->layers[0], *p = &m->layers[1], *d = &m->layers[2];
    ref_conv_shape s = {E_B, c->ih, c->iw, c->ic, c->oc, c->k, c->k, c->stride, c->pad, c->oh, c->ow};
    size_t n1 = (size_t)E_B * c->oh * c->ow * c->oc, n2 = (size_t)E_B * p->oh * p->ow * p->oc, K = (size_t)p->oh * p->ow * p->oc;
    int C = d->oc;
    float *y1 = malloc(n1 * 4), *y2 = malloc(n2 * 4), *z = malloc((size_t)E_B * C * 4), *dz = malloc((size_t)E_B * C * 4);
    float *dy2 = malloc(n2 * 4), *dy1 = malloc(n1 * 4), *G = calloc(m->n_params, 4), ones[E_B];
    for (int i = 0; i < E_B; i++) ones[i] = 1;
    ref_conv_forward(&s, y1, x, P + c->w_off, P + c->b_off, c->act);
    ref_maxpool_forward(y2, y1, E_B, p->ih, p->iw, p->ic, p->k, p->stride, p->oh, p->ow);
    ref_gemm(0, 0, E_B, C, (int)K, 1.0f, y2, (int)K, P + d->w_off, C, 0.0f, z, C, P + d->b_off, d->act);
    double loss = ref_softmax_xent(dz, z, lab, E_B, C, NULL);
    ref_gemm(1, 0, (int)K, C, E_B, 1.0f, y2, (int)K, dz, C, 0.0f, G + d->w_off, C, NULL, 0);
    ref_gemm(1, 0, 1, C, E_B, 1.0f, ones, 1, dz, C, 0.0f, G + d->b_off, C, NULL, 0);
    ref_gemm(0, 1, E_B, (int)K, C, 1.0f, dz, C, P + d->w_off, C, 0.0f, dy2, (int)K, NULL, 0);
    ref_maxpool_backward(dy1, dy2, y1, E_B, p->ih, p->iw, p->ic, p->k, p->stride, p->oh, p->ow);
    ref_conv_backward(&s, NULL, G + c->w_off, G + c->b_off, dy1, y1, x, P + c->w_off, c->act);
    for (int i = 0; i < m->n_layers; i++) {
        const ct_layer *L = &m->layers[i];
        if (!L->n_w) continue;
        ref_adam(P + L->w_off, M1 + L->w_off, M2 + L->w_off, G + L->w_off, (long)L->n_w, o->lr, o->b1, o->b2, o->eps, o->wd, t);
        ref_adam(P + L->b_off, M1 + L->b_off, M2 + L->b_off, G + L->b_off, (long)L->n_b, o->lr, o->b1, o->b2, o->eps, 0.0f, t);
    }
    free(y1); free(y2); free(z); free(dz); free(dy2); free(dy1); free(G);
    return loss;
}

/* records the order of ct_model_backward's per-layer callbacks */
typedef struct { int n, order[CT_MAX_LAYERS]; } layer_log;
static void log_layer(void *ctx, int layer) {
    layer_log *l = ctx;
    if (l->n < CT_MAX_LAYERS) l->order[l->n] = layer;
    l->n++;
}

static void test_end_to_end_adam(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *cfg = "[net]\nheight=8\nwidth=8\nchannels=1\nclasses=3\n"
                      "[conv]\nfilters=4\nsize=3\nactivation=relu\n[maxpool]\nsize=2\n[dense]\noutputs=3\n[softmax]\n";
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "e2e.cfg"), 0);
    int rc = ct_model_setup(&m, &g_cl, E_B, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_model_init_weights(&m, 42);
    size_t np = m.n_params;
    float *P = malloc(np * 4), *M1 = calloc(np, 4), *M2 = calloc(np, 4);
    ct_model_get_params(&m, P);
    ct_rng g = ct_rng_make(1000, 0, 0);
    /* the biases start at zero: give them values too so their updates are checked from step 1 */
    for (int i = 0; i < m.n_layers; i++) ct_fill_rand(P + m.layers[i].b_off, m.layers[i].n_b, &g, 0.1f);
    ct_model_set_params(&m, P);
    uint8_t img[E_B * 64];
    int32_t lab[E_B];
    for (int i = 0; i < E_B * 64; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    for (int b = 0; b < E_B; b++) lab[b] = (int32_t)ct_rng_below(&g, 3);
    const float scale = 1.0f / 255.0f;
    float x[E_B * 64];
    for (int i = 0; i < E_B * 64; i++) x[i] = (float)img[i] * scale;
    ct_optim_hparams o = {.kind = CT_OPT_ADAM, .lr = 1e-2f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .wd = 1e-2f};
    ct_optim_state opt;
    assert_int_equal(ct_optim_setup(&opt, &m, &o), 0);
    double max_loss_rel = 0;
    for (int t = 1; t <= E_STEPS; t++) {
        ct_model_set_batch(&m, img, lab, E_B, scale, 0.0f);
        ct_model_zero_grad(&m);
        ct_model_forward(&m, E_B);
        ct_model_loss(&m, E_B);
        layer_log seen = {0};
        ct_model_backward(&m, E_B, log_layer, &seen);
        /* once per layer, from the last to the first */
        assert_int_equal(seen.n, m.n_layers);
        for (int i = 0; i < m.n_layers; i++) assert_int_equal(seen.order[i], m.n_layers - 1 - i);
        ct_optim_step(&opt, o.lr);
        int32_t pred[E_B];
        double got = ct_model_read_results(&m, E_B, pred);
        double want = host_step(&m, P, M1, M2, x, lab, &o, t);
        double rel = fabs(got - want) / fabs(want);
        if (rel > max_loss_rel) max_loss_rel = rel;
        fprintf(stderr, "# step %d: loss sum device %.9g host %.9g (rel err %.2g)\n", t, got, want, rel);
        assert_true(rel <= 1e-4);
        for (int b = 0; b < E_B; b++) assert_true(pred[b] >= 0 && pred[b] < 3);
    }
    float *got = malloc(np * 4);
    ct_model_get_params(&m, got);
    /* 5 updates of ~lr each: a gradient difference of a few 1e-7 can move an
     * Adam update (g / sqrt(v)) by up to ~1e-5 where the gradient is small */
    assert_true(ct_compare("e2e parameters after 5 Adam steps", got, P, np, 1e-3, 1e-5));
    /* the parameters moved: training did something */
    float *p0 = malloc(np * 4);
    ct_model_init_weights(&m, 42);
    ct_model_get_params(&m, p0);
    double moved = 0;
    for (int i = 0; i < m.n_layers; i++)
        for (size_t j = 0; j < m.layers[i].n_w; j++) moved = fmax(moved, fabs(got[m.layers[i].w_off + j] - p0[m.layers[i].w_off + j]));
    fprintf(stderr, "# max weight change over 5 steps %.3g, max loss rel err %.2g\n", moved, max_loss_rel);
    assert_true(moved > 1e-2);
    free(P); free(M1); free(M2); free(got); free(p0);
    ct_optim_free(&opt);
    ct_model_free(&m);
}

/* A fused Winograd conv with a linear activation, then a 2x2 maxpool (ct_layer.pool_next): in a whole
 * forward (ct_model_forward) the conv pools in its own kernel, writes the pool's output and maxima
 * positions, and leaves its own output unwritten; where it can, its backward reads the pool's gradient
 * and positions itself and the pool writes no dy. Against the same model run layer by layer (each
 * layer's own kernels): the pool's output, its positions, the logits, the loss and every parameter
 * gradient equal to the bit (pooling selects; it computes nothing). Odd sizes: the last tile row
 * and column hold no whole window. */
static void check_conv_pool_fused(const char *cfg, int C0, int dy_pooled) {
    enum { B = 5 };
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "pool.cfg"), 0);
    m.conv_algo = CT_CONV_AUTO; /* F(4x4) for the 16 -> 32 conv on a CPU, as training runs it */
    int rc = ct_model_setup(&m, &g_cl, B, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_model_init_weights(&m, 7);
    const ct_layer *c = &m.layers[C0 == 3], *p = c + 1, *last = &m.layers[m.n_layers - 1];
    assert_true(c->pool_next);
    ct_rng g = ct_rng_make(2024, 0, 0);
    uint8_t img[B * 13 * 11 * 8];
    int32_t lab[B];
    for (size_t i = 0; i < (size_t)B * 13 * 11 * C0; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    for (int b = 0; b < B; b++) lab[b] = (int32_t)ct_rng_below(&g, 3);
    size_t nc = (size_t)B * c->oh * c->ow * c->oc, np = (size_t)B * p->oh * p->ow * p->oc, nl = (size_t)B * 3;
    float *cy = malloc(nc * 4), *y[2], *lg[2], *gr[2], loss[2];
    cl_ushort *arg[2];
    for (int v = 0; v < 2; v++) {
        y[v] = malloc(np * 4); lg[v] = malloc(nl * 4); gr[v] = malloc(m.n_params * 4); arg[v] = malloc(np * 2);
    }
    for (size_t i = 0; i < nc; i++) cy[i] = NAN; /* the conv's output, poisoned */
    int32_t pred[B];
    for (int v = 0; v < 2; v++) { /* 0: layer by layer; 1: the whole forward */
        ct_model_set_batch(&m, img, lab, B, 1.0f / 255.0f, 0.0f);
        ct_model_zero_grad(&m);
        ct_cl_write(m.cl, c->out, 0, nc * 4, cy);
        ct_test_forward(&m, B, v);
        ct_model_loss(&m, B);
        ct_model_backward(&m, B, NULL, NULL);
        loss[v] = (float)ct_model_read_results(&m, B, pred);
        ct_cl_read(m.cl, p->out, 0, np * 4, y[v]);
        ct_cl_read(m.cl, p->own[0], 0, np * 2, arg[v]);
        ct_cl_read(m.cl, last->out, 0, nl * 4, lg[v]);
        ct_cl_read(m.cl, m.grads, 0, m.n_params * 4, gr[v]);
    }
    float first;
    ct_cl_read(m.cl, c->out, 0, 4, &first);
    /* the conv pooled where it runs wino_fused: F(4x4) on a CPU whose loops are not capped */
    int expect = g_cl.is_cpu && ct_conv_tile(c) == 4 && ct_cl_loop_limit(&g_cl) == 0;
    fprintf(stderr, "# conv %s, pooled %d (expected %d), its output %s\n", ct_conv_tile(c) == 4 ? "F(4x4)" : "not F(4x4)",
            c->pooled, expect, isnan(first) ? "unwritten" : "written");
    fprintf(stderr, "# its backward read the pool's gradient: %d (expected %d)\n", c->dy_pooled, expect && dy_pooled);
    assert_int_equal(c->pooled, expect);
    assert_int_equal(c->dy_pooled, expect && dy_pooled);
    assert_int_equal(isnan(first) != 0, c->pooled);
    assert_memory_equal(y[0], y[1], np * 4);
    assert_memory_equal(arg[0], arg[1], np * 2);
    assert_memory_equal(lg[0], lg[1], nl * 4);
    assert_memory_equal(gr[0], gr[1], m.n_params * 4);
    assert_true(loss[0] == loss[1] && loss[0] > 0);
    for (int v = 0; v < 2; v++) { free(y[v]); free(lg[v]); free(gr[v]); free(arg[v]); }
    free(cy);
    ct_model_free(&m);
}

static void test_conv_pool_fused(void **state) {
    (void)state;
    CT_NEED_CL();
    /* 16 -> 32: the weight gradient through wino_dw_fused, which reads dy at full size: the pool writes it */
    check_conv_pool_fused("[net]\nheight=13\nwidth=11\nchannels=3\nclasses=3\n"
                          "[conv]\nfilters=16\nsize=3\npad=1\nactivation=relu\n"
                          "[conv]\nfilters=32\nsize=3\npad=1\n[maxpool]\nsize=2\n"
                          "[batchnorm]\nactivation=gelu\n[dense]\noutputs=3\n[softmax]\n", 3, 0);
    /* 16 -> 80: the data gradient through wino_in_pool and the weight gradient through wino_dy_pool,
     * both from the pool's gradient (ct_layer.dy_pooled); the pool writes no dy */
    check_conv_pool_fused("[net]\nheight=13\nwidth=11\nchannels=3\nclasses=3\n"
                          "[conv]\nfilters=16\nsize=3\npad=1\nactivation=relu\n"
                          "[conv]\nfilters=80\nsize=3\npad=1\n[maxpool]\nsize=2\n"
                          "[batchnorm]\nactivation=gelu\n[dense]\noutputs=3\n[softmax]\n", 3, 1);
    /* 80 -> 32: a forward through wino_in, the GEMMs and wino_out_pool (more inputs than wino_fused holds);
     * the data gradient (32 -> 80) through wino_fused's pool_in */
    check_conv_pool_fused("[net]\nheight=13\nwidth=11\nchannels=3\nclasses=3\n"
                          "[conv]\nfilters=80\nsize=3\npad=1\nactivation=relu\n"
                          "[conv]\nfilters=32\nsize=3\npad=1\n[maxpool]\nsize=2\n"
                          "[batchnorm]\nactivation=gelu\n[dense]\noutputs=3\n[softmax]\n", 3, 1);
    /* the first layer (8 channels in): no data gradient; the weight gradient through wino_dy_pool (48 outputs:
     * more than wino_dw_fused takes) */
    check_conv_pool_fused("[net]\nheight=13\nwidth=11\nchannels=8\nclasses=3\n"
                          "[conv]\nfilters=48\nsize=3\npad=1\n[maxpool]\nsize=2\n"
                          "[dense]\noutputs=3\n[softmax]\n", 8, 1);
}

/* conv, [batchnorm] with an activation, then a fused Winograd conv that alone reads the batch norm's
 * output (ct_layer.norm_next): in a whole forward the batch norm computes its statistics and writes no
 * output, and the conv's forward (wino_fused) and weight gradient (wino_dw_fused, or wino_in's tiles)
 * read the batch norm's input and normalise it as they load, with bn_fwd's operations. Against the same model layer by layer
 * (bn_fwd writes the output, the conv reads it): the logits, the loss and every parameter gradient
 * equal to the bit, training and evaluating (the running statistics). gamma and beta are random, so
 * that a normalised zero is not zero: the padding must stay zero. Odd sizes: tiles cut at the edges.
 * expect 0: the fusion must not happen (GELU, channels not in 16s, a forward not fused, or a second
 * reader of the batch norm's output). */
static void check_bn_norm_fused(int C1, int K2, const char *act, const char *extra, int expect) {
    enum { B = 5 };
    char cfg[768];
    snprintf(cfg, sizeof cfg,
             "[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n[conv]\nfilters=%d\nsize=3\npad=1\n"
             "[batchnorm]\nactivation=%s\n[conv]\nfilters=%d\nsize=3\npad=1\n%s[avgpool]\n[dense]\noutputs=3\n[softmax]\n",
             C1, act, K2, extra);
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "bn-norm.cfg"), 0);
    m.conv_algo = CT_CONV_AUTO; /* F(4x4) on a CPU, as training runs it */
    int rc = ct_model_setup(&m, &g_cl, B, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_model_init_weights(&m, 5);
    ct_layer *bn = &m.layers[1], *c2 = &m.layers[2], *last = &m.layers[m.n_layers - 1];
    /* the fused kernels: F(4x4) on a CPU whose loops are not capped */
    expect = expect && g_cl.is_cpu && ct_conv_tile(c2) == 4 && ct_cl_loop_limit(&g_cl) == 0;
    fprintf(stderr, "# %d -> %d, %s%s: norm_next %d (expected %d)\n", C1, K2, act, extra[0] ? ", a second reader" : "",
            bn->norm_next, expect);
    assert_int_equal(bn->norm_next, expect);
    ct_rng g = ct_rng_make(909, 0, 0);
    ct_bn_slices sl = ct_bn_layout(bn);
    float gb[2][80];
    for (int c = 0; c < C1; c++) gb[0][c] = 0.5f + ct_rng_uniform(&g), gb[1][c] = ct_rng_uniform(&g) - 0.5f;
    ct_cl_write(m.cl, m.params, sl.gamma * 4, (size_t)C1 * 4, gb[0]);
    ct_cl_write(m.cl, m.params, sl.beta * 4, (size_t)C1 * 4, gb[1]);
    uint8_t img[B * 9 * 7 * 3];
    int32_t lab[B];
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    for (int b = 0; b < B; b++) lab[b] = (int32_t)ct_rng_below(&g, 3);
    size_t ny = (size_t)B * ct_out_size(bn), nl = (size_t)B * 3;
    float *poison = malloc(ny * 4), *lg[2], *gr[2], loss[2], first;
    ct_fill_nan(poison, ny);
    for (int v = 0; v < 2; v++) { lg[v] = malloc(nl * 4); gr[v] = malloc(m.n_params * 4); }
    int32_t pred[B];
    for (int train = 1; train >= 0; train--) {
        m.training = train;
        for (int v = 0; v < 2; v++) { /* 0: layer by layer; 1: the whole forward */
            ct_model_set_batch(&m, img, lab, B, 1.0f / 255.0f, 0.0f);
            ct_model_zero_grad(&m);
            ct_cl_write(m.cl, bn->out, 0, ny * 4, poison);
            ct_test_forward(&m, B, v);
            assert_int_equal(bn->normed, v && expect);
            ct_cl_read(m.cl, bn->out, 0, 4, &first);
            assert_int_equal(isnan(first) != 0, v && expect); /* its output: unwritten where the conv normalised */
            ct_model_loss(&m, B);
            if (train) ct_model_backward(&m, B, NULL, NULL);
            loss[v] = (float)ct_model_read_results(&m, B, pred);
            ct_cl_read(m.cl, last->out, 0, nl * 4, lg[v]);
            ct_cl_read(m.cl, m.grads, 0, m.n_params * 4, gr[v]);
        }
        fprintf(stderr, "#   %s: loss %.9g and %.9g\n", train ? "training" : "evaluating", (double)loss[0], (double)loss[1]);
        assert_memory_equal(lg[0], lg[1], nl * 4);
        if (train) assert_memory_equal(gr[0], gr[1], m.n_params * 4);
        assert_true(loss[0] == loss[1] && loss[0] > 0);
    }
    for (int v = 0; v < 2; v++) { free(lg[v]); free(gr[v]); }
    free(poison);
    ct_model_free(&m);
}

static void test_bn_norm_fused(void **state) {
    (void)state;
    CT_NEED_CL();
    check_bn_norm_fused(16, 16, "relu", "", 1);   /* resnet20's 16-channel blocks */
    check_bn_norm_fused(32, 32, "relu", "", 1);   /* and its 32-channel ones */
    check_bn_norm_fused(16, 32, "linear", "", 1); /* no activation */
    check_bn_norm_fused(32, 48, "relu", "", 1);   /* the weight gradient through wino_in (more than wino_dw_fused takes) */
    check_bn_norm_fused(64, 64, "relu", "", 1);   /* resnet20's 64-channel blocks: the same */
    check_bn_norm_fused(80, 16, "relu", "", 0);   /* a forward wino_fused does not take (80 inputs) */
    check_bn_norm_fused(8, 16, "relu", "", 0);    /* channels not in 16s */
    check_bn_norm_fused(16, 16, "gelu", "", 0);   /* GELU: training keeps its derivative */
    check_bn_norm_fused(16, 16, "relu", "[shortcut]\nfrom=-2\n", 0); /* the shortcut reads it too */
}

/* A GELU layer below grad_from (no backward: its parameters frozen, as cifar-fast's whitening layer
 * once its bias stops training) applies GELU in its own kernels (ct_fused_act) instead of writing the
 * pre-activation for act_fwd: the same outputs and logits, to the bit, as the split forward it runs
 * while it trains. */
static void test_frozen_gelu_fused(void **state) {
    (void)state;
    CT_NEED_CL();
    const char *cfg = "[net]\nheight=9\nwidth=7\nchannels=3\nclasses=3\n"
                      "[conv]\nfilters=24\nsize=2\nlr=0\nbias_epochs=1\nactivation=gelu\n"
                      "[conv]\nfilters=16\nsize=3\npad=1\n[dense]\noutputs=3\n[softmax]\n";
    enum { B = 4 };
    ct_model m;
    assert_int_equal(ct_model_parse(&m, cfg, "gelu.cfg"), 0);
    int rc = ct_model_setup(&m, &g_cl, B, CT_GEMM_NATIVE);
    if (rc) fprintf(stderr, "# %s\n", ct_last_error());
    assert_int_equal(rc, 0);
    ct_model_init_weights(&m, 3);
    const ct_layer *L0 = &m.layers[0], *last = &m.layers[m.n_layers - 1];
    assert_non_null(L0->act_in);
    ct_rng g = ct_rng_make(77, 0, 0);
    uint8_t img[B * 9 * 7 * 3];
    int32_t lab[B] = {0, 1, 2, 1};
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)ct_rng_below(&g, 256);
    size_t n0 = (size_t)B * ct_out_size(L0), nl = (size_t)B * 3;
    float *y[2], *lg[2];
    for (int epoch = 0; epoch < 2; epoch++) { /* 0: the bias trains (split); 1: frozen (fused) */
        ct_model_groups_epoch(&m, epoch);
        assert_int_equal(m.grad_from, epoch ? 1 : 0);
        assert_int_equal(ct_fused_act(&m, L0), epoch ? CT_ACT_GELU : CT_ACT_LINEAR);
        y[epoch] = malloc(n0 * 4);
        lg[epoch] = malloc(nl * 4);
        ct_model_set_batch(&m, img, lab, B, 1.0f / 255.0f, 0.0f);
        ct_model_forward(&m, B);
        ct_cl_read(m.cl, L0->out, 0, n0 * 4, y[epoch]);
        ct_cl_read(m.cl, last->out, 0, nl * 4, lg[epoch]);
    }
    assert_memory_equal(y[0], y[1], n0 * 4);
    assert_memory_equal(lg[0], lg[1], nl * 4);
    for (int e = 0; e < 2; e++) { free(y[e]); free(lg[e]); }
    ct_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_mnist_cnn),
        cmocka_unit_test(test_builtin_mlp),
        cmocka_unit_test(test_check_input),
        cmocka_unit_test(test_parse_formats),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_bad_cfgs),
        cmocka_unit_test(test_net_normalisation),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_layer_table),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_load_shaped_rewrites),
        cmocka_unit_test(test_huge_batch_refused),
        cmocka_unit_test(test_end_to_end_adam),
        cmocka_unit_test(test_conv_pool_fused),
        cmocka_unit_test(test_bn_norm_fused),
        cmocka_unit_test(test_frozen_gelu_fused),
    };
    return cmocka_run_group_tests(tests, ct_test_open, ct_test_close);
}
