/* download.h: fetch one file from a list of mirrors, verify its MD5, install it atomically.
 *
 * Depends on libcurl (transfers) and libcrypto (EVP MD5). Used by the MNIST
 * loader (src/data/idx.c) and meant for CIFAR and any other fetched file.
 * Tested by tests/test_idx.c (file:// mirrors and an unreachable address). */
#ifndef CLTRAIN_DOWNLOAD_H
#define CLTRAIN_DOWNLOAD_H

/* Try urls[0..n_urls-1] in order until one gives a file whose MD5 equals
 * md5_hex (32 hex digits, any case; NULL skips the check). The body goes to
 * a temporary file next to dest (its folder is created if missing), which is
 * fsynced and renamed onto dest only when complete and verified; on any
 * failure nothing is left behind. Supports http, https and file URLs;
 * redirects are followed (http/https only), HTTP errors fail, connecting
 * times out after 10 s and a transfer stalled for 60 s is abandoned.
 * Prints one "downloading URL" line to stderr per attempt.
 * Returns 0; CT_ENET when no mirror worked (message: the last mirror's URL
 * and error, or the checksum mismatch); CT_EIO when dest cannot be written;
 * CT_EINPUT for a malformed md5_hex or no URLs. Thread-safe. */
int ct_download(const char *const *urls, int n_urls, const char *dest, const char *md5_hex);

#endif
