#!/usr/bin/env python3
"""End-to-end test of kiln-run on bundles around real CPU code.

Compiles kernels.c with the system C compiler, wraps it in bundles with the
test bundle tool (the BundleWriter), writes inputs with NumPy (np.savez and
np.savez_compressed), runs kiln-run, and compares the .npz it writes with
results NumPy computes independently. Also checks that every user error
(missing, extra, mistyped, misshaped arrays, unsupported .npy files, bad
flags, damaged bundles) exits with status 1 and a message naming the culprit.

The training tests drive the toy "train" bundles (TestBundles.h): sample i of
the data is 2**i and the loss of a batch is its sum, so each step's loss says
which samples its batch held, and the parameter w ends as the sum of every
sample consumed. From that they check the data stream (wrapping epochs and
--drop-last), gradient accumulation, the metrics file, the progress line,
checkpoints, --resume and its refusals.
"""

import argparse
import json
import os
import pty
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from kiln_test_harness import Checks, run_tests  # noqa: E402
from kiln_test_io import read_safetensors, save_npz  # noqa: E402

# The parameters TestBundles.cpp writes into the multi bundle.
W = np.array([[1, 2], [3, 4]], dtype=np.float32)
B = np.array([[0.5, 0.5], [-1, 2]], dtype=np.float32)
ACC = np.array([10, 20, 30, 40], dtype=np.float32)


class Tester(Checks):
    def __init__(self, args):
        super().__init__(args.work_dir)
        self.kiln_run = args.kiln_run

    def run(self, *arguments):
        return subprocess.run([self.kiln_run, *arguments], capture_output=True,
                              text=True, timeout=60)

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

    def train(self, bundle, *arguments, steps, metrics=None, data="toy7.npz"):
        """Trains a toy bundle; returns kiln-run's result."""
        command = [self.path(bundle), "--data", self.path(data),
                   "--steps", str(steps), *arguments]
        if metrics:
            command += ["--metrics", self.path(metrics)]
        return self.expect_ok(*command)


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def toy_losses(batches):
    """The toy's loss of each batch of sample indices: the sum of 2**i."""
    return [float(sum(2.0 ** i for i in batch)) for batch in batches]


def printed_losses(stdout):
    return [float(line.split("loss ")[1].split()[0])
            for line in stdout.splitlines() if line.startswith("step ")]


def test_help(t):
    result = t.expect_ok("--help")
    for flag in ["--info", "--entry", "--inputs", "--outputs", "--compress",
                 "--target", "--repeat", "--help", "--data", "--steps",
                 "--seed", "--no-shuffle", "--drop-last", "--log-every",
                 "--metrics", "--checkpoint-dir", "--checkpoint-every",
                 "--resume", "--params", "--save-params"]:
        t.check(flag in result.stdout, f"--help does not document {flag}")


def test_info(t):
    result = t.expect_ok(t.path("multi.kiln"), "--info")
    for line in [
            "producer: kiln runtime tests",
            "model: multi",
            "add_one(x: f32[4]) -> (y: f32[4])",
            "affine(x: f32[2,2]) -> (y: f32[2,2])",
            "    cpu: arena 128 bytes, 2 commands",
            "mixed(n: i64[3], flag: bool[3]) -> (out: f64[3])",
            "accumulate(x: f32[4]) -> (y: f32[4])",
            "cpu: triple x86_64-unknown-linux-gnu, cpu generic, 5 kernels",
            "parameters: 3, 48 bytes"]:
        t.check(line in result.stdout, f"--info lacks {line!r}:\n{result.stdout}")
    t.check("metadata:" not in result.stdout, "--info lists empty metadata")
    fingerprint = [l for l in result.stdout.splitlines()
                   if l.startswith("fingerprint: 0x")]
    t.check(len(fingerprint) == 1 and len(fingerprint[0]) == 31,
            f"--info fingerprint line: {fingerprint}")
    result = t.expect_ok(t.path("train-accum.kiln"), "--info")
    t.check("metadata:\n  training.grad_accum: 3\nfingerprint: 0x" in
            result.stdout, f"--info metadata:\n{result.stdout}")


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


def test_hybrid_bundle_targets(t):
    """A bundle with CPU and CUDA code: --info shows the CUDA architectures
    and program (and a data-parallel CUDA program's all-reduces);
    --target auto runs it where it can (the GPU, else the CPU, with a note);
    --target cuda runs on the GPU or fails naming what is missing."""
    bundle = t.path("hybrid.kiln")
    result = t.expect_ok(bundle, "--info")
    for line in ["cuda: triple nvptx64-nvidia-cuda, architectures "
                 "compute_80 ptx, 5 kernels",
                 "    cuda: arena 0 bytes, 1 commands (1 kernel launches, "
                 "0 matrix products)\n"]:
        t.check(line in result.stdout,
                f"--info lacks {line!r}:\n{result.stdout}")
    result = t.expect_ok(t.path("cuda-all-reduce.kiln"), "--info")
    line = "    cuda: arena 128 bytes, 7 commands (3 kernel launches, " \
           "0 matrix products, 2 all-reduces)\n"
    t.check(line in result.stdout, f"--info lacks {line!r}:\n{result.stdout}")
    x = np.array([1, 2, 3, 4.25], dtype=np.float32)
    inputs = t.save("hybrid-in.npz", x=x)
    for target in ["auto", "cpu", "cuda"]:
        outputs = t.path(f"hybrid-{target}-out.npz")
        command = [bundle, "--inputs", inputs, "--outputs", outputs]
        if target != "auto":
            command += ["--target", target]
        result = t.run(*command)
        if result.returncode != 0:
            t.check(target == "cuda" and result.stderr.startswith(
                f"kiln-run: error: {bundle}: target 'cuda' "),
                f"--target {target}: exit {result.returncode}: {result.stderr!r}")
            continue
        if target == "auto" and result.stderr:
            t.check(result.stderr.startswith(
                "kiln-run: note: running on target 'cpu': ") and
                "target 'cuda'" in result.stderr,
                f"--target auto note: {result.stderr!r}")
        y = np.load(outputs)["y"]
        t.check(np.array_equal(y, x + 1),
                f"--target {target}: y = {y}, expected {x + 1}")


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
    complex_ = t.save("complex.npz", x=np.zeros((2, 2), dtype=np.complex64))
    t.expect_error(["array 'x'", "dtype '<c8' is not supported"], bundle,
                   "--entry", "affine", "--inputs", complex_, "--outputs", out)
    # A dtype kiln-run reads, but not the one the entry point takes.
    unsigned = t.save("unsigned.npz", x=np.zeros((2, 2), dtype=np.uint16))
    t.expect_error([unsigned, "input 'x' has element type u16, expected "
                    "f32[2,2]"], bundle, "--entry", "affine", "--inputs",
                   unsigned, "--outputs", out)
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
    t.expect_error(["--checkpoint-dir is for training; it needs --data"],
                   bundle, "--checkpoint-dir", "ckpt")
    t.expect_error(["--checkpoint-every needs --checkpoint-dir DIR"], bundle,
                   "--data", inputs, "--steps", "2", "--checkpoint-every", "2")
    t.expect_error(["--checkpoint-every takes a positive count, not '0'"],
                   bundle, "--checkpoint-every", "0")
    t.expect_error(["--resume takes no value"], bundle, "--resume=yes")
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


def test_train_wraps_epochs(t):
    """7 samples, batches of 3, the stored order: the third batch takes
    sample 6 and then samples 0 and 1 of the next epoch."""
    result = t.train("train.kiln", "--no-shuffle", "--save-params",
                     t.path("wrap.safetensors"), steps=5, metrics="wrap.jsonl")
    batches = [[0, 1, 2], [3, 4, 5], [6, 0, 1], [2, 3, 4], [5, 6, 0]]
    expected = toy_losses(batches)
    records = read_metrics(t.path("wrap.jsonl"))
    t.check([r["step"] for r in records] == [1, 2, 3, 4, 5],
            f"metrics steps {[r['step'] for r in records]}")
    t.check([r["loss"] for r in records] == expected,
            f"metrics losses {[r['loss'] for r in records]}, expected {expected}")
    t.check(printed_losses(result.stdout) == expected,
            f"printed losses {printed_losses(result.stdout)}")
    t.check([r["epoch"] for r in records] == [0, 0, 0, 1, 1],
            f"epochs {[r['epoch'] for r in records]}")
    # lr = 0.5 / step and grad_norm = the batch sum, computed by the kernel.
    lr = np.array([r["lr"] for r in records], dtype=np.float32)
    t.check(np.array_equal(lr, np.float32(0.5) / np.arange(1, 6, dtype=np.float32)),
            f"lr {lr}")
    t.check([r["grad_norm"] for r in records] == expected,
            f"grad_norm {[r['grad_norm'] for r in records]}")
    t.check(all(r["samples"] == 3 and r["samples_per_s"] > 0
                for r in records), f"samples fields {records}")
    elapsed = [r["elapsed_s"] for r in records]
    t.check(elapsed == sorted(elapsed), f"elapsed_s not increasing: {elapsed}")
    t.check("step 4/5  epoch 1  loss 28.000000  lr 0.125  samples/s" in
            result.stdout, f"plain line format: {result.stdout!r}")
    params = read_safetensors(t.path("wrap.safetensors"))
    t.check(params["w"] == sum(expected) and params["optimizer.step"] == 5 and
            params["acc"] == 0, f"saved parameters {params}")


def test_train_drop_last(t):
    """--drop-last skips sample 6, the incomplete tail of each epoch."""
    result = t.train("train.kiln", "--no-shuffle", "--drop-last",
                     steps=5, metrics="drop.jsonl")
    expected = toy_losses([[0, 1, 2], [3, 4, 5]] * 2 + [[0, 1, 2]])
    records = read_metrics(t.path("drop.jsonl"))
    t.check([r["loss"] for r in records] == expected,
            f"--drop-last losses {[r['loss'] for r in records]}")
    t.check([r["epoch"] for r in records] == [0, 0, 1, 1, 2],
            f"--drop-last epochs {[r['epoch'] for r in records]}")
    t.check(printed_losses(result.stdout) == expected,
            f"--drop-last printed {result.stdout!r}")


def test_train_shuffled_stream_uses_every_sample(t):
    """Shuffled, 7 steps of 3 are exactly 3 epochs of 7: every sample three
    times, none dropped; different seeds give different orders; the same
    seed the same."""
    runs = {}
    for name, seed in [("a", "1"), ("b", "2"), ("c", "1")]:
        t.train("train.kiln", "--seed", seed, "--save-params",
                t.path(f"shuffled-{name}.safetensors"), steps=7,
                metrics=f"shuffled-{name}.jsonl")
        runs[name] = [r["loss"] for r in read_metrics(t.path(f"shuffled-{name}.jsonl"))]
        w = read_safetensors(t.path(f"shuffled-{name}.safetensors"))["w"]
        t.check(w == 3 * 127, f"seed {seed}: w = {w}, expected {3 * 127}")
    t.check(runs["a"] == runs["c"], "the same seed gave different batches")
    t.check(runs["a"] != runs["b"], "seeds 1 and 2 gave the same batches")


def test_train_without_lr_output(t):
    """A train_step that returns only the loss: no lr in the lines, null in
    the metrics, no grad_norm."""
    result = t.train("train-loss-only.kiln", "--no-shuffle", steps=2,
                     metrics="loss-only.jsonl")
    records = read_metrics(t.path("loss-only.jsonl"))
    t.check([r["loss"] for r in records] == toy_losses([[0, 1, 2], [3, 4, 5]]),
            f"loss-only losses {records}")
    t.check(all(r["lr"] is None and "grad_norm" not in r for r in records),
            f"loss-only records {records}")
    t.check(" lr " not in result.stdout, f"lr printed: {result.stdout!r}")


def test_train_grad_accum(t):
    """training.grad_accum = 3: per optimizer step two accumulate_steps and
    one train_step, on consecutive batches; the loss is their mean."""
    t.train("train-accum.kiln", "--no-shuffle", "--save-params",
            t.path("accum.safetensors"), steps=3, metrics="accum.jsonl")
    micro = toy_losses([[0, 1, 2], [3, 4, 5], [6, 0, 1], [2, 3, 4], [5, 6, 0],
                        [1, 2, 3], [4, 5, 6], [0, 1, 2], [3, 4, 5]])
    records = read_metrics(t.path("accum.jsonl"))
    means = np.array([sum(micro[3 * s:3 * s + 3]) / 3 for s in range(3)],
                     dtype=np.float32)
    t.check(np.array_equal(np.array([r["loss"] for r in records],
                                    dtype=np.float32), means),
            f"accumulated losses {[r['loss'] for r in records]}, expected {means}")
    # train_step sees acc = the two accumulated sums plus its own batch.
    sums = [sum(micro[3 * s:3 * s + 3]) for s in range(3)]
    t.check([r["grad_norm"] for r in records] == sums,
            f"grad_norm {[r['grad_norm'] for r in records]}, expected {sums}")
    t.check([r["samples"] for r in records] == [9, 9, 9], f"samples {records}")
    t.check([r["epoch"] for r in records] == [0, 1, 2], f"epochs {records}")
    params = read_safetensors(t.path("accum.safetensors"))
    t.check(params["optimizer.step"] == 3,
            f"optimizer.step {params['optimizer.step']}: train_step ran "
            "other than once per step")
    t.check(params["w"] == sum(micro), f"w {params['w']}, expected {sum(micro)}")


def test_train_progress_line_on_a_terminal(t):
    """On a terminal: one line redrawn with carriage returns, with the step,
    loss, lr, throughput and ETA, ended by a newline."""
    leader, follower = pty.openpty()
    result = subprocess.run(
        [t.kiln_run, t.path("train.kiln"), "--data", t.path("toy7.npz"),
         "--steps", "4", "--no-shuffle"], stdout=follower,
        stderr=subprocess.PIPE, timeout=60)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    text = output.decode()
    t.check(result.returncode == 0, f"tty run exited {result.returncode}")
    t.check(text.startswith("\rstep 1/4  loss 7.000000  lr 0.5  samples/s "),
            f"progress line starts {text[:60]!r}")
    t.check("\rstep 4/4  loss 28.000000  lr 0.125  samples/s " in text and
            "ETA 0:00:00" in text, f"last progress line missing: {text!r}")
    t.check(text.count("\n") == 1 and text.endswith("\n"),
            f"progress output is not one line: {text!r}")
    t.check("epoch" not in text, f"plain lines on a terminal: {text!r}")


def checkpoint_files(directory):
    """The directory's files but the lock a run holds (kiln-run.lock)."""
    return sorted(name for name in os.listdir(directory)
                  if name != "kiln-run.lock")


def test_checkpoints_and_resume(t):
    """Straight 5 steps vs 2 + resume to 5, for each bundle kind and with a
    shuffled wrapping stream: the same per-step losses, metrics and final
    parameters, byte for byte."""
    for bundle in ["train.kiln", "train-accum.kiln"]:
        straight, split = t.path(f"ckpt-{bundle}-straight"), t.path(f"ckpt-{bundle}-split")
        t.train(bundle, "--seed", "3", "--checkpoint-dir", straight,
                "--checkpoint-every", "2", "--save-params",
                t.path("straight.safetensors"), steps=5,
                metrics=f"straight-{bundle}.jsonl")
        t.check(checkpoint_files(straight) ==
                ["latest", "step-2.json", "step-2.safetensors", "step-4.json",
                 "step-4.safetensors", "step-5.json", "step-5.safetensors"],
                f"{bundle}: checkpoint files {checkpoint_files(straight)}")
        with open(os.path.join(straight, "latest")) as f:
            t.check(f.read() == "step-5.json\n", f"{bundle}: latest")
        with open(os.path.join(straight, "step-4.json")) as f:
            sidecar = json.load(f)
        t.check(sidecar["step"] == 4 and sidecar["data"]["seed"] == 3 and
                sidecar["data"]["shuffle"] and
                sidecar["bundle"] == t.path(bundle) and
                sidecar["kiln_run_version"] and
                sidecar["bundle_fingerprint"].startswith("0x"),
                f"{bundle}: sidecar {sidecar}")
        accum = 3 if "accum" in bundle else 1
        consumed = 4 * 3 * accum
        t.check((sidecar["data"]["epoch"], sidecar["data"]["position"]) ==
                divmod(consumed, 7), f"{bundle}: cursor {sidecar['data']}")
        with open(os.path.join(straight, "step-5.safetensors"), "rb") as f1, \
                open(t.path("straight.safetensors"), "rb") as f2:
            t.check(f1.read() == f2.read(),
                    f"{bundle}: the last checkpoint is not the saved parameters")

        t.train(bundle, "--seed", "3", "--checkpoint-dir", split, steps=2,
                metrics=f"split-{bundle}.jsonl")
        resumed = t.train(bundle, "--seed", "3", "--checkpoint-dir", split,
                          "--checkpoint-every", "2", "--resume", "--save-params",
                          t.path("resumed.safetensors"), steps=5,
                          metrics=f"split-{bundle}.jsonl")
        t.check(resumed.stdout.startswith("step 3/5"),
                f"{bundle}: resumed run starts {resumed.stdout[:20]!r}")
        keys = ["step", "epoch", "loss", "lr", "grad_norm", "samples"]
        strip = lambda rs: [{k: r.get(k) for k in keys} for r in rs]
        a = strip(read_metrics(t.path(f"straight-{bundle}.jsonl")))
        b = strip(read_metrics(t.path(f"split-{bundle}.jsonl")))
        t.check(a == b, f"{bundle}: resumed metrics differ:\n{a}\n{b}")
        with open(t.path("straight.safetensors"), "rb") as f1, \
                open(t.path("resumed.safetensors"), "rb") as f2:
            t.check(f1.read() == f2.read(),
                    f"{bundle}: resumed parameters differ")


def test_resume_after_a_kill(t):
    """A run killed after step 3 with its last checkpoint at step 2: the
    metrics file holds step 3 and a half-written line, and a step-3 sidecar
    written before `latest` was updated. --resume continues from step 2,
    cuts the metrics back to it and ends as a straight run does."""
    t.train("train.kiln", "--seed", "5", "--save-params",
            t.path("kill-straight.safetensors"), steps=4,
            metrics="kill-straight.jsonl")
    directory = t.path("ckpt-kill")
    t.train("train.kiln", "--seed", "5", "--checkpoint-dir", directory,
            "--checkpoint-every", "2", steps=3, metrics="kill.jsonl")
    with open(os.path.join(directory, "latest"), "w") as f:
        f.write("step-2.json\n")
    with open(os.path.join(directory, "step-3.json"), "w") as f:
        f.write('{"format": "kiln-run checkpoint", "st')
    with open(t.path("kill.jsonl"), "a") as f:
        f.write('{"step":4,"epo')
    t.train("train.kiln", "--seed", "5", "--checkpoint-dir", directory,
            "--resume", "--save-params", t.path("kill-resumed.safetensors"),
            steps=4, metrics="kill.jsonl")
    losses = lambda name: [(r["step"], r["loss"]) for r in read_metrics(t.path(name))]
    t.check(losses("kill.jsonl") == losses("kill-straight.jsonl"),
            f"metrics after the kill: {losses('kill.jsonl')}")
    with open(t.path("kill-straight.safetensors"), "rb") as f1, \
            open(t.path("kill-resumed.safetensors"), "rb") as f2:
        t.check(f1.read() == f2.read(), "parameters after the kill differ")
    with open(os.path.join(directory, "latest")) as f:
        t.check(f.read() == "step-4.json\n", "latest after the resumed run")


def test_checkpoint_refusals(t):
    directory = t.path("ckpt-refusals")
    t.train("train.kiln", "--checkpoint-dir", directory, steps=2,
            metrics="refusals.jsonl")
    data = t.path("toy7.npz")
    train = t.path("train.kiln")
    sidecar = os.path.join(directory, "step-2.json")
    t.expect_error([f"checkpoint {sidecar} was written for a different bundle",
                    f"({train}, fingerprint 0x"],
                   t.path("train-loss-only.kiln"), "--data", data, "--steps",
                   "4", "--checkpoint-dir", directory, "--resume")
    t.expect_error([f"--checkpoint-dir {directory} already holds checkpoints",
                    "--resume"],
                   train, "--data", data, "--steps", "4", "--checkpoint-dir",
                   directory)
    t.expect_error([f"--metrics {t.path('refusals.jsonl')} already exists"],
                   train, "--data", data, "--steps", "4", "--metrics",
                   t.path("refusals.jsonl"))
    t.expect_error([f"checkpoint {sidecar} continues the data order of "
                    "--seed 0; resume with the same flags, not --seed 1"],
                   train, "--data", data, "--steps", "4", "--checkpoint-dir",
                   directory, "--resume", "--seed", "1")
    t.expect_error([f"checkpoint {sidecar} is at step 2, past --steps 1"],
                   train, "--data", data, "--steps", "1", "--checkpoint-dir",
                   directory, "--resume")
    other = t.path("toy8.npz")
    save_npz(other, dict(x=(2.0 ** np.arange(8)).astype(np.float32)))
    t.expect_error([f"checkpoint {sidecar} was written for data of 7 samples",
                    f"{other} has 8"],
                   train, "--data", other, "--steps", "4", "--checkpoint-dir",
                   directory, "--resume")
    empty = t.path("ckpt-empty")
    os.makedirs(empty)
    t.expect_error([f"--resume: {empty} holds no checkpoint to resume"],
                   train, "--data", data, "--steps", "4", "--checkpoint-dir",
                   empty, "--resume")
    t.expect_error(["--resume needs --checkpoint-dir DIR"], train, "--data",
                   data, "--steps", "4", "--resume")
    t.expect_error(["--metrics is for training; it needs --data"], train,
                   "--metrics", t.path("never.jsonl"))
    with open(sidecar) as f:
        good = f.read()
    for name, text in [("truncated", good[:len(good) // 2]),
                       ("not JSON", "step 2\n"),
                       ("missing the cursor", good.replace('"position"', '"p"'))]:
        with open(sidecar, "w") as f:
            f.write(text)
        t.expect_error([f"checkpoint {sidecar} is corrupt or truncated"],
                       train, "--data", data, "--steps", "4",
                       "--checkpoint-dir", directory, "--resume")
    with open(sidecar, "w") as f:
        f.write(good)
    parameters = os.path.join(directory, "step-2.safetensors")
    with open(parameters, "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    t.expect_error([f"checkpoint {parameters} does not match its sidecar"],
                   train, "--data", data, "--steps", "4", "--checkpoint-dir",
                   directory, "--resume")
    # No refused resume touched the user's metrics file.
    t.check(len(read_metrics(t.path("refusals.jsonl"))) == 2,
            "a refused run changed the metrics file")


def test_outputs_checked_before_training(t):
    """An output that cannot be written fails the run before its first
    step, naming the flag and the cause, not after all the steps."""
    train, data = t.path("train.kiln"), t.path("toy7.npz")
    blocker = t.path("a-file")
    with open(blocker, "w") as f:
        f.write("not a directory\n")
    missing = t.path("no-such-dir/p.safetensors")
    for flag, path, message in [
            ("--save-params", missing, f"--save-params {missing}: its "
             f"directory {t.path('no-such-dir')} does not exist"),
            ("--save-params", t.work, f"--save-params {t.work} is a "
             "directory, not a file"),
            ("--metrics", os.path.join(blocker, "m.jsonl"),
             f"--metrics {blocker}/m.jsonl: {blocker} is not a directory"),
            ("--checkpoint-dir", os.path.join(blocker, "ckpt"),
             f"--checkpoint-dir {blocker}/ckpt: cannot create {blocker}/ckpt"),
            ("--checkpoint-dir", "/proc/kiln-ckpt",
             "--checkpoint-dir /proc/kiln-ckpt: cannot create")]:
        result = t.run(train, "--data", data, "--steps", "3", flag, path)
        t.check(result.returncode == 1 and message in result.stderr,
                f"{flag} {path}: exit {result.returncode}, {result.stderr!r}")
        t.check("step " not in result.stdout,
                f"{flag} {path}: steps ran first: {result.stdout!r}")
    # Files inside a checkpoint directory the run creates are fine.
    inside = t.path("ckpt-with-outputs")
    t.train("train.kiln", "--checkpoint-dir", inside, "--metrics",
            os.path.join(inside, "m.jsonl"), "--save-params",
            os.path.join(inside, "final.safetensors"), steps=2)
    t.check(os.path.exists(os.path.join(inside, "final.safetensors")) and
            len(read_metrics(os.path.join(inside, "m.jsonl"))) == 2,
            "outputs inside the checkpoint directory were not written")
    # Before the inputs are even read.
    t.expect_error([f"--outputs {missing}: its directory"], t.path("multi.kiln"),
                   "--entry", "affine", "--inputs", t.path("absent.npz"),
                   "--outputs", missing)


def test_checkpoint_directory_is_locked(t):
    """A second run given a directory a running one uses is refused at
    once, naming the first; the lock goes with its process, even killed."""
    directory = t.path("ckpt-locked")
    first = subprocess.Popen(
        [t.kiln_run, t.path("train.kiln"), "--data", t.path("toy7.npz"),
         "--steps", "1000000000", "--checkpoint-dir", directory,
         "--checkpoint-every", "1000000", "--log-every", "1000000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lock = os.path.join(directory, "kiln-run.lock")
    for _ in range(600):
        if os.path.exists(lock) and os.path.getsize(lock) > 0:
            break
        time.sleep(0.05)
    try:
        t.expect_error([f"--checkpoint-dir {directory} is in use by another "
                        f"run (kiln-run process {first.pid} on "],
                       t.path("train.kiln"), "--data", t.path("toy7.npz"),
                       "--steps", "2", "--checkpoint-dir", directory,
                       "--resume")
    finally:
        first.kill()
        first.wait()
    # Killed before its first checkpoint: nothing to resume, and a fresh
    # run takes the directory.
    t.train("train.kiln", "--checkpoint-dir", directory, steps=2)
    t.check(os.path.exists(os.path.join(directory, "step-2.json")),
            "no checkpoint after the lock was freed")


def test_stale_temporaries_are_removed(t):
    directory = t.path("ckpt-stale")
    t.train("train.kiln", "--checkpoint-dir", directory, steps=2)
    stale = ["step-4.safetensors.tmp.999999.0", "step-4.json.tmp.12.3",
             "latest.tmp.7.0"]
    kept = ["notes.txt", "step-4.json.tmp.x.0", "other.tmp.1.2"]
    for name in stale + kept:
        with open(os.path.join(directory, name), "w") as f:
            f.write("partial")
    result = t.train("train.kiln", "--checkpoint-dir", directory, "--resume",
                     steps=4)
    t.check("kiln-run: note: removed 3 temporary files that an interrupted "
            f"run left in {directory}" in result.stderr,
            f"note on stale files: {result.stderr!r}")
    left = set(os.listdir(directory))
    t.check(not left & set(stale), f"stale files left: {left & set(stale)}")
    t.check(set(kept) <= left, f"other files removed: {set(kept) - left}")


def test_keep_checkpoints(t):
    directory = t.path("ckpt-keep")
    t.train("train.kiln", "--checkpoint-dir", directory, "--checkpoint-every",
            "1", "--keep-checkpoints", "2", steps=3)
    t.check(checkpoint_files(directory) ==
            ["latest", "step-2.json", "step-2.safetensors", "step-3.json",
             "step-3.safetensors"],
            f"kept checkpoints {checkpoint_files(directory)}")
    t.train("train.kiln", "--checkpoint-dir", directory, "--checkpoint-every",
            "2", "--keep-checkpoints", "1", "--resume", steps=6)
    t.check(checkpoint_files(directory) ==
            ["latest", "step-6.json", "step-6.safetensors"],
            f"kept after resuming {checkpoint_files(directory)}")
    t.expect_error(["--keep-checkpoints needs --checkpoint-dir DIR"],
                   t.path("train.kiln"), "--data", t.path("toy7.npz"),
                   "--steps", "2", "--keep-checkpoints", "2")
    t.expect_error(["--keep-checkpoints takes a positive count, not '0'"],
                   t.path("train.kiln"), "--keep-checkpoints", "0")


def test_nonfinite_losses(t):
    """Sample 4 is NaN: the second batch ([3, 4, 5], unshuffled) has a NaN
    loss. Reported once as a warning; --halt-on-nonfinite stops at it with
    the checkpoints of the steps before."""
    values = (2.0 ** np.arange(7)).astype(np.float32)
    values[4] = np.nan
    data = t.save("toy7-nan.npz", x=values)
    result = t.expect_ok(t.path("train.kiln"), "--data", data, "--steps", "4",
                         "--no-shuffle")
    warnings = [line for line in result.stderr.splitlines()
                if line.startswith("kiln-run: warning:")]
    t.check(warnings == ["kiln-run: warning: step 2: the loss is nan (the "
                         "first such step); the parameters may no longer be "
                         "finite; --halt-on-nonfinite stops a run there"],
            f"non-finite warning: {result.stderr!r}")
    directory = t.path("ckpt-nan")
    t.expect_error([f"step 2: the loss is nan; stopped by --halt-on-nonfinite "
                    f"(the checkpoints in {directory} are those of earlier "
                    "steps)"],
                   t.path("train.kiln"), "--data", data, "--steps", "4",
                   "--no-shuffle", "--checkpoint-dir", directory,
                   "--checkpoint-every", "1", "--halt-on-nonfinite",
                   "--save-params", t.path("nan.safetensors"))
    t.check(checkpoint_files(directory) ==
            ["latest", "step-1.json", "step-1.safetensors"],
            f"checkpoints after the halt {checkpoint_files(directory)}")
    t.check(not os.path.exists(t.path("nan.safetensors")),
            "a halted run wrote --save-params")
    values[4] = np.inf
    data = t.save("toy7-inf.npz", x=values)
    t.expect_error(["step 2: the loss is inf; stopped by --halt-on-nonfinite"],
                   t.path("train.kiln"), "--data", data, "--steps", "4",
                   "--no-shuffle", "--halt-on-nonfinite")
    t.expect_error(["--halt-on-nonfinite is for training"],
                   t.path("train.kiln"), "--halt-on-nonfinite")


def test_data_and_bundle_files(t):
    """--data refuses an array no input takes, as --inputs does; a FIFO
    given as the bundle is refused, not waited on."""
    data = t.save("toy7-extra.npz",
                  x=(2.0 ** np.arange(7)).astype(np.float32),
                  labels=np.zeros(7, np.int64))
    t.expect_error([f"{data}: array 'labels' is not an input of entry point "
                    "'train_step' (its inputs: x)"],
                   t.path("train.kiln"), "--data", data, "--steps", "1")
    fifo = t.path("bundle.fifo")
    os.mkfifo(fifo)
    t.expect_error([f"{fifo}: not a regular file (a FIFO)"], fifo, "--info")


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
    save_npz(t.path("toy7.npz"), dict(x=(2.0 ** np.arange(7)).astype(np.float32)))
    tests = [test_help, test_info, test_single_entry_is_the_default,
             test_hybrid_bundle_targets,
             test_affine_from_compressed_inputs, test_mixed_types,
             test_repeat_reports_timing, test_array_errors,
             test_unsupported_npy, test_command_line_errors,
             test_damaged_bundles, test_train_wraps_epochs,
             test_train_drop_last, test_train_shuffled_stream_uses_every_sample,
             test_train_without_lr_output, test_train_grad_accum,
             test_train_progress_line_on_a_terminal,
             test_checkpoints_and_resume, test_resume_after_a_kill,
             test_checkpoint_refusals, test_outputs_checked_before_training,
             test_checkpoint_directory_is_locked,
             test_stale_temporaries_are_removed, test_keep_checkpoints,
             test_nonfinite_losses, test_data_and_bundle_files]
    return run_tests(t, tests, "kiln-run tests")


if __name__ == "__main__":
    sys.exit(main())
