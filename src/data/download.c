/* download.c: fetch a file from the first mirror that serves it, check its MD5, rename it into place.
 *
 * The body streams into a mkstemp file beside dest while its MD5 is
 * computed; only a complete, verified file is fsynced and renamed onto dest,
 * so an interrupted or corrupt download never looks like a data set.
 * Depends on libcurl, libcrypto (EVP MD5), pthreads (one curl_global_init).
 * Tested by tests/test_idx.c: file:// mirrors (success, fallback, checksum
 * mismatch leaves nothing behind) and an unreachable http mirror. */
#include "cltrain/download.h"
#include "cltrain/common.h"
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }


struct sink {
    int fd;
    EVP_MD_CTX *md; /* NULL when no checksum is wanted */
    int write_errno;
};

/* Returning less than asked makes curl stop with CURLE_WRITE_ERROR. */
static size_t sink_write(char *p, size_t size, size_t nmemb, void *user) {
    struct sink *s = user;
    size_t n = size * nmemb, done = 0;
    while (done < n) {
        ssize_t w = write(s->fd, p + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            s->write_errno = errno;
            return 0;
        }
        done += (size_t)w;
    }
    if (s->md && EVP_DigestUpdate(s->md, p, n) != 1) { s->write_errno = EIO; return 0; }
    return n;
}

/* c's options: url into s, errors into errbuf (CURL_ERROR_SIZE bytes), redirects, time limits, protocols */
static void curl_setup(CURL *c, const char *url, struct sink *s, char *errbuf) {
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    /* No total timeout (slow links are fine); a transfer below 1 byte/s for 60 s is dead. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* callers may be threaded */
    curl_easy_setopt(c, CURLOPT_USERAGENT, "cltrain/" CT_VERSION);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS | CURLPROTO_FILE));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

/* One mirror. Returns 0 (dest installed), CT_ENET (try the next mirror) or
 * CT_EIO (local failure: no mirror will help); *msg gets the reason. */
static int fetch_one(const char *url, const char *dest, const char *dir, const char *md5,
                     char *msg, size_t msg_size) {
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.part-XXXXXX", dest) >= sizeof tmp) {
        snprintf(msg, msg_size, "%s: path too long", dest);
        return CT_EIO;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(msg, msg_size, "%.600s: cannot create a temporary file there (%s)", dir, strerror(errno));
        return CT_EIO;
    }
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a data set is not a secret */
    struct sink s = {fd, NULL, 0};
    int rc = CT_ENET;
    CURL *c = NULL;
    if (md5) {
        s.md = EVP_MD_CTX_new();
        if (!s.md || EVP_DigestInit_ex(s.md, EVP_md5(), NULL) != 1) {
            snprintf(msg, msg_size, "OpenSSL cannot compute MD5 here (FIPS mode?)");
            rc = CT_EIO;
            goto out;
        }
    }
    c = curl_easy_init();
    if (!c) {
        snprintf(msg, msg_size, "%s: curl_easy_init failed", url);
        goto out;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_setup(c, url, &s, errbuf);
    fprintf(stderr, "cltrain: downloading %s\n", url);
    CURLcode cr = curl_easy_perform(c);
    if (s.write_errno) {
        snprintf(msg, msg_size, "%s: cannot write (%s)", tmp, strerror(s.write_errno));
        rc = CT_EIO;
        goto out;
    }
    if (cr != CURLE_OK) {
        snprintf(msg, msg_size, "%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cr));
        goto out;
    }
    if (s.md) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned dn = 0;
        char got[2 * EVP_MAX_MD_SIZE + 1];
        if (EVP_DigestFinal_ex(s.md, d, &dn) != 1) {
            snprintf(msg, msg_size, "OpenSSL MD5 failed");
            rc = CT_EIO;
            goto out;
        }
        for (unsigned i = 0; i < dn; i++) snprintf(got + 2 * i, 3, "%02x", d[i]);
        got[2 * dn] = '\0';
        if (strcmp(got, md5) != 0) {
            snprintf(msg, msg_size, "%s: checksum mismatch: MD5 %s, expected %s; the mirror served a different or damaged file",
                     url, got, md5);
            goto out;
        }
    }
    if (fsync(fd) != 0) {
        snprintf(msg, msg_size, "%s: fsync failed (%s)", tmp, strerror(errno));
        rc = CT_EIO;
        goto out;
    }
    int cfd = fd;
    fd = -1;
    if (close(cfd) != 0) {
        snprintf(msg, msg_size, "%s: close failed (%s)", tmp, strerror(errno));
        rc = CT_EIO;
        goto out;
    }
    if (rename(tmp, dest) != 0) {
        snprintf(msg, msg_size, "%s: cannot rename into place (%s)", dest, strerror(errno));
        rc = CT_EIO;
        goto out;
    }
    tmp[0] = '\0'; /* installed: nothing to remove */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { (void)fsync(dfd); close(dfd); } /* make the rename durable; best effort */
    rc = 0;
out:
    if (c) curl_easy_cleanup(c);
    if (s.md) EVP_MD_CTX_free(s.md);
    if (fd >= 0) close(fd);
    if (tmp[0]) unlink(tmp);
    return rc;
}

/* The folders of dir (itself and its parents) that do not exist yet, deepest
 * last, so that a failed download removes exactly what it created. */
typedef struct made_dirs { char path[8][4096]; int n; } made_dirs;
static void missing_dirs(const char *dir, made_dirs *md) {
    md->n = 0;
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    size_t len = strlen(p);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        struct stat st;
        if (stat(p, &st) != 0 && md->n < 8) snprintf(md->path[md->n++], sizeof md->path[0], "%s", p);
        p[i] = c;
    }
}
static void remove_made(const made_dirs *md) {
    for (int i = md->n - 1; i >= 0; i--) rmdir(md->path[i]); /* only empty ones go: rmdir refuses the others */
}

int ct_download(const char *const *urls, int n_urls, const char *dest, const char *md5_hex) {
    if (!urls || n_urls <= 0 || !dest || !dest[0])
        return ct_fail(CT_EINPUT, "ct_download: no URL or no destination given");
    char md5[33];
    if (md5_hex) {
        size_t n = strlen(md5_hex);
        if (n != 32) return ct_fail(CT_EINPUT, "ct_download: MD5 '%s' is not 32 hex digits", md5_hex);
        for (size_t i = 0; i < n; i++) {
            if (!isxdigit((unsigned char)md5_hex[i]))
                return ct_fail(CT_EINPUT, "ct_download: MD5 '%s' is not 32 hex digits", md5_hex);
            md5[i] = (char)tolower((unsigned char)md5_hex[i]);
        }
        md5[32] = '\0';
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return ct_fail(CT_ENET, "libcurl failed to initialise (%s)", curl_easy_strerror(curl_init_rc));

    char dir[4096];
    const char *slash = strrchr(dest, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dest) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - dest) >= sizeof dir) return ct_fail(CT_EIO, "%s: path too long", dest);
    else { memcpy(dir, dest, (size_t)(slash - dest)); dir[slash - dest] = '\0'; }
    made_dirs *md = ct_xmalloc(sizeof *md);
    missing_dirs(dir, md);
    if (ct_mkdir_p(dir) != 0) {
        int e = errno;
        remove_made(md);
        free(md);
        return ct_fail(CT_EIO, "%s: cannot create folder (%s); create it or choose another folder", dir, strerror(e));
    }

    char msg[768] = "";
    int rc = CT_ENET;
    for (int i = 0; i < n_urls; i++) {
        rc = fetch_one(urls[i], dest, dir, md5_hex ? md5 : NULL, msg, sizeof msg);
        if (rc == 0 || rc == CT_EIO) break;
        CT_DEBUG(1, "download failed: %s", msg);
    }
    if (rc) remove_made(md); /* a failed attempt leaves no empty datasets/NAME behind */
    free(md);
    if (rc == 0) return 0;
    if (rc == CT_EIO) return ct_fail(CT_EIO, "%s", msg);
    if (n_urls > 1) return ct_fail(CT_ENET, "all %d mirrors failed, last: %s", n_urls, msg);
    return ct_fail(CT_ENET, "%s", msg);
}
