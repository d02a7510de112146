/* util/file.c: user-named files opened safely (see file.h). Special files
 * are told apart by stat/fstat before any blocking open; writability is
 * probed by creating and removing PATH.probe.<pid> beside the target, the
 * same folder a checkpoint's temporary file goes to (root ignores mode bits,
 * so only a real create shows a read-only file system or a missing folder).
 * Tested by tests/test_file.c and tests/badinput.sh. */
#include "cltrain/file.h"
#include "cltrain/common.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

static int not_regular(const char *path, const char *what, mode_t m) {
    return ct_fail(CT_EINPUT, "%s: is %s; expected %s", path, kind_of(m), what);
}

static int open_fail(const char *path, const char *what, int e) {
    if (e == ENOENT) return ct_fail(CT_EINPUT, "%s: %s; expected %s", path, strerror(e), what);
    if (e == ELOOP) return ct_fail(CT_EINPUT, "%s: a loop of symbolic links; expected %s", path, what);
    return ct_fail(CT_EINPUT, "%s: cannot open (%s); expected %s", path, strerror(e), what);
}

int ct_file_check(const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) != 0) return open_fail(path, what, errno);
    return S_ISREG(st.st_mode) ? 0 : not_regular(path, what, st.st_mode);
}

int ct_file_open_fd(const char *path, const char *what, int *fdp, int64_t *size) {
    *fdp = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return open_fail(path, what, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return open_fail(path, what, e);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return not_regular(path, what, st.st_mode);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fdp = fd;
    if (size) *size = (int64_t)st.st_size;
    return 0;
}

int ct_file_open_read(const char *path, const char *what, FILE **f, int64_t *size) {
    *f = NULL;
    int fd;
    int rc = ct_file_open_fd(path, what, &fd, size);
    if (rc) return rc;
    *f = fdopen(fd, "rb");
    if (!*f) {
        int e = errno;
        close(fd);
        return open_fail(path, what, e);
    }
    return 0;
}

int ct_file_read_all(const char *path, const char *what, size_t max, uint8_t **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    FILE *f;
    int64_t size;
    int rc = ct_file_open_read(path, what, &f, &size);
    if (rc) return rc;
    if (size < 0 || (uint64_t)size > max) {
        fclose(f);
        return ct_fail(CT_EINPUT, "%s: %lld bytes, more than the %zu allowed for %s", path, (long long)size, max, what);
    }
    uint8_t *b = malloc(size ? (size_t)size : 1);
    if (!b) {
        fclose(f);
        return ct_fail(CT_ENOMEM, "%s: out of memory reading %lld bytes", path, (long long)size);
    }
    size_t got = fread(b, 1, (size_t)size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != (size_t)size) {
        free(b);
        return ct_fail(CT_EINPUT, "%s: read %zu of %lld bytes (%s)", path, got, (long long)size,
                       err ? strerror(errno) : "the file shrank while being read");
    }
    *buf = b;
    *len = got;
    return 0;
}

int ct_file_check_target(const char *path, const char *opt) {
    struct stat st;
    if (!*path) return ct_fail(CT_EINPUT, "%s '': expected a file name", opt);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return ct_fail(CT_EINPUT, "%s %s: is %s; expected a file to write (a new one, or a regular file to replace)", opt,
                       path, kind_of(st.st_mode));
    return 0;
}

int ct_file_same(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int ct_file_probe_write(const char *path, const char *opt) {
    int rc = ct_file_check_target(path, opt);
    if (rc) return rc;
    char probe[4200];
    if (snprintf(probe, sizeof probe, "%s.probe.%d", path, (int)getpid()) >= (int)sizeof probe)
        return ct_fail(CT_EINPUT, "%s %s: path too long", opt, path);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT)
        return ct_fail(CT_EINPUT, "%s %s: its folder does not exist; create it or give another path", opt, path);
    if (fd < 0)
        return ct_fail(CT_EINPUT, "%s %s: cannot create a file there (%s); give a writable path", opt, path,
                       strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

int ct_file_replace(const char *tmp, const char *path) {
    if (rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return e;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
