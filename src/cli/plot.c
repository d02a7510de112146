/* cli/plot.c: the figures cltrain draws as PNG: the confusion matrix (eval
 * --confusion-png) and the loss and accuracy curves (--curves-png, from the
 * run's metrics.csv). A small RGB canvas: filled rectangles, lines, and text
 * rendered with stb_truetype from a Debian font (fonts-dejavu-core; a CJK
 * font from fonts-wqy-* for glyphs DejaVu lacks; CLTRAIN_FONT=FILE overrides),
 * written with stb_image_write. Tested by tests/messages.sh (the files are
 * PNGs of the expected size; the figures were checked by eye). */
#include "cli.h"
#include <errno.h>
#include <math.h>
#include <string.h>
#define STBTT_STATIC
#define STB_TRUETYPE_IMPLEMENTATION
#define STBTT_assert(x) CT_ASSERT(x)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_truetype.h>
#pragma GCC diagnostic pop
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBIW_ASSERT(x) CT_ASSERT(x)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

typedef struct rgb { unsigned char r, g, b; } rgb;
typedef struct canvas {
    int w, h;
    unsigned char *px;
    stbtt_fontinfo font[2];
    unsigned char *font_data[2];
    int n_fonts;
} canvas;

static const rgb BLACK = {0, 0, 0}, WHITE = {255, 255, 255}, GREY = {120, 120, 120}, LIGHT = {225, 225, 225};

/* the first font found of CLTRAIN_FONT, DejaVu Sans, then one with CJK glyphs as the fallback */
static int load_fonts(canvas *c) {
    const char *env = getenv("CLTRAIN_FONT");
    const char *paths[] = {env && *env ? env : NULL, "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                           "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths && c->n_fonts < 2; i++) {
        if (!paths[i]) continue;
        size_t n = 0;
        unsigned char *data = NULL;
        FILE *f = fopen(paths[i], "rb");
        if (!f) continue;
        if (!fseek(f, 0, SEEK_END)) {
            long len = ftell(f);
            if (len > 0 && len < (64L << 20) && !fseek(f, 0, SEEK_SET)) {
                data = ct_xmalloc((size_t)len);
                n = fread(data, 1, (size_t)len, f);
                if (n != (size_t)len) { free(data); data = NULL; }
            }
        }
        fclose(f);
        int off = data ? stbtt_GetFontOffsetForIndex(data, 0) : -1;
        if (off < 0 || !stbtt_InitFont(&c->font[c->n_fonts], data, off)) { free(data); continue; }
        c->font_data[c->n_fonts++] = data;
    }
    if (!c->n_fonts)
        return ct_fail(CT_EINPUT, "no font to label the figure: install fonts-dejavu-core (or set CLTRAIN_FONT=FILE.ttf)");
    return 0;
}

static int canvas_open(canvas *c, int w, int h) {
    memset(c, 0, sizeof *c);
    c->w = w;
    c->h = h;
    c->px = ct_xmalloc((size_t)w * h * 3);
    memset(c->px, 255, (size_t)w * h * 3);
    return load_fonts(c);
}

static void canvas_close(canvas *c) {
    free(c->px);
    for (int i = 0; i < c->n_fonts; i++) free(c->font_data[i]);
    memset(c, 0, sizeof *c);
}

static int canvas_write(canvas *c, const char *path) {
    errno = 0;
    int ok = stbi_write_png(path, c->w, c->h, 3, c->px, c->w * 3);
    return ok ? 0 : ct_fail(CT_EIO, "%s: cannot write the PNG (%s)", path, errno ? strerror(errno) : "write failed");
}

/* colour at (x, y) blended with alpha a in 0..255 */
static void blend(canvas *c, int x, int y, rgb col, int a) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h || a <= 0) return;
    unsigned char *p = c->px + ((size_t)y * c->w + x) * 3;
    p[0] = (unsigned char)((p[0] * (255 - a) + col.r * a) / 255);
    p[1] = (unsigned char)((p[1] * (255 - a) + col.g * a) / 255);
    p[2] = (unsigned char)((p[2] * (255 - a) + col.b * a) / 255);
}

static void fill(canvas *c, int x0, int y0, int w, int h, rgb col) {
    for (int y = y0; y < y0 + h; y++)
        for (int x = x0; x < x0 + w; x++) blend(c, x, y, col, 255);
}

/* a line of width about t pixels (Bresenham, stamped as t x t squares) */
static void line(canvas *c, int x0, int y0, int x1, int y1, rgb col, int t) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        fill(c, x0 - t / 2, y0 - t / 2, t, t, col);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}

/* the next UTF-8 code point of *s (advancing it); a bad byte reads as '?' */
static int utf8_next(const char **s) {
    const unsigned char *p = (const unsigned char *)*s;
    int cp = *p, n = cp < 0x80 ? 0 : cp >> 5 == 6 ? 1 : cp >> 4 == 14 ? 2 : cp >> 3 == 30 ? 3 : -1;
    if (n < 0) { (*s)++; return '?'; }
    cp = n ? cp & (0x3f >> n) : cp;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80) { *s += i; return '?'; }
        cp = cp << 6 | (p[i] & 0x3f);
    }
    *s += n + 1;
    return cp;
}

/* the font that has code point cp (the first one otherwise) */
static const stbtt_fontinfo *font_for(const canvas *c, int cp) {
    for (int i = 0; i < c->n_fonts; i++)
        if (stbtt_FindGlyphIndex(&c->font[i], cp)) return &c->font[i];
    return &c->font[0];
}

/* width in pixels of s at pixel height size */
static int text_width(const canvas *c, const char *s, float size) {
    float w = 0;
    while (*s) {
        int cp = utf8_next(&s), adv, lsb;
        const stbtt_fontinfo *f = font_for(c, cp);
        stbtt_GetCodepointHMetrics(f, cp, &adv, &lsb);
        w += adv * stbtt_ScaleForPixelHeight(f, size);
    }
    return (int)ceilf(w);
}

/* s at pixel height size with its top-left corner at (x, y); rot: 1 turns it a
 * quarter counter-clockwise (reading upwards, (x, y) then its bottom-left) */
static void text(canvas *c, int x, int y, const char *s, float size, rgb col, int rot) {
    float pen = 0;
    while (*s) {
        int cp = utf8_next(&s), adv, lsb, asc, desc, gap, x0, y0, x1, y1;
        const stbtt_fontinfo *f = font_for(c, cp);
        float sc = stbtt_ScaleForPixelHeight(f, size);
        stbtt_GetFontVMetrics(f, &asc, &desc, &gap);
        stbtt_GetCodepointHMetrics(f, cp, &adv, &lsb);
        stbtt_GetCodepointBitmapBox(f, cp, sc, sc, &x0, &y0, &x1, &y1);
        int gw = x1 - x0, gh = y1 - y0;
        if (gw > 0 && gh > 0 && gw < 512 && gh < 512) {
            unsigned char *bm = ct_xcalloc((size_t)gw * gh, 1);
            stbtt_MakeCodepointBitmap(f, bm, gw, gh, gw, sc, sc, cp);
            int bx = (int)lroundf(pen) + x0, by = (int)lroundf(asc * sc) + y0;
            for (int j = 0; j < gh; j++)
                for (int i = 0; i < gw; i++) {
                    int a = bm[j * gw + i];
                    if (rot) blend(c, x + by + j, y - bx - i, col, a);
                    else blend(c, x + bx + i, y + by + j, col, a);
                }
            free(bm);
        }
        pen += adv * sc;
    }
}

/* s centred on cx (rot 0) */
static void text_centred(canvas *c, int cx, int y, const char *s, float size, rgb col) {
    text(c, cx - text_width(c, s, size) / 2, y, s, size, col, 0);
}

/* white through light blue to dark blue (a sequential map a reader knows from print) */
static rgb blues(double t) {
    static const rgb stops[] = {{247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double u = t * 4;
    int k = u >= 4 ? 3 : (int)u;
    double f = u - k;
    return (rgb){(unsigned char)(stops[k].r + f * (stops[k + 1].r - stops[k].r)),
                 (unsigned char)(stops[k].g + f * (stops[k + 1].g - stops[k].g)),
                 (unsigned char)(stops[k].b + f * (stops[k + 1].b - stops[k].b))};
}

int cli_plot_confusion(const int *conf, int C, char **names, const char *title, const char *path) {
    int cell = C <= 4 ? 80 : 640 / C < 14 ? 14 : 640 / C > 64 ? 64 : 640 / C;
    float fs = 15, cs = cell >= 56 ? 14 : cell >= 40 ? 12 : 10;
    char label[64];
    canvas cv;
    memset(&cv, 0, sizeof cv);
    /* class labels: the names (cut to 24 characters) or the indices */
    int lw = 0;
    canvas probe;
    int rc = canvas_open(&probe, 1, 1);
    if (rc) { canvas_close(&probe); return rc; }
    float ls = cell < 16 ? 9 : cell < 24 ? 11 : fs - 2;
    for (int k = 0; k < C; k++) {
        snprintf(label, sizeof label, "%.24s", names ? names[k] : "");
        if (!names) snprintf(label, sizeof label, "%d", k);
        int w = text_width(&probe, label, ls);
        lw = w > lw ? w : lw;
    }
    canvas_close(&probe);
    int left = 40 + lw + 8, top = 56, grid = C * cell, legend = 90, W = left + grid + 24 + legend, H = top + grid + lw + 46;
    if (W < 420) W = 420;
    if ((rc = canvas_open(&cv, W, H))) { canvas_close(&cv); return rc; }
    text_centred(&cv, W / 2, 12, title, 17, BLACK);
    /* the cells: colour by the share of the true class, counts (and shares) where they fit */
    for (int t = 0; t < C; t++) {
        long tot = 0;
        for (int p = 0; p < C; p++) tot += conf[t * C + p];
        for (int p = 0; p < C; p++) {
            int n = conf[t * C + p];
            double share = tot ? (double)n / tot : 0;
            int x = left + p * cell, y = top + t * cell;
            fill(&cv, x, y, cell, cell, blues(share));
            if (cell >= 28 && n) {
                rgb ink = share > 0.5 ? WHITE : BLACK;
                char num[32];
                snprintf(num, sizeof num, "%d", n);
                int two = cell >= 44;
                text_centred(&cv, x + cell / 2, y + cell / 2 - (two ? (int)cs : (int)(cs / 2)) - 1, num, cs, ink);
                if (two) {
                    if (share < 0.005) snprintf(num, sizeof num, "<1%%");
                    else snprintf(num, sizeof num, "%.0f%%", 100 * share);
                    text_centred(&cv, x + cell / 2, y + cell / 2 + 1, num, cs - 2, ink);
                }
            }
        }
    }
    for (int k = 0; k <= C; k++) { /* the grid */
        line(&cv, left, top + k * cell, left + grid, top + k * cell, LIGHT, 1);
        line(&cv, left + k * cell, top, left + k * cell, top + grid, LIGHT, 1);
    }
    line(&cv, left, top, left, top + grid, GREY, 1);
    line(&cv, left, top + grid, left + grid, top + grid, GREY, 1);
    for (int k = 0; k < C; k++) { /* rows: true class; columns: predicted class, read upwards */
        snprintf(label, sizeof label, "%.24s", names ? names[k] : "");
        if (!names) snprintf(label, sizeof label, "%d", k);
        int w = text_width(&cv, label, ls);
        text(&cv, left - 6 - w, top + k * cell + (cell - (int)ls) / 2, label, ls, BLACK, 0);
        text(&cv, left + k * cell + (cell - (int)ls) / 2, top + grid + 6 + w, label, ls, BLACK, 1);
    }
    const char *ylab = "true class", *xlab = "predicted class";
    text(&cv, 10, top + grid / 2 + text_width(&cv, ylab, fs) / 2, ylab, fs, BLACK, 1);
    text_centred(&cv, left + grid / 2, H - 26, xlab, fs, BLACK);
    /* the legend: the colour bar from 0% to 100% of the true class */
    int lx = left + grid + 24, lh = grid < 160 ? grid : 160 + (grid - 160) / 2, ly = top;
    for (int y = 0; y < lh; y++) fill(&cv, lx, ly + y, 18, 1, blues(1.0 - (double)y / (lh - 1)));
    line(&cv, lx, ly, lx + 18, ly, GREY, 1);
    line(&cv, lx, ly + lh, lx + 18, ly + lh, GREY, 1);
    for (int k = 0; k <= 4; k++) {
        int y = ly + (int)lround((lh - 1) * (1.0 - k / 4.0));
        line(&cv, lx + 18, y, lx + 22, y, GREY, 1);
        snprintf(label, sizeof label, "%d%%", 25 * k);
        text(&cv, lx + 25, y - 6, label, 12, BLACK, 0);
    }
    text(&cv, lx, ly + lh + 8, "share of", 11, GREY, 0);
    text(&cv, lx, ly + lh + 21, "the true", 11, GREY, 0);
    text(&cv, lx, ly + lh + 34, "class", 11, GREY, 0);
    rc = canvas_write(&cv, path);
    canvas_close(&cv);
    return rc;
}

/* --- curves --- */

typedef struct series { long *step; double *v; int n, cap; } series;
static void series_add(series *s, long step, double v) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->step = realloc(s->step, sizeof *s->step * (size_t)s->cap);
        s->v = realloc(s->v, sizeof *s->v * (size_t)s->cap);
        if (!s->step || !s->v) { fprintf(stderr, "cltrain: out of memory reading the training log\n"); abort(); }
    }
    s->step[s->n] = step;
    s->v[s->n++] = v;
}

/* a round tick step for a range of span over about 5 ticks */
static double nice_step(double span) {
    double raw = span / 5, mag = pow(10, floor(log10(raw > 0 ? raw : 1))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

/* one panel at (x, y) of w x h: axes, ticks, the series (a line, markers on the second) */
static void panel(canvas *c, int x, int y, int w, int h, const char *title, const char *ylabel, const series *s,
                  const rgb *cols, int n_series, long max_step, double scale) {
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++) {
            double v = s[k].v[i] * scale;
            if (isfinite(v)) { lo = v < lo ? v : lo; hi = v > hi ? v : hi; }
        }
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
    double ys = nice_step(hi - lo);
    lo = floor(lo / ys) * ys;
    hi = ceil(hi / ys) * ys;
    double xs = nice_step((double)(max_step > 0 ? max_step : 1));
    max_step = (long)(ceil((double)max_step / xs) * xs); /* the axis ends on a tick */
    int px = x + 56, pw = w - 56 - 16, py = y + 28, ph = h - 28 - 40;
    text_centred(c, x + w / 2, y + 2, title, 15, BLACK);
    char lab[32];
    for (double v = lo; v <= hi + ys / 2; v += ys) {
        int yy = py + ph - (int)lround((v - lo) / (hi - lo) * ph);
        line(c, px, yy, px + pw, yy, LIGHT, 1);
        snprintf(lab, sizeof lab, "%g", fabs(v) < ys / 1e6 ? 0.0 : v);
        text(c, px - 6 - text_width(c, lab, 12), yy - 7, lab, 12, BLACK, 0);
    }
    for (double v = 0; v <= max_step + xs / 2; v += xs) {
        int xx = px + (int)lround(v / (max_step > 0 ? max_step : 1) * pw);
        if (xx > px + pw) break;
        line(c, xx, py + ph, xx, py + ph + 4, GREY, 1);
        snprintf(lab, sizeof lab, "%.0f", v);
        text_centred(c, xx, py + ph + 7, lab, 12, BLACK);
    }
    line(c, px, py, px, py + ph, GREY, 1);
    line(c, px, py + ph, px + pw, py + ph, GREY, 1);
    text_centred(c, px + pw / 2, py + ph + 22, "step", 13, BLACK);
    text(c, x + 4, py + ph / 2 + text_width(c, ylabel, 13) / 2, ylabel, 13, BLACK, 1);
    for (int k = 0; k < n_series; k++) {
        int prev_x = 0, prev_y = 0;
        for (int i = 0; i < s[k].n; i++) {
            double v = s[k].v[i] * scale;
            if (!isfinite(v)) continue;
            int xx = px + (int)lround((double)s[k].step[i] / (max_step > 0 ? max_step : 1) * pw);
            int yy = py + ph - (int)lround((v - lo) / (hi - lo) * ph);
            if (i) line(c, prev_x, prev_y, xx, yy, cols[k], 2);
            if (k == 1 || s[k].n == 1) fill(c, xx - 3, yy - 3, 7, 7, cols[k]);
            prev_x = xx, prev_y = yy;
        }
    }
}

/* the legend of both panels, one line centred at y */
static void legend(canvas *c, int cx, int y, const char *const *names, const rgb *cols, int n) {
    int total = 0;
    for (int k = 0; k < n; k++) total += 30 + text_width(c, names[k], 13) + 24;
    int x = cx - total / 2;
    for (int k = 0; k < n; k++) {
        line(c, x, y + 8, x + 22, y + 8, cols[k], 2);
        if (k == 1) fill(c, x + 8, y + 5, 7, 7, cols[k]);
        text(c, x + 30, y, names[k], 13, BLACK, 0);
        x += 30 + text_width(c, names[k], 13) + 24;
    }
}

int cli_plot_curves(const char *csv, const char *title, const char *path) {
    FILE *f = fopen(csv, "r");
    if (!f) return ct_fail(CT_EIO, "%s: cannot read the training log for the curves (%s)", csv, strerror(errno));
    series s[4];  /* train/loss, test/loss, train/accuracy, test/accuracy */
    memset(s, 0, sizeof s);
    static const char *const tags[4] = {"train/loss", "test/loss", "train/accuracy", "test/accuracy"};
    char buf[512], tag[128];
    long max_step = 0;
    while (fgets(buf, sizeof buf, f)) {
        long step;
        double v;
        if (sscanf(buf, "%ld,%127[^,],%lf", &step, tag, &v) != 3) continue;
        for (int k = 0; k < 4; k++)
            if (!strcmp(tag, tags[k])) {
                series_add(&s[k], step, v);
                max_step = step > max_step ? step : max_step;
            }
    }
    fclose(f);
    int rc = 0;
    if (!s[0].n && !s[2].n) rc = ct_fail(CT_EINPUT, "%s: no train/loss or train/accuracy lines to draw", csv);
    canvas cv;
    memset(&cv, 0, sizeof cv);
    if (!rc) rc = canvas_open(&cv, 1100, 480);
    if (!rc) {
        static const rgb cols[2] = {{31, 119, 180}, {230, 115, 0}};
        static const char *const names[2] = {"training (mean since the previous point)", "test (evaluation)"};
        text_centred(&cv, cv.w / 2, 10, title, 17, BLACK);
        legend(&cv, cv.w / 2, 38, names, cols, 2);
        panel(&cv, 10, 62, 535, 410, "loss", "cross-entropy", s, cols, 2, max_step, 1);
        panel(&cv, 555, 62, 535, 410, "accuracy", "accuracy (%)", s + 2, cols, 2, max_step, 100);
        rc = canvas_write(&cv, path);
    }
    canvas_close(&cv);
    for (int k = 0; k < 4; k++) { free(s[k].step); free(s[k].v); }
    return rc;
}
