"""The rate of one f32 matrix product, C = A B^T (A m x k, B n x k), in
GFLOP/s, for each library the CPU benchmarks compare: the OpenBLAS Kiln's
kernels call (libopenblas.so.0, through its CBLAS interface) and PyTorch's
own (torch.matmul: MKL in PyPI's wheels, OpenBLAS in Debian's), at 1 and 2
threads, on the shapes of the training benchmark's products.

    python bench/gemm_rate.py [--shapes MxNxK,...] [--seconds 1]

Each figure is the best of 5 trials of about --seconds each. OpenBLAS's own
threads are used for its 2-thread figure (Kiln instead splits a product
into row blocks, one single-threaded call per OpenMP thread: its 2-thread
rate is at most twice the 1-thread one).
"""
import argparse
import ctypes
import os
import re
import sys
import time

from common import default_coretype

SHAPES = "2048x768x256,2048x256x1024,2048x1000x256,256x1024x2048"


def timed(run, seconds):
    run()
    best = float("inf")
    for _ in range(5):
        count, start = 0, time.perf_counter()
        while True:
            run()
            count += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        best = min(best, elapsed / count)
    return best


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv[1:])
    # OpenBLAS's kernels as Kiln's runtime picks them for its products.
    if default_coretype():
        os.environ["OPENBLAS_CORETYPE"] = default_coretype()
    import numpy as np
    import torch
    blas = ctypes.CDLL("libopenblas.so.0")
    blas.openblas_get_config.restype = ctypes.c_char_p
    sgemm = blas.cblas_sgemm
    sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p,
                                           ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int, ctypes.c_float,
                                           ctypes.c_void_p, ctypes.c_int]
    print("libopenblas.so.0: %s" % blas.openblas_get_config().decode())
    blas_info = re.search(r"BLAS_INFO=([^,]+)", torch.__config__.show())
    print("PyTorch %s: BLAS_INFO=%s" % (
        torch.__version__, blas_info.group(1) if blas_info else "unknown"))
    print("%-16s %8s %8s %8s %8s" % ("m x n x k", "blas 1t", "blas 2t",
                                     "torch 1t", "torch 2t"))
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        generator = np.random.default_rng(0)
        a = generator.standard_normal((m, k)).astype(np.float32)
        b = generator.standard_normal((n, k)).astype(np.float32)
        c = np.empty((m, n), np.float32)
        flops = 2.0 * m * n * k
        rates = []
        for threads in (1, 2):
            blas.openblas_set_num_threads(threads)
            rates.append(flops / timed(lambda: sgemm(
                101, 111, 112, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data,
                k, 0.0, c.ctypes.data, n), args.seconds) / 1e9)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            rates.append(flops / timed(lambda: torch.matmul(ta, tb.t()),
                                       args.seconds) / 1e9)
        print("%-16s %8.1f %8.1f %8.1f %8.1f" % ((shape,) + tuple(rates)))
    print("GFLOP/s, best of 5 trials of about %g s each" % args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
