#!/usr/bin/python3
"""Writes a seeded synthetic classification set for the MLP example: 1024
samples of 32 features whose class (of 10) a fixed random linear teacher
decides, as an .npz with the arrays 'input' and 'labels'."""
import sys
import zipfile

import numpy as np


def main(path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 32)).astype(np.float32)
    teacher = rng.standard_normal((32, 10)).astype(np.float32)
    labels = np.argmax(x @ teacher, axis=1).astype(np.int64)
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in (("input", x), ("labels", labels)):
            with archive.open(name + ".npy", "w") as member:
                np.lib.format.write_array(member, array)


if __name__ == "__main__":
    main(sys.argv[1])
