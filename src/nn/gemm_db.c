/* nn/gemm_db.c: the GEMM tuning database: the per-shape choices (GEMM path
 * and parameters, conv algorithm) in memory, and the file that keeps them.
 * The database is a text file in the cache directory, one per device,
 * keyed like the program cache: device and platform names, driver, device
 * and platform versions, and the hash of the GEMM kernel sources. A file
 * that is damaged or from another device, driver or kernel source is
 * ignored with one line saying why; the shipped defaults are used then.
 * `cltrain tune` (tune.c) fills it; gemm.c reads it at ct_gemm_init.
 * Tested by tests/tune.sh (database errors) and tests/test_gemm.c. */
#include "cltrain/gemm.h"
#include "cltrain/file.h"
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

ct_gemm_choice *ct_gemm_find(ct_gemm *g, int transA, int transB, int M, int N, int K) {
    for (int i = 0; i < g->n_choices; i++) {
        ct_gemm_choice *c = &g->choices[i];
        if (c->transA == transA && c->transB == transB && c->M == M && c->N == N && c->K == K) return c;
    }
    return NULL;
}

int ct_conv_same_shape(const ct_conv_choice *a, const ct_conv_choice *b) {
    return a->B == b->B && a->ih == b->ih && a->iw == b->iw && a->ic == b->ic && a->oc == b->oc && a->pad == b->pad;
}

const ct_conv_choice *ct_conv_find(const ct_gemm *g, const ct_conv_choice *key) {
    for (int i = 0; i < g->n_convs; i++)
        if (ct_conv_same_shape(&g->convs[i], key)) return &g->convs[i];
    return NULL;
}

int ct_conv_choose(ct_gemm *g, const ct_conv_choice *c) {
    if (c->tile < 0 || c->tile > 4 || c->tile == 3)
        return ct_fail(CT_EINPUT, "conv choice: tile %d; use 0 (im2col), 1 (direct), 2 or 4 (Winograd F(2x2) or F(4x4))",
                       c->tile);
    ct_conv_choice *old = (ct_conv_choice *)ct_conv_find(g, c);
    if (!old && g->n_convs == CT_CONV_MAX_CHOICES)
        return ct_fail(CT_EINPUT, "conv choices: more than %d shapes", CT_CONV_MAX_CHOICES);
    *(old ? old : &g->convs[g->n_convs++]) = *c;
    return 0;
}

int ct_gemm_choose(ct_gemm *g, int transA, int transB, int M, int N, int K, int path, const ct_gemm_cfg *cfg) {
    int prog = -1;
    if (path == CT_GEMM_NATIVE && (prog = ct_gemm_prog_get(g, cfg)) < 0) return CT_EDEVICE;
    ct_gemm_choice *c = ct_gemm_find(g, transA, transB, M, N, K);
    if (!c) {
        if (g->n_choices >= CT_GEMM_MAX_SHAPES) return ct_fail(CT_EINPUT, "more than %d tuned GEMM shapes", CT_GEMM_MAX_SHAPES);
        c = &g->choices[g->n_choices++];
    }
    *c = (ct_gemm_choice){transA, transB, M, N, K, path, path == CT_GEMM_NATIVE ? *cfg : g->def, prog};
    return 0;
}

static const char DB_MAGIC[] = "cltrain gemm tuning database 1";

/* the choices depend on these kernels: GEMM, and im2col and Winograd for the conv lines */
static const char *const DB_SOURCES[] = {"prelude.cl", "gemm.cl", "gemm_local.cl", "gemm_img.cl", "conv.cl", "winograd.cl",
                                         "conv_direct.cl"};

static const char *const TILE_NAMES[] = {"im2col", "direct", "wino2", NULL, "wino4"};

static const char *trans_str(int tA, int tB) { return tA ? (tB ? "TT" : "TN") : (tB ? "NT" : "NN"); }

void ct_gemm_db_default_path(const ct_gemm *g, char *out, size_t n) {
    ct_cl_tune_db_path(g->cl->platform_name, g->cl->device_name, g->cl->dev_class, out, n);
}

static uint64_t sources_hash(void) { return ct_cl_source_hash(DB_SOURCES, (int)(sizeof DB_SOURCES / sizeof *DB_SOURCES)); }

int ct_gemm_db_save(const ct_gemm *g, const char *path) {
    char dir[4200], tmp[4300];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) { *slash = 0; ct_mkdir_p(dir); }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (ct_file_check_target(path, "tuning database")) return CT_EINPUT; /* never rename over a FIFO or device */
    FILE *f = fopen(tmp, "w");
    if (!f) return ct_fail(CT_EIO, "%s: cannot write the tuning database; check CLTRAIN_CACHE_DIR", tmp);
    const ct_cl *cl = g->cl;
    fprintf(f, "%s\ndevice %s\nplatform %s\ndriver %s\ndevice-version %s\nplatform-version %s\nkernels %016llx\n", DB_MAGIC,
            cl->device_name, cl->platform_name, cl->driver_version, cl->device_version, cl->platform_version,
            (unsigned long long)sources_hash());
    /* the device's measured speed: the default device among several CPUs is the fastest (src/cl/cl.c) */
    if (g->speed_gflops > 0) fprintf(f, "speed %.2f\n", g->speed_gflops);
    fprintf(f, "# shape OP M N K native reg TM NV KCHUNK | native local TSM TSN TSK WPTM WPTN VW KCHUNK | native img TM TN KCHUNK | clblast\n");
    for (int i = 0; i < g->n_choices; i++) {
        const ct_gemm_choice *c = &g->choices[i];
        fprintf(f, "shape %s %d %d %d ", trans_str(c->transA, c->transB), c->M, c->N, c->K);
        if (c->path == CT_GEMM_CLBLAST) fprintf(f, "clblast\n");
        else if (c->cfg.variant == CT_GEMM_REG) fprintf(f, "native reg %d %d %d\n", c->cfg.p[0], c->cfg.p[1], c->cfg.kchunk);
        else if (c->cfg.variant == CT_GEMM_IMG) fprintf(f, "native img %d %d %d\n", c->cfg.p[0], c->cfg.p[1], c->cfg.kchunk);
        else fprintf(f, "native local %d %d %d %d %d %d %d\n", c->cfg.p[0], c->cfg.p[1], c->cfg.p[2], c->cfg.p[3], c->cfg.p[4],
                     c->cfg.p[5], c->cfg.kchunk);
    }
    fprintf(f, "# conv B IH IW IC OC PAD im2col|direct|wino2|wino4 (3x3 stride 1, under --conv auto)\n");
    for (int i = 0; i < g->n_convs; i++) {
        const ct_conv_choice *c = &g->convs[i];
        fprintf(f, "conv %d %d %d %d %d %d %s\n", c->B, c->ih, c->iw, c->ic, c->oc, c->pad, TILE_NAMES[c->tile]);
    }
    fprintf(f, "end %d\n", g->n_choices + g->n_convs);
    int ok = !ferror(f);
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        unlink(tmp);
        return ct_fail(CT_EIO, "%s: cannot write the tuning database", path);
    }
    return 0;
}

/* a header line "KEY VALUE" against this device's VALUE */
static int header_line(const char *path, const char *line, const char *key, const char *want, const char *what) {
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) || line[kl] != ' ')
        return ct_fail(CT_EINPUT, "tuning database %s ignored: damaged (expected the '%s' line); using the shipped defaults", path, key);
    if (strcmp(line + kl + 1, want))
        return ct_fail(CT_EINPUT, "tuning database %s ignored: written for %s '%s', this is '%s'; using the shipped defaults (run `cltrain tune` again)",
                       path, what, line + kl + 1, want);
    return 0;
}

/* "shape OP M N K native reg ... | native local ... | native img ... | clblast" into *c; 0 or -1 */
static int parse_shape(const char *line, ct_gemm_choice *c) {
    char op[4], path[16], var[16];
    int v[7], n = 0;
    memset(c, 0, sizeof *c);
    if (sscanf(line, "shape %3s %d %d %d %15s %n", op, &c->M, &c->N, &c->K, path, &n) != 5 || !n) return -1;
    if (strlen(op) != 2 || (op[0] != 'N' && op[0] != 'T') || (op[1] != 'N' && op[1] != 'T')) return -1;
    if (c->M < 1 || c->N < 1 || c->K < 1) return -1;
    c->transA = op[0] == 'T';
    c->transB = op[1] == 'T';
    const char *rest = line + n;
    char tail;
    if (!strcmp(path, "clblast")) { c->path = CT_GEMM_CLBLAST; return *rest ? -1 : 0; }
    if (strcmp(path, "native")) return -1;
    c->path = CT_GEMM_NATIVE;
    if (sscanf(rest, "reg %d %d %d %c", &v[0], &v[1], &v[2], &tail) == 3) {
        c->cfg = (ct_gemm_cfg){CT_GEMM_REG, {v[0], v[1], 0, 0, 0, 0}, v[2]};
    } else if (sscanf(rest, "img %d %d %d %c", &v[0], &v[1], &v[2], &tail) == 3) {
        c->cfg = (ct_gemm_cfg){CT_GEMM_IMG, {v[0], v[1], 0, 0, 0, 0}, v[2]};
    } else if (sscanf(rest, "local %d %d %d %d %d %d %d %c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &tail) == 7) {
        c->cfg = (ct_gemm_cfg){CT_GEMM_LOCAL, {v[0], v[1], v[2], v[3], v[4], v[5]}, v[6]};
    } else {
        return -1;
    }
    (void)var;
    return ct_gemm_cfg_check(&c->cfg) ? -1 : 0;
}

/* "conv B IH IW IC OC PAD im2col|direct|wino2|wino4" into *c; 0 or -1 */
static int parse_conv(const char *line, ct_conv_choice *c) {
    char name[16], tail;
    memset(c, 0, sizeof *c);
    if (sscanf(line, "conv %d %d %d %d %d %d %15s %c", &c->B, &c->ih, &c->iw, &c->ic, &c->oc, &c->pad, name, &tail) != 7) return -1;
    if (c->B < 1 || c->ih < 1 || c->iw < 1 || c->ic < 1 || c->oc < 1 || c->pad < 0) return -1;
    for (c->tile = 0; c->tile < 5; c->tile++)
        if (TILE_NAMES[c->tile] && !strcmp(name, TILE_NAMES[c->tile])) return 0;
    return -1;
}

/* read one line without its newline; 0 at end of file, -1 when too long */
static int read_line(FILE *f, char *buf, size_t n) {
    if (!fgets(buf, (int)n, f)) return 0;
    size_t l = strlen(buf);
    if (l && buf[l - 1] == '\n') buf[--l] = 0;
    else if (!feof(f)) return -1;
    return 1;
}

static int load_lines(ct_gemm *g, const char *path, FILE *f) {
    const ct_cl *cl = g->cl;
    char line[1024], hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)sources_hash());
    const char *keys[][3] = {{"device", cl->device_name, "device"}, {"platform", cl->platform_name, "platform"},
                             {"driver", cl->driver_version, "driver"}, {"device-version", cl->device_version, "device version"},
                             {"platform-version", cl->platform_version, "platform version"},
                             {"kernels", hash, "kernel sources with hash"}};
    if (read_line(f, line, sizeof line) != 1 || strcmp(line, DB_MAGIC))
        return ct_fail(CT_EINPUT, "tuning database %s ignored: damaged (not a cltrain tuning database); using the shipped defaults", path);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        if (read_line(f, line, sizeof line) != 1)
            return ct_fail(CT_EINPUT, "tuning database %s ignored: damaged (header cut short); using the shipped defaults", path);
        int rc = header_line(path, line, keys[k][0], keys[k][1], keys[k][2]);
        if (rc) return rc;
    }
    int lineno = 1 + (int)(sizeof keys / sizeof *keys), r, count;
    char tail;
    while ((r = read_line(f, line, sizeof line)) == 1) {
        lineno++;
        if (line[0] == '#') continue;
        double speed;
        if (sscanf(line, "speed %lf %c", &speed, &tail) == 1 && speed > 0) { g->speed_gflops = speed; continue; }
        if (sscanf(line, "end %d %c", &count, &tail) == 1) {
            if (count != g->n_choices + g->n_convs || read_line(f, line, sizeof line) != 0) break;
            return 0;
        }
        if (!strncmp(line, "conv ", 5)) {
            ct_conv_choice cc;
            if (parse_conv(line, &cc) || ct_conv_choose(g, &cc))
                return ct_fail(CT_EINPUT, "tuning database %s ignored: damaged (line %d: '%.60s'); using the shipped defaults", path, lineno, line);
            continue;
        }
        ct_gemm_choice c;
        if (parse_shape(line, &c))
            return ct_fail(CT_EINPUT, "tuning database %s ignored: damaged (line %d: '%.60s'); using the shipped defaults", path, lineno, line);
        if (ct_gemm_choose(g, c.transA, c.transB, c.M, c.N, c.K, c.path, &c.cfg))
            fprintf(stderr, "cltrain: tuning database %s, line %d: %s; that shape uses the default\n", path, lineno, ct_last_error());
    }
    return ct_fail(CT_EINPUT, "tuning database %s ignored: damaged (%s near line %d); using the shipped defaults", path,
                   r < 0 ? "a line too long" : "cut short or bad end count", lineno);
}

int ct_gemm_db_load(ct_gemm *g, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 1; /* none yet */
    FILE *f;
    /* a FIFO, device or folder there is refused without blocking */
    if (ct_file_open_read(path, "a tuning database file", &f, NULL)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ct_last_error());
        return ct_fail(CT_EINPUT, "tuning database ignored: %s; using the shipped defaults (remove it, or set "
                       "CLTRAIN_CACHE_DIR to another folder)", why);
    }
    g->n_choices = g->n_convs = 0;
    int rc = load_lines(g, path, f);
    fclose(f);
    if (rc) g->n_choices = g->n_convs = 0;
    return rc;
}
