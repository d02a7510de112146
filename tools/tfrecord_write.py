#!/usr/bin/env python3
"""tfrecord_write.py: TFRecord files for tests/tfrecord.sh, written with the PyPI `tfrecord` package
(an independent writer: no TensorFlow, and none of cltrain's code). An OUT ending in .gz is the
same stream gzip-compressed (TFRecord's GZIP option).

  tfrecord_write.py slim OUT DIR           every DIR/CLASS/*.png (classes and files sorted) as a TF-Slim
                                           Example: image/encoded, image/format, image/class/label
  tfrecord_write.py mnist OUT IMAGES LABELS FIRST N
                                           IDX images FIRST..FIRST+N-1 as raw records: image_raw (784
                                           bytes), label, height, width, depth
  tfrecord_write.py bad KIND OUT DIR       a TF-Slim file of DIR with one fault at record 2 (KIND:
                                           flip, truncate, lencrc, missing, label, protobuf); prints
                                           "INDEX OFFSET" of the damaged record
"""
import gzip
import os
import shutil
import struct
import sys

import tfrecord


def slim_examples(d):
    ex = []
    for label, cls in enumerate(sorted(os.listdir(d))):
        for f in sorted(os.listdir(os.path.join(d, cls))):
            data = open(os.path.join(d, cls, f), "rb").read()
            ex.append({"image/encoded": (data, "byte"), "image/format": (b"png", "byte"),
                       "image/class/label": (label, "int")})
    return ex


def write(out, examples, raw_records=None):
    """examples through tfrecord.TFRecordWriter; raw_records: {index: bytes} written framed as they are"""
    plain = out + ".tmp" if out.endswith(".gz") else out
    w = tfrecord.TFRecordWriter(plain)
    for i, e in enumerate(examples):
        if raw_records and i in raw_records:
            data = raw_records[i]
            length = struct.pack("<Q", len(data))
            w.file.write(length + w.masked_crc(length) + data + w.masked_crc(data))
        else:
            w.write(e)
    w.close()
    if plain != out:
        with open(plain, "rb") as f, gzip.open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(plain)


def offsets(path):
    data, off, out = open(path, "rb").read(), 0, []
    while off < len(data):
        out.append(off)
        off += 16 + struct.unpack("<Q", data[off:off + 8])[0]
    return out


def bad(kind, out, d):
    ex = slim_examples(d)
    k = 2
    if kind == "missing":
        del ex[k]["image/class/label"]
    elif kind == "label":
        ex[k]["image/class/label"] = (-1, "int")
    write(out, ex, {k: b"\x0a\xff\xff\x03garbage"} if kind == "protobuf" else None)
    off = offsets(out)[k]
    data = bytearray(open(out, "rb").read())
    if kind == "flip":
        data[off + 12 + 40] ^= 0x10      # a byte of the record's data
    elif kind == "lencrc":
        data[off + 9] ^= 0x01            # the length's CRC
    elif kind == "truncate":
        data = data[:off + 12 + 30]       # cut inside record k, which is then the last
    open(out, "wb").write(data)
    print(k, off)


def mnist(out, images, labels, first, n):
    img = gzip.open(images).read() if images.endswith(".gz") else open(images, "rb").read()
    lab = gzip.open(labels).read() if labels.endswith(".gz") else open(labels, "rb").read()
    ex = [{"image_raw": (img[16 + i * 784:16 + (i + 1) * 784], "byte"), "label": (lab[8 + i], "int"),
           "height": (28, "int"), "width": (28, "int"), "depth": (1, "int")} for i in range(first, first + n)]
    write(out, ex)


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "slim":
        write(a[2], slim_examples(a[3]))
    elif a[1] == "mnist":
        mnist(a[2], a[3], a[4], int(a[5]), int(a[6]))
    elif a[1] == "bad":
        bad(a[2], a[3], a[4])
    else:
        sys.exit(__doc__)
