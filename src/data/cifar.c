/* cifar.c: CIFAR-10 / CIFAR-100 binary batches into ct_datasets, the
 * .tar.gz they ship in (fetched, and unpacked by targz.c), and the
 * augmenting ct_source.
 *
 * Every file's size is checked against its record size before anything is
 * allocated, every label against the class count, and every message names
 * the file (and record) and says what to do.
 * Depends on common.h, data.h, augment.h, download.h (ct_download), targz.h,
 * source.h (ct_source, for ct_cifar_source_init only).
 * Tested by tests/test_cifar.c and tests/test_augment.c. */
#include "cltrain/cifar.h"
#include "cltrain/common.h"
#include "cltrain/file.h"
#include "cltrain/download.h"
#include "cltrain/source.h"
#include "cltrain/targz.h"
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CIFAR_BASE_URL "https://www.cs.toronto.edu/~kriz/"

static const char *const cifar10_names[] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
};
static const char *const cifar100_coarse[] = {
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
    "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
    "large_man-made_outdoor_things", "large_natural_outdoor_scenes", "large_omnivores_and_herbivores",
    "medium_mammals", "non-insect_invertebrates", "people", "reptiles", "small_mammals", "trees",
    "vehicles_1", "vehicles_2",
};
static const char *const cifar100_fine[] = {
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle",
    "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle",
    "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur",
    "dolphin", "elephant", "flatfish", "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard",
    "lamp", "lawn_mower", "leopard", "lion", "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain",
    "mouse", "mushroom", "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree",
    "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road", "rocket",
    "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider",
    "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone", "television", "tiger", "tractor",
    "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf", "woman", "worm",
};
_Static_assert(sizeof cifar10_names / sizeof *cifar10_names == 10, "10 CIFAR-10 names");
_Static_assert(sizeof cifar100_coarse / sizeof *cifar100_coarse == 20, "20 coarse names");
_Static_assert(sizeof cifar100_fine / sizeof *cifar100_fine == 100, "100 fine names");

/* What differs between the two sets. Files 0..n_train-1 are the train split, file n_train the test split. */
typedef struct spec {
    const char *name, *subdir, *archive, *md5, *list;
    int label_bytes, n_train;
    const char *files[6];
} spec;

static const spec cifar10_spec = {
    "CIFAR-10", "cifar-10-batches-bin", "cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530",
    "data_batch_1.bin .. data_batch_5.bin and test_batch.bin", 1, 5,
    {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
     "test_batch.bin"},
};
static const spec cifar100_spec = {
    "CIFAR-100", "cifar-100-binary", "cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8",
    "train.bin and test.bin", 2, 1, {"train.bin", "test.bin"},
};

/* ---- small file helpers -------------------------------------------------- */

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}



static char *str_dup(const char *s, size_t n) {
    char *p = ct_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ---- class names --------------------------------------------------------- */

static char **names_copy(char *const *names, int n) {
    char **out = ct_xcalloc((size_t)n, sizeof *out);
    for (int i = 0; i < n; i++) out[i] = str_dup(names[i], strlen(names[i]));
    return out;
}

static void names_free(char **names, int n) {
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* n names from path, one per line (blank lines and trailing spaces ignored),
 * or the standard ones when path does not exist. */
static int names_load(char ***out, const char *path, int n, const char *const *standard) {
    *out = NULL;
    if (!is_file(path)) {
        *out = names_copy((char *const *)standard, n);
        return 0;
    }
    FILE *f;
    int orc = ct_file_open_read(path, "a text file of class names, one a line (or no file)", &f, NULL);
    if (orc) return orc;
    enum { CAP = 1 << 16 };
    char *text = ct_xmalloc(CAP + 1);
    size_t len = fread(text, 1, CAP + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err || len > CAP) {
        free(text);
        return ct_fail(CT_EINPUT, "%s: %s; it should hold %d class names, one per line; fix or delete it",
                       path, err ? "cannot read it" : "longer than 64 KiB", n);
    }
    text[len] = '\0';
    char **names = ct_xcalloc((size_t)n, sizeof *names);
    int count = 0;
    for (char *line = text; line < text + len;) {
        char *end = memchr(line, '\n', (size_t)(text + len - line));
        if (!end) end = text + len;
        char *stop = end;
        while (stop > line && (stop[-1] == '\r' || stop[-1] == ' ' || stop[-1] == '\t')) stop--;
        if (stop > line) {
            if (memchr(line, '\0', (size_t)(stop - line))) { count = -1; break; }
            if (count < n) names[count] = str_dup(line, (size_t)(stop - line));
            count++;
        }
        line = end + 1;
    }
    free(text);
    if (count != n) {
        names_free(names, n);
        if (count < 0)
            return ct_fail(CT_EINPUT, "%s: holds NUL bytes, not a text file of class names; "
                           "fix or delete it (the standard class names are used without it)", path);
        return ct_fail(CT_EINPUT, "%s: %d class names, expected %d (one per line); "
                       "fix or delete it (the standard class names are used without it)", path, count, n);
    }
    *out = names;
    return 0;
}

/* ---- batches ------------------------------------------------------------- */

/* Records in path, from its size. */
static int count_records(const char *path, const spec *sp, long long *count) {
    struct stat st;
    int rec = sp->label_bytes + CT_CIFAR_PIXELS, other = 3 - sp->label_bytes + CT_CIFAR_PIXELS;
    if (stat(path, &st) != 0)
        return ct_fail(CT_EINPUT, "%s: cannot read (%s); check the path or pass --data DIR", path, strerror(errno));
    long long size = (long long)st.st_size;
    if (size == 0)
        return ct_fail(CT_EINPUT, "%s: empty; a %s batch holds %d-byte records; download the data set again",
                       path, sp->name, rec);
    if (size % rec != 0) {
        const char *hint = "";
        if (size % other == 0)
            hint = sp->label_bytes == 1 ? " (its size fits CIFAR-100's 3074-byte records: wrong data set?)"
                                        : " (its size fits CIFAR-10's 3073-byte records: wrong data set?)";
        return ct_fail(CT_EINPUT, "%s: %lld bytes is not a whole number of %d-byte records%s; "
                       "the file is truncated or damaged; download the data set again", path, size, rec, hint);
    }
    *count = size / rec;
    return 0;
}

/* A hint for a label out of range: whether the file's size also fits the other set's records. */
static const char *other_fits(long long count, const spec *sp) {
    long long rec = sp->label_bytes + CT_CIFAR_PIXELS, other = 3 - sp->label_bytes + CT_CIFAR_PIXELS;
    if ((count * rec) % other != 0) return "";
    return sp->label_bytes == 1 ? " (its size also fits CIFAR-100's 3074-byte records: a CIFAR-100 file?)"
                                : " (its size also fits CIFAR-10's 3073-byte records: a CIFAR-10 batch?)";
}

/* Read `count` records of path into images (HWC) and labels, checking every label. */
static int read_batch(const char *path, const spec *sp, int fine, long long count, uint8_t *images, uint8_t *labels) {
    const int rec = sp->label_bytes + CT_CIFAR_PIXELS, plane = CT_CIFAR_SIDE * CT_CIFAR_SIDE;
    enum { CHUNK = 256 };
    FILE *f;
    int orc = ct_file_open_read(path, "a CIFAR binary batch file", &f, NULL);
    if (orc) return orc;
    uint8_t *buf = malloc((size_t)rec * CHUNK);
    if (!buf) {
        fclose(f);
        return ct_fail(CT_ENOMEM, "%s: cannot allocate a read buffer", path);
    }
    int rc = 0;
    for (long long done = 0; done < count && rc == 0;) {
        size_t want = (size_t)(count - done < CHUNK ? count - done : CHUNK);
        size_t got = fread(buf, (size_t)rec, want, f);
        if (got < want) {
            if (ferror(f))
                rc = ct_fail(CT_EINPUT, "%s: read error at record %lld (%s)", path, done + (long long)got, strerror(errno));
            else
                rc = ct_fail(CT_EINPUT, "%s: truncated while reading: %lld whole records, expected %lld; "
                             "download the data set again", path, done + (long long)got, count);
            break;
        }
        for (size_t r = 0; r < got; r++) {
            const uint8_t *in = buf + r * (size_t)rec, *px = in + sp->label_bytes;
            long long i = done + (long long)r;
            if (sp->label_bytes == 1) {
                if (in[0] >= 10) {
                    rc = ct_fail(CT_EINPUT, "%s: record %lld has label %u, but CIFAR-10 labels are 0..9; "
                                 "the file is damaged or not a CIFAR-10 batch%s; download it again", path, i, in[0],
                                 other_fits(count, sp));
                    break;
                }
                labels[i] = in[0];
            } else {
                if (in[0] >= 20 || in[1] >= 100) {
                    int coarse = in[0] >= 20;
                    rc = ct_fail(CT_EINPUT, "%s: record %lld has %s label %u, but CIFAR-100 %s labels are 0..%d; "
                                 "the file is damaged or not a CIFAR-100 file%s; download it again", path, i,
                                 coarse ? "coarse" : "fine", in[coarse ? 0 : 1], coarse ? "coarse" : "fine",
                                 coarse ? 19 : 99, other_fits(count, sp));
                    break;
                }
                labels[i] = fine ? in[1] : in[0];
            }
            uint8_t *out = images + (size_t)i * CT_CIFAR_PIXELS;
            for (int p = 0; p < plane; p++) {
                out[3 * p + 0] = px[p];
                out[3 * p + 1] = px[plane + p];
                out[3 * p + 2] = px[2 * plane + p];
            }
        }
        done += (long long)got;
    }
    free(buf);
    fclose(f);
    return rc;
}

/* One split: files[first..first+n-1] of folder into ds. */
static int load_split(ct_dataset *ds, const char *folder, const spec *sp, int fine, int first, int n_files,
                      char **names, int n_classes) {
    char paths[5][4200];
    long long counts[5], total = 0;
    int rc;
    memset(ds, 0, sizeof *ds);
    for (int k = 0; k < n_files; k++) {
        snprintf(paths[k], sizeof paths[k], "%s/%s", folder, sp->files[first + k]);
        if ((rc = count_records(paths[k], sp, &counts[k])) != 0) return rc;
        total += counts[k];
    }
    if (total > INT_MAX || (uint64_t)total * CT_CIFAR_PIXELS > SIZE_MAX)
        return ct_fail(CT_EINPUT, "%s: %lld records are more than this build can hold", folder, total);
    ds->images = malloc((size_t)total * CT_CIFAR_PIXELS);
    ds->labels = malloc((size_t)total);
    if (!ds->images || !ds->labels) {
        ct_dataset_free(ds);
        return ct_fail(CT_ENOMEM, "%s: cannot allocate %lld bytes for %lld %s images", folder,
                       total * CT_CIFAR_PIXELS, total, sp->name);
    }
    long long at = 0;
    for (int k = 0; k < n_files; k++) {
        rc = read_batch(paths[k], sp, fine, counts[k], ds->images + (size_t)at * CT_CIFAR_PIXELS, ds->labels + at);
        if (rc != 0) {
            ct_dataset_free(ds);
            return rc;
        }
        at += counts[k];
    }
    ds->n = (int)total;
    ds->h = ds->w = CT_CIFAR_SIDE;
    ds->c = 3;
    ds->n_classes = n_classes;
    ds->class_names = names_copy(names, n_classes);
    return 0;
}

/* ---- finding the files, fetching the archive --------------------------- */

/* How many of the wanted files folder holds; missing lists the others. */
static int count_present(const char *folder, const spec *sp, const int *want, char *missing, size_t size) {
    int present = 0;
    missing[0] = '\0';
    for (int k = 0; k <= sp->n_train; k++) {
        if (!want[k]) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", folder, sp->files[k]);
        if (is_file(p)) { present++; continue; }
        size_t len = strlen(missing);
        snprintf(missing + len, size - len, "%s%s", len ? ", " : "", sp->files[k]);
    }
    return present;
}

/* folder = dir/subdir or dir, whichever holds every wanted file (1), else the
 * one holding more (dir/subdir on a tie, dir when neither holds any), with its
 * missing files listed (0). */
static int find_folder(char *folder, size_t size, const char *dir, const spec *sp, const int *want, int n_want,
                       char *missing, size_t msize) {
    char sub[4200], miss_sub[256], miss_dir[256];
    snprintf(sub, sizeof sub, "%s/%s", dir, sp->subdir);
    int in_sub = count_present(sub, sp, want, miss_sub, sizeof miss_sub);
    int in_dir = count_present(dir, sp, want, miss_dir, sizeof miss_dir);
    int use_sub = in_sub == n_want || (in_dir != n_want && in_sub >= in_dir && in_sub > 0);
    snprintf(folder, size, "%s", use_sub ? sub : dir);
    snprintf(missing, msize, "%s", use_sub ? miss_sub : miss_dir);
    return (use_sub ? in_sub : in_dir) == n_want;
}

/* Before unpacking or downloading: a folder that holds some of the batch
 * files but not all, or the other CIFAR set's files, is a mistake to report,
 * not a reason to fetch 160 MB. */
static int check_partial(const char *folder, const char *dir, const spec *sp, const int *want, int n_want,
                         const char *missing) {
    char scratch[256];
    int present = count_present(folder, sp, want, scratch, sizeof scratch);
    if (present > 0)
        return ct_fail(CT_EINPUT, "%s: holds only %d of the %d %s files it needs (missing %s); put all of %s "
                       "there (the archive is at " CIFAR_BASE_URL "%s), or pass --data DIR",
                       folder, present, n_want, sp->name, missing, sp->list, sp->archive);
    const spec *other = sp == &cifar10_spec ? &cifar100_spec : &cifar10_spec;
    int all[6] = {1, 1, 1, 1, 1, 1}, n_other = other->n_train + 1;
    char found[4200];
    if (find_folder(found, sizeof found, dir, other, all, n_other, scratch, sizeof scratch))
        return ct_fail(CT_EINPUT, "%s: holds the %s files (%s), not %s; run cltrain %s for that set, or pass "
                       "--data with a folder holding %s", found, other->name, other->list, sp->name,
                       other == &cifar10_spec ? "cifar10" : "cifar100", sp->list);
    return 0;
}

static int unpack(const char *archive, const char *dir, const spec *sp) {
    int n = 0, rc = ct_targz_extract(archive, dir, &n);
    if (rc == 0) return 0;
    char why[700];
    snprintf(why, sizeof why, "%s", ct_last_error());
    return ct_fail(rc, "%s (unpacking the %s archive; delete %s and try again)", why, sp->name, archive);
}

static int fetch(const char *dir, const char *archive, const spec *sp) {
    const char *base = getenv("CLTRAIN_CIFAR_MIRROR");
    if (!base || !base[0]) base = CIFAR_BASE_URL;
    size_t len = strlen(base);
    char url[1024];
    if ((size_t)snprintf(url, sizeof url, "%s%s%s", base, len && base[len - 1] == '/' ? "" : "/", sp->archive)
        >= sizeof url)
        return ct_fail(CT_EINPUT, "CLTRAIN_CIFAR_MIRROR: URL too long: %s", base);
    const char *urls[1] = {url};
    int rc = ct_download(urls, 1, archive, sp->md5);
    if (rc != 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        return ct_fail(rc, "%s: %s is missing and could not be downloaded (%s); put %s or its unpacked folder %s/ "
                       "(%s) in %s, or pass --data DIR", dir, sp->name, why, sp->archive, sp->subdir, sp->list, dir);
    }
    if ((rc = unpack(archive, dir, sp)) != 0) return rc;
    unlink(archive);
    return 0;
}

int ct_cifar_load(ct_dataset *train, ct_dataset *test, const char *dir, int kind, int fine, int download) {
    CT_ASSERT(dir);
    if (train) memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (kind != 10 && kind != 100)
        return ct_fail(CT_EINPUT, "ct_cifar_load: kind %d; use 10 (CIFAR-10) or 100 (CIFAR-100)", kind);
    const spec *sp = kind == 10 ? &cifar10_spec : &cifar100_spec;
    int want[6] = {0}, n_want = 0;
    for (int k = 0; k <= sp->n_train; k++) {
        want[k] = k < sp->n_train ? train != NULL : test != NULL;
        n_want += want[k];
    }
    if (n_want == 0) return 0;

    char folder[4200], missing[256], archive[4200];
    if ((size_t)snprintf(archive, sizeof archive, "%s/%s", dir, sp->archive) >= 4096)
        return ct_fail(CT_EINPUT, "%s: path too long", dir);
    int rc;
    if (!find_folder(folder, sizeof folder, dir, sp, want, n_want, missing, sizeof missing)) {
        if (!is_file(archive) && (rc = check_partial(folder, dir, sp, want, n_want, missing)) != 0) return rc;
        if (is_file(archive)) {
            if ((rc = unpack(archive, dir, sp)) != 0) return rc;
        } else if (download) {
            if ((rc = fetch(dir, archive, sp)) != 0) return rc;
        } else {
            return ct_fail(CT_EINPUT, "%s: missing %s; %s needs %s, in %s/%s/ or in %s itself; put %s or its "
                           "unpacked folder %s/ there, or pass --data DIR; the archive is at " CIFAR_BASE_URL "%s",
                           folder, missing, sp->name, sp->list, dir, sp->subdir, dir, sp->archive, sp->subdir,
                           sp->archive);
        }
        if (!find_folder(folder, sizeof folder, dir, sp, want, n_want, missing, sizeof missing))
            return ct_fail(CT_EINPUT, "%s: missing %s after unpacking %s; it is not the %s binary version; delete it "
                           "and put the one from " CIFAR_BASE_URL "%s, or its unpacked folder %s/, in %s",
                           folder, missing, archive, sp->name, sp->archive, sp->subdir, dir);
    }

    int n_classes = kind == 10 ? 10 : fine ? 100 : 20;
    const char *names_file = kind == 10 ? "batches.meta.txt" : fine ? "fine_label_names.txt" : "coarse_label_names.txt";
    const char *const *standard = kind == 10 ? cifar10_names : fine ? cifar100_fine : cifar100_coarse;
    char names_path[4300];
    snprintf(names_path, sizeof names_path, "%s/%s", folder, names_file);
    char **names;
    if ((rc = names_load(&names, names_path, n_classes, standard)) != 0) return rc;
    if (train && (rc = load_split(train, folder, sp, fine, 0, sp->n_train, names, n_classes)) != 0) goto out;
    if (test && (rc = load_split(test, folder, sp, fine, sp->n_train, 1, names, n_classes)) != 0) {
        if (train) ct_dataset_free(train);
    }
out:
    names_free(names, n_classes);
    return rc;
}

/* ---- the augmenting source ---------------------------------------------- */

int ct_cifar_source_load(void *ctx, int index, float *dst, int32_t *label, ct_rng *rng) {
    const ct_cifar_ctx *cc = ctx;
    const ct_dataset *ds = cc->ds;
    CT_ASSERT(ds && index >= 0 && index < ds->n && dst && label);
    size_t sz = (size_t)ds->h * ds->w * ds->c;
    ct_augment_apply(&cc->aug, ds->images + (size_t)index * sz, ds->h, ds->w, ds->c, dst, rng);
    *label = ds->labels[index];
    return 0;
}

void ct_cifar_source_init(struct ct_source *src, ct_cifar_ctx *ctx) {
    CT_ASSERT(src && ctx && ctx->ds);
    const ct_dataset *ds = ctx->ds;
    ct_source_init(src, ds->n, ds->h, ds->w, ds->c, ds->n_classes, ctx, ct_cifar_source_load);
}
