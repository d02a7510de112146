#!/usr/bin/python3
"""arrays_write.py: NumPy files for tests/arrays.sh, written by NumPy itself.

  arrays_write.py mnist OUT IMAGES.gz LABELS.gz N TESTN
      The first N + TESTN images of an IDX pair as: OUT/idx/ (IDX files, the
      reference), and in every dtype and layout cltrain reads:
        OUT/<name>.npz        np.savez / np.savez_compressed, x_train .. y_test
        OUT/<name>-x.npy ...  .npy quadruples
      listed one per line on stdout as NAME ARGS... (the cltrain arrays arguments).
  arrays_write.py bad OUT KIND
      one damaged file (KIND: header, fortran, object, shape, key, dtype,
      truncated, crc); prints the file name and what the message must name.
  arrays_write.py big OUT N
      a compressed .npz of N zero 28x28 uint8 images (for the memory-limit check).
"""
import gzip
import os
import struct
import sys
import zipfile

import numpy as np


def read_idx(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, n * rows * cols, 16).reshape(n, rows, cols)
    return np.frombuffer(data, np.uint8, n, 8)


def write_idx(path, a):
    with open(path, "wb") as f:
        if a.ndim == 3:
            f.write(struct.pack(">IIII", 0x803, *a.shape))
        else:
            f.write(struct.pack(">II", 0x801, a.shape[0]))
        f.write(a.astype(np.uint8).tobytes())


def mnist(out, images, labels, n, tn):
    x = read_idx(images, n + tn)
    y = read_idx(labels, n + tn)
    xtr, xte, ytr, yte = x[:n], x[n:], y[:n], y[n:]
    os.makedirs(out + "/idx", exist_ok=True)
    write_idx(out + "/idx/train-images-idx3-ubyte", xtr)
    write_idx(out + "/idx/train-labels-idx1-ubyte", ytr)
    write_idx(out + "/idx/t10k-images-idx3-ubyte", xte)
    write_idx(out + "/idx/t10k-labels-idx1-ubyte", yte)
    # floats as cltrain makes them from bytes: b * (1.0f / 255.0f) in float32
    scale = np.float32(1.0) / np.float32(255.0)
    f32 = lambda a: a.astype(np.float32) * scale
    sets = {
        # name: (x_train, x_test, label dtype, layout flag, compressed)
        "u8-nhw-stored": (xtr, xte, np.uint8, None, False),
        "u8-nhw-deflate": (xtr, xte, np.int64, None, True),
        "u8-nhwc": (xtr[..., None], xte[..., None], np.int32, None, False),
        "u8-nchw": (xtr[:, None], xte[:, None], np.int16, "nchw", True),
        "f32-nhw": (f32(xtr), f32(xte), np.int8, None, False),
        "f32-nhwc": (f32(xtr)[..., None], f32(xte)[..., None], np.uint16, None, True),
        "f32-nchw": (f32(xtr)[:, None], f32(xte)[:, None], np.uint64, "nchw", False),
    }
    for name, (a, b, ld, layout, comp) in sets.items():
        save = np.savez_compressed if comp else np.savez
        # Keras' CIFAR labels are (n, 1): one set has that shape
        yt, ye = ytr.astype(ld), yte.astype(ld)
        if name == "u8-nhwc":
            yt, ye = yt[:, None], ye[:, None]
        save(f"{out}/{name}.npz", x_train=a, y_train=yt, x_test=b, y_test=ye)
        print(name, f"{out}/{name}.npz", *(["--layout", layout] if layout else []))
    # .npy quadruples: big-endian float32 NHWC, and uint8 with int32 labels
    np.save(f"{out}/be-x.npy", f32(xtr)[..., None].astype(">f4"))
    np.save(f"{out}/be-y.npy", ytr.astype(">i8"))
    np.save(f"{out}/be-xt.npy", f32(xte)[..., None].astype(">f4"))
    np.save(f"{out}/be-yt.npy", yte.astype(">i8"))
    print("f32be-npy", *[f"{out}/be-{k}.npy" for k in ("x", "y", "xt", "yt")])
    np.save(f"{out}/u8-x.npy", xtr)
    np.save(f"{out}/u8-y.npy", ytr.astype(np.int32))
    np.save(f"{out}/u8-xt.npy", xte)
    np.save(f"{out}/u8-yt.npy", yte.astype(np.int32))
    print("u8-npy", *[f"{out}/u8-{k}.npy" for k in ("x", "y", "xt", "yt")])
    # three distinct channels (the image, its negative, its mirror): layouts must not mix them up
    rgb = lambda a: np.stack([a, 255 - a, a[:, :, ::-1]], axis=3)
    np.savez(f"{out}/rgb-nhwc.npz", x_train=rgb(xtr), y_train=ytr, x_test=rgb(xte), y_test=yte)
    print("rgb-nhwc", f"{out}/rgb-nhwc.npz")
    np.savez_compressed(f"{out}/rgb-nchw.npz", x_train=rgb(xtr).transpose(0, 3, 1, 2), y_train=ytr,
                        x_test=rgb(xte).transpose(0, 3, 1, 2), y_test=yte)
    print("rgb-nchw", f"{out}/rgb-nchw.npz", "--layout", "NCHW")
    for k, a in (("x", f32(rgb(xtr)).transpose(0, 3, 1, 2)), ("y", ytr), ("xt", f32(rgb(xte)).transpose(0, 3, 1, 2)), ("yt", yte)):
        np.save(f"{out}/rgbf-{k}.npy", np.ascontiguousarray(a))
    print("rgb-f32-nchw-npy", *[f"{out}/rgbf-{k}.npy" for k in ("x", "y", "xt", "yt")], "--layout", "nchw")
    # other key names, given with --x/--y
    np.savez(f"{out}/keys.npz", images=xtr, labels=ytr, timages=xte, tlabels=yte)
    print("keys", f"{out}/keys.npz", "--x", "images,timages", "--y", "labels,tlabels")


def bad(out, kind):
    x = np.zeros((8, 4, 4), np.uint8)
    y = np.arange(8) % 2
    if kind == "header":
        np.save(out + "-x.npy", x)
        data = bytearray(open(out + "-x.npy", "rb").read())
        i = data.index(b"'shape'")
        data[i:i + 7] = b"'shope'"
        open(out + "-x.npy", "wb").write(data)
        np.save(out + "-y.npy", y)
        print(out + "-x.npy", "header")
    elif kind == "fortran":
        np.save(out + "-x.npy", np.asfortranarray(np.zeros((8, 4, 5), np.uint8)))
        np.save(out + "-y.npy", y)
        print(out + "-x.npy", "Fortran order")
    elif kind == "object":
        np.save(out + "-x.npy", x)
        np.save(out + "-y.npy", np.array([1, "a", None, 2, 3, 4, 5, 6], dtype=object), allow_pickle=True)
        print(out + "-y.npy", "objects")
    elif kind == "shape":
        np.save(out + "-x.npy", x)
        np.save(out + "-y.npy", y[:7])
        print(out + "-y.npy", "7 labels for the 8 images")
    elif kind == "dtype":
        np.save(out + "-x.npy", x.astype(np.int64))
        np.save(out + "-y.npy", y)
        print(out + "-x.npy", "int64")
    elif kind == "truncated":
        np.save(out + "-x.npy", x)
        data = open(out + "-x.npy", "rb").read()
        open(out + "-x.npy", "wb").write(data[:-5])
        np.save(out + "-y.npy", y)
        print(out + "-x.npy", "truncated")
    elif kind == "key":
        np.savez(out + ".npz", x_train=x, x_test=x, y_test=y)
        print(out + ".npz", "y_train")
    elif kind == "crc":
        np.savez(out + ".npz", x_train=x, y_train=y)
        data = bytearray(open(out + ".npz", "rb").read())
        data[data.index(b"\x93NUMPY") + 140] ^= 1  # a pixel of x_train
        open(out + ".npz", "wb").write(data)
        print(out + ".npz", "x_train.npy: CRC-32")
    else:
        sys.exit(f"unknown kind {kind}")


def seeds(out):
    """small files as fuzzing seeds: tests/fuzz/corpus/npy"""
    os.makedirs(out, exist_ok=True)
    x = (np.arange(2 * 3 * 4) % 251).astype(np.uint8).reshape(2, 3, 4)
    np.save(f"{out}/u8.npy", x)
    np.save(f"{out}/f4be.npy", x.astype(">f4"))
    np.save(f"{out}/i8.npy", np.arange(5, dtype=np.int64))
    np.save(f"{out}/bool.npy", np.array([True, False]))
    np.save(f"{out}/scalar.npy", np.float64(2.5))
    np.savez(f"{out}/stored.npz", x_train=x, y_train=np.arange(2, dtype=np.int16))
    np.savez_compressed(f"{out}/deflate.npz", x_train=x.astype(np.float32), y_train=np.arange(2), x_test=x, y_test=np.arange(2))


def big(out, n):
    x = np.zeros((n, 28, 28), np.uint8)
    y = np.arange(n) % 10
    np.savez_compressed(out + "-deflate.npz", x_train=x, y_train=y)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "mnist":
        mnist(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "bad":
        bad(sys.argv[2], sys.argv[3])
    elif cmd == "seeds":
        seeds(sys.argv[2])
    elif cmd == "big":
        big(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
