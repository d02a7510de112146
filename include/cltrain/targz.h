/* targz.h: unpacking a .tar.gz (the CIFAR archives). Depends on zlib.
 * Tested by tests/test_cifar.c (hostile archives) and tests/fuzz/fuzz_targz.c. */
#ifndef CLTRAIN_TARGZ_H
#define CLTRAIN_TARGZ_H

/* Unpack a ustar .tar.gz (GNU tar's too) into dest_dir: regular files and
 * folders only; links, devices and pax/GNU extension entries are skipped.
 * An entry whose path is absolute or has a ".." component, a bad header
 * checksum, a truncated archive or a corrupt stream fails the whole run
 * with CT_EINPUT naming the archive (and the entry). Each file is written
 * to a temporary name and renamed, so none is ever seen half-written.
 * *n_files (may be NULL) gets the number of regular files written. */
int ct_targz_extract(const char *archive, const char *dest_dir, int *n_files);
#endif
