/* file.h: opening the files a user names, safely: a folder, a FIFO, a device
 * or a socket given where a file is expected is refused with one line
 * (naming the option or role) instead of blocking for ever or reading
 * nonsense sizes; an output path is probed for writability at start-up, so a
 * bad --checkpoint is found before the first epoch, not after it.
 * Tested by tests/badinput.sh (folders, FIFOs, devices, read-only targets), test_idx.c and test_images.c. */
#ifndef CLTRAIN_FILE_H
#define CLTRAIN_FILE_H
#include <stdint.h>
#include <stdio.h>

/* 0 when path names a regular file (after symlinks); else CT_EINPUT with
 * "PATH: <what is wrong>; expected WHAT" (WHAT e.g. "a checkpoint file").
 * Never opens the file, so a FIFO cannot block. */
int ct_file_check(const char *path, const char *what);
/* Open path for reading ("rb") as ct_file_check would accept it, without
 * blocking on a FIFO (O_NONBLOCK open, fstat, then blocking again).
 * *size gets the file size when not NULL. */
int ct_file_open_read(const char *path, const char *what, FILE **f, int64_t *size);
/* The same as a raw descriptor (blocking again, O_CLOEXEC), e.g. for gzdopen. */
int ct_file_open_fd(const char *path, const char *what, int *fd, int64_t *size);
/* Read a whole regular file of at most max bytes into a malloc'd buffer. */
int ct_file_read_all(const char *path, const char *what, size_t max, uint8_t **buf, size_t *len);
/* Whether path may be written (replaced) as OPT names it: 0 when nothing is
 * there yet or a regular file is; a folder, device, FIFO or socket is refused
 * ("OPT PATH: is a device; ..."), so an atomic rename never replaces one.
 * Checked again by every atomic writer; never opens path. */
int ct_file_check_target(const char *path, const char *opt);
/* 1 when a and b both exist and are the same file (device and inode: hard
 * links, symbolic links and other spellings of one path included). */
int ct_file_same(const char *a, const char *b);
/* Whether path can be written as OPT names it: not a folder or special file,
 * (ct_file_check_target) and its folder takes a new file (created and
 * removed at once). */
int ct_file_probe_write(const char *path, const char *opt);
/* The last step of an atomic write: rename tmp (written, fsync'd, closed)
 * over path, then fsync path's folder so the rename itself is durable.
 * 0, or the errno of the failed rename (tmp is then removed). */
int ct_file_replace(const char *tmp, const char *path);
#endif
