#!/usr/bin/python3
"""cifar10_as_cifar100.py: CIFAR-100-format files from the CIFAR-10 binary batches.

  cifar10_as_cifar100.py CIFAR10_DIR OUT_DIR

Writes OUT_DIR/train.bin and test.bin (records of coarse label, fine label and
the same 3072 bytes of R, G, B planes), fine_label_names.txt and
coarse_label_names.txt. Both labels are the CIFAR-10 label, so 10 of the 100
fine (and of the 20 coarse) classes occur, named as in batches.meta.txt. It
exercises `cltrain cifar100` on real photos end to end; its accuracy says
nothing about CIFAR-100 (BENCHMARKS.md, "The default of `cltrain cifar10`").
"""
import os
import sys


def convert(src, names, dst):
    with open(dst, "wb") as out:
        for name in names:
            data = open(os.path.join(src, name), "rb").read()
            if len(data) % 3073:
                sys.exit("%s: %d bytes, not whole 3073-byte CIFAR-10 records" % (name, len(data)))
            for i in range(0, len(data), 3073):
                out.write(bytes([data[i], data[i]]) + data[i + 1:i + 3073])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    src, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    names = [l.strip() for l in open(os.path.join(src, "batches.meta.txt")) if l.strip()]
    convert(src, ["data_batch_%d.bin" % k for k in range(1, 6)], os.path.join(out, "train.bin"))
    convert(src, ["test_batch.bin"], os.path.join(out, "test.bin"))
    for file, n in (("fine_label_names.txt", 100), ("coarse_label_names.txt", 20)):
        with open(os.path.join(out, file), "w") as f:
            f.write("".join(c + "\n" for c in names + ["unused%d" % k for k in range(len(names), n)]))


if __name__ == "__main__":
    main()
