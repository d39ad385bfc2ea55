#!/usr/bin/env python3
"""End-to-end test of kiln-run on bundles around real CPU code.

Compiles kernels.c with the system C compiler, wraps it in bundles with the
test bundle tool (the BundleWriter), writes inputs with NumPy (np.savez and
np.savez_compressed), runs kiln-run, and compares the .npz it writes with
results NumPy computes independently. Also checks that every user error
(missing, extra, mistyped, misshaped arrays, unsupported .npy files, bad
flags, damaged bundles) exits with status 1 and a message naming the culprit.
"""

import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

# The parameters TestBundles.cpp writes into the multi bundle.
W = np.array([[1, 2], [3, 4]], dtype=np.float32)
B = np.array([[0.5, 0.5], [-1, 2]], dtype=np.float32)
ACC = np.array([10, 20, 30, 40], dtype=np.float32)


class Tester:
    def __init__(self, args):
        self.kiln_run = args.kiln_run
        self.work = args.work_dir
        self.failures = []

    def path(self, name):
        return os.path.join(self.work, name)

    def run(self, *arguments):
        return subprocess.run([self.kiln_run, *arguments], capture_output=True,
                              text=True, timeout=60)

    def check(self, condition, what):
        if not condition:
            self.failures.append(what)
            print(f"FAIL: {what}")

    def expect_ok(self, *arguments):
        result = self.run(*arguments)
        self.check(result.returncode == 0,
                   f"kiln-run {' '.join(arguments)} exited {result.returncode}: "
                   f"{result.stderr.strip()}")
        return result

    def expect_error(self, fragments, *arguments):
        """kiln-run must exit 1 (not crash) with every fragment on stderr."""
        result = self.run(*arguments)
        command = f"kiln-run {' '.join(arguments)}"
        self.check(result.returncode == 1,
                   f"{command}: exit {result.returncode}, expected 1")
        self.check(result.stderr.startswith("kiln-run: error: "),
                   f"{command}: stderr is not one error line: {result.stderr!r}")
        for fragment in fragments:
            self.check(fragment in result.stderr,
                       f"{command}: stderr lacks {fragment!r}: {result.stderr!r}")

    def save(self, name, compressed=False, **arrays):
        path = self.path(name)
        (np.savez_compressed if compressed else np.savez)(path, **arrays)
        return path

    def load(self, name):
        with np.load(self.path(name)) as archive:
            return {key: archive[key] for key in archive.files}


def test_help(t):
    result = t.expect_ok("--help")
    for flag in ["--info", "--entry", "--inputs", "--outputs", "--compress",
                 "--target", "--repeat", "--help", "--data", "--steps"]:
        t.check(flag in result.stdout, f"--help does not document {flag}")


def test_info(t):
    result = t.expect_ok(t.path("multi.kiln"), "--info")
    for line in [
            "producer: kiln runtime tests",
            "model: multi",
            "add_one(x: f32[4]) -> (y: f32[4])",
            "affine(x: f32[2,2]) -> (y: f32[2,2])",
            "arena 128 bytes, 2 commands",
            "mixed(n: i64[3], flag: bool[3]) -> (out: f64[3])",
            "accumulate(x: f32[4]) -> (y: f32[4])",
            "cpu: triple x86_64-unknown-linux-gnu, cpu generic, 5 kernels",
            "parameters: 3, 48 bytes"]:
        t.check(line in result.stdout, f"--info lacks {line!r}:\n{result.stdout}")


def test_single_entry_is_the_default(t):
    x = np.array([1, 2, 3, 4.25], dtype=np.float32)
    inputs = t.save("single-in.npz", x=x)
    t.expect_ok(t.path("single.kiln"), "--inputs", inputs,
                "--outputs", t.path("single-out.npz"))
    out = t.load("single-out.npz")
    t.check(list(out) == ["y"], f"outputs are {list(out)}, expected ['y']")
    t.check(out["y"].dtype == np.float32 and out["y"].shape == (4,),
            f"y is {out['y'].dtype}{out['y'].shape}")
    t.check(np.array_equal(out["y"], x + 1), f"y = {out['y']}, expected {x + 1}")


def test_affine_from_compressed_inputs(t):
    x = np.array([[1, -1], [0.5, 2]], dtype=np.float32)
    inputs = t.save("affine-in.npz", compressed=True, x=x)
    t.expect_ok(t.path("multi.kiln"), "--entry", "affine", "--inputs", inputs,
                "--outputs", t.path("affine-out.npz"), "--compress")
    y = t.load("affine-out.npz")["y"]
    t.check(np.allclose(y, x * W + B, rtol=0, atol=0),
            f"affine y = {y}, expected {x * W + B}")


def test_mixed_types(t):
    n = np.array([3, -4, 5], dtype=np.int64)
    flag = np.array([True, False, True])
    inputs = t.save("mixed-in.npz", flag=flag, n=n)
    t.expect_ok(t.path("multi.kiln"), "--entry=mixed", f"--inputs={inputs}",
                f"--outputs={t.path('mixed-out.npz')}")
    out = t.load("mixed-out.npz")["out"]
    expected = np.where(flag, 2 * n, -n).astype(np.float64)
    t.check(out.dtype == np.float64 and np.array_equal(out, expected),
            f"mixed out = {out!r}, expected {expected!r}")


def test_repeat_reports_timing(t):
    x = np.ones(4, dtype=np.float32)
    inputs = t.save("acc-in.npz", x=x)
    result = t.expect_ok(t.path("multi.kiln"), "--entry", "accumulate",
                         "--inputs", inputs, "--outputs",
                         t.path("acc-out.npz"), "--repeat", "3")
    t.check("accumulate: 3 runs, mean" in result.stdout,
            f"--repeat printed {result.stdout!r}")
    # Each run adds x to the parameter in place; the outputs are the last run's.
    y = t.load("acc-out.npz")["y"]
    t.check(np.array_equal(y, ACC + 3 * x), f"accumulate y = {y}")


def test_array_errors(t):
    bundle = t.path("multi.kiln")
    out = t.path("never.npz")
    x = np.zeros((2, 2), dtype=np.float32)

    def run_affine(name, fragments, **arrays):
        inputs = t.save(name, **arrays)
        t.expect_error([inputs] + fragments, bundle, "--entry", "affine",
                       "--inputs", inputs, "--outputs", out)

    run_affine("missing.npz", ["missing input 'x' (f32[2,2])"])
    run_affine("extra.npz", ["unexpected input 'z' (inputs: 'x')"],
               x=x, z=x)
    run_affine("mistyped.npz",
               ["input 'x' has element type f64, expected f32[2,2]"],
               x=x.astype(np.float64))
    run_affine("misshaped.npz", ["input 'x' has type f32[4], expected f32[2,2]"],
               x=np.zeros(4, dtype=np.float32))
    t.check(not os.path.exists(out), "a failed run wrote its outputs")


def test_unsupported_npy(t):
    bundle = t.path("multi.kiln")
    out = t.path("never.npz")
    fortran = t.save("fortran.npz", x=np.asfortranarray(
        np.arange(4, dtype=np.float32).reshape(2, 2)))
    t.expect_error([fortran, "array 'x'", "Fortran-order arrays are not supported"],
                   bundle, "--entry", "affine", "--inputs", fortran,
                   "--outputs", out)
    big = t.save("big-endian.npz", x=np.zeros((2, 2), dtype=">f4"))
    t.expect_error(["array 'x'", "big-endian dtype '>f4'"], bundle, "--entry",
                   "affine", "--inputs", big, "--outputs", out)
    unsigned = t.save("unsigned.npz", x=np.zeros((2, 2), dtype=np.uint16))
    t.expect_error(["array 'x'", "dtype '<u2' is not supported"], bundle,
                   "--entry", "affine", "--inputs", unsigned, "--outputs", out)
    text = t.path("text.npz")
    with open(text, "w") as f:
        f.write("not an archive")
    t.expect_error([text, "not a valid .npz archive"], bundle, "--entry",
                   "affine", "--inputs", text, "--outputs", out)


def test_command_line_errors(t):
    bundle = t.path("multi.kiln")
    inputs = t.save("cli-in.npz", x=np.zeros(4, dtype=np.float32))
    out = t.path("never.npz")
    t.expect_error(["has 4 entry points (add_one, affine, mixed, accumulate); "
                    "choose one with --entry"],
                   bundle, "--inputs", inputs, "--outputs", out)
    t.expect_error(["no entry point 'backward'"], bundle, "--entry", "backward",
                   "--inputs", inputs, "--outputs", out)
    t.expect_error(["entry point 'add_one' takes 1 inputs; give them with "
                    "--inputs"], bundle, "--entry", "add_one", "--outputs", out)
    t.expect_error(["no target 'cuda'"], bundle, "--entry", "add_one",
                   "--inputs", inputs, "--outputs", out, "--target", "cuda")
    t.expect_error(["no entry point 'train_step'"], bundle,
                   "--data", inputs, "--steps", "10")
    t.expect_error(["--steps needs --data TRAIN.npz"], bundle, "--steps", "10")
    t.expect_error(["--data needs --steps N"], bundle, "--data", inputs)
    t.expect_error(["--steps takes a positive count, not '0'"], bundle,
                   "--data", inputs, "--steps", "0")
    t.expect_error(["training (--checkpoint-dir) is not supported yet"], bundle,
                   "--checkpoint-dir", "ckpt")
    t.expect_error(["unknown option '--bogus'"], bundle, "--bogus")
    t.expect_error(["--info takes no value"], bundle, "--info=yes")
    t.expect_error(["--entry needs a value"], bundle, "--entry")
    t.expect_error(["--repeat takes a positive count, not '0'"], bundle,
                   "--repeat", "0")
    t.expect_error(["no bundle given"], "--info")
    t.expect_error(["nothing to do"], bundle)
    t.expect_error(["more than one bundle given"], bundle, bundle, "--info")
    missing = t.path("missing.kiln")
    t.expect_error([missing, "cannot open"], missing, "--info")


def test_damaged_bundles(t):
    with open(t.path("multi.kiln"), "rb") as f:
        good = f.read()
    truncated = t.path("truncated.kiln")
    with open(truncated, "wb") as f:
        f.write(good[:len(good) - 10])
    t.expect_error([truncated, "truncated or extended"], truncated, "--info")
    flipped = t.path("flipped.kiln")
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0x04
    with open(flipped, "wb") as f:
        f.write(bytes(damaged))
    t.expect_error([flipped, "checksum mismatch"], flipped, "--info")
    foreign = t.path("foreign.kiln")
    shutil.copyfile(t.path("multi-in-disguise.npz"), foreign)
    t.expect_error([foreign, "not a Kiln bundle (bad magic"], foreign, "--info")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--bundle-tool", required=True)
    parser.add_argument("--cc", required=True)
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--work-dir", required=True)
    args = parser.parse_args()

    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    kernels = os.path.join(args.work_dir, "kernels.so")
    subprocess.run([args.cc, "-shared", "-fPIC", "-O2", "-o", kernels,
                    args.kernels], check=True)
    subprocess.run([args.bundle_tool, "--code", kernels, "--out",
                    args.work_dir], check=True)

    t = Tester(args)
    np.savez(t.path("multi-in-disguise.npz"), x=np.zeros(3))
    tests = [test_help, test_info, test_single_entry_is_the_default,
             test_affine_from_compressed_inputs, test_mixed_types,
             test_repeat_reports_timing, test_array_errors,
             test_unsupported_npy, test_command_line_errors,
             test_damaged_bundles]
    for test in tests:
        before = len(t.failures)
        test(t)
        print(f"{'PASS' if len(t.failures) == before else 'FAIL'}: "
              f"{test.__name__}")
    if t.failures:
        print(f"{len(t.failures)} checks failed")
        return 1
    print(f"all {len(tests)} kiln-run tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
