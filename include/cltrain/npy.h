/* npy.h: NumPy arrays as np.save and np.savez / np.savez_compressed write
 * them (.npy format 1.0, 2.0 and 3.0; .npz, a zip archive of .npy members,
 * stored or deflated, zip64 included).
 *
 * A .npy file is mapped (mmap), never read into memory, so arrays larger
 * than memory work; so are the stored members of an .npz. A deflated
 * member is inflated (zlib) into memory: one larger than the machine's
 * memory is refused with a message that suggests np.save's .npy instead.
 * The zip reader is our own (about 150 lines: end record, zip64 end
 * record, central directory, local headers): zlib, which cltrain links
 * already, inflates, and a mapped stored member needs its data offset,
 * which libzip and minizip do not hand out.
 *
 * Every header field is checked: magic, version, header length, the dict
 * (descr, fortran_order, shape), dtypes cltrain can use (bool, integers,
 * float32, float64; not object or structured), the data size against the
 * shape, zip offsets and sizes against the file, CRC-32 of each member.
 * Errors are CT_EINPUT with one line naming the file and the key.
 * Depends on common.h, zlib. Tested by tests/arrays.sh and
 * tests/fuzz/fuzz_npy.c. */
#ifndef CLTRAIN_NPY_H
#define CLTRAIN_NPY_H
#include <stddef.h>
#include <stdint.h>

#define CT_NPY_MAX_DIM 8

typedef struct ct_array {
    char kind;              /* 'b' bool, 'u' unsigned, 'i' signed, 'f' float */
    int size;               /* bytes per element: 1, 2, 4 or 8 */
    int swap;               /* stored big-endian: bytes are swapped on read */
    int ndim;
    int64_t shape[CT_NPY_MAX_DIM];
    int64_t count;          /* elements: the product of shape */
    const uint8_t *data;    /* count * size bytes, C order, maybe unaligned */
    /* private: what ct_array_free releases */
    void *map;
    size_t map_len;
    uint8_t *owned;
} ct_array;

/* Parse the .npy bytes buf[0..len) (header and data) into a, which points
 * into buf. what names it in messages ("x.npy", "d.npz: x_train").
 * CT_EINPUT: bad magic or version, a header that is not the dict np.save
 * writes, Fortran order, an object or structured dtype, or fewer data
 * bytes than the shape needs. */
int ct_npy_parse(ct_array *a, const uint8_t *buf, size_t len, const char *what);
/* Map the .npy file at path. CT_EINPUT naming path (missing, not a file, bad header). */
int ct_npy_open(ct_array *a, const char *path);
void ct_array_free(ct_array *a);
/* Element i as an integer (integers and bool; floats truncated) and as a float. */
int64_t ct_array_int(const ct_array *a, int64_t i);
float ct_array_float(const ct_array *a, int64_t i);
/* "uint8", "float32", ... for messages */
const char *ct_array_dtype(const ct_array *a);

typedef struct ct_npz_entry {
    char *name;             /* the member's name, "x_train.npy" */
    int method;             /* 0 stored, 8 deflated */
    uint32_t crc;
    uint64_t csize, usize;  /* compressed and uncompressed bytes */
    uint64_t offset;        /* of its local header */
} ct_npz_entry;

typedef struct ct_npz {
    char *path;
    const uint8_t *buf;     /* the whole file (mapped, or the caller's bytes) */
    size_t len;
    int n;
    ct_npz_entry *e;
    void *map;
} ct_npz;

/* Parse the zip directory of buf[0..len) (kept, not copied); path names it. */
int ct_npz_parse(ct_npz *z, const uint8_t *buf, size_t len, const char *path);
/* Map the .npz file at path and read its directory. */
int ct_npz_open(ct_npz *z, const char *path);
/* The entry of key ("x_train", or "x_train.npy"), or -1. */
int ct_npz_find(const ct_npz *z, const char *key);
/* Member i as an array: stored members point into the map, deflated ones are
 * inflated into memory when their size is at most mem_limit bytes (0: this
 * machine's memory). CT_EINPUT naming the file and key on damage, too large
 * or a method other than stored and deflate. a must be freed before z. */
int ct_npz_array(const ct_npz *z, int i, ct_array *a, uint64_t mem_limit);
void ct_npz_close(ct_npz *z);
#endif
