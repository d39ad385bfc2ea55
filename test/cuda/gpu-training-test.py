"""Training parity on a GPU: the GPT-2-style and BERT-style test models
(the latter also with Hugging Face's lowest-float, masked_fill and causal
masks),
compiled with `kilnc --target=cpu,cuda`, train the same steps on the same
batches with `kiln-run --target cuda` and `--target cpu`; every step's loss
and the final parameters must agree, and both must match torch.optim's
(prepared by test/e2e/compare_training.py). Beside them, where kilnc has the
flags:

- bf16: a `--target=cuda --amp=bf16` bundle of each model trains on the GPU
  against the fp32 CPU run within bf16 tolerances.
- fp16: a `--target=cuda --amp=fp16` bundle of the GPT-2-style model trains
  eight SGD steps with a dynamic loss scale against its own PyTorch
  reference (compare_training.py --fp16-matmul --loss-scale: f16-rounded
  product operands, GradScaler's rules): every step's loss, every step's loss
  scale (exactly) and the final parameters.
- data-parallel: a `--target=cpu,cuda --data-parallel --bucket-bytes=65536`
  bundle of the GPT-2-style model trains on one rank (on the GPU a NCCL
  communicator of one) and must train exactly as the plain bundle on the
  same target: the same losses and bit-identical parameters and optimizer
  state, since an average over one rank is the value itself and prepare
  checks that both bundles hold the same CUDA code. Its sharded variant
  (`--shard-optimizer=1`: on the GPU an NCCL reduce-scatter, a local shard
  copy and an all-gather per bucket) must match the plain bundle's losses
  within 1e-4 and torch.optim's final parameters.

Two phases, so that a GPU machine that cannot build Kiln can run the check:

    gpu-training-test.py prepare --kilnc KILNC --kiln-run KILN_RUN
        --work-dir DIR [--models gpt2,bert,...] [--no-bf16] [--no-fp16]
        [--no-data-parallel] [--python PY]
    gpu-training-test.py check --kiln-run KILN_RUN --work-dir DIR
        [--out OUT] [--target cuda|cpu]
    gpu-training-test.py all --kilnc KILNC --kiln-run KILN_RUN --work-dir DIR

`prepare` (a build machine with PyTorch; no GPU needed) writes to DIR the
references (torch.optim's losses and final parameters; for fp16 also its loss
scales, in DIR/fp16/), the training data, the bundles, the CPU target's run of
the fp32 bundle and the initial parameters, and DIR/parity.json describing
them. `check` needs only kiln-run, NumPy and DIR: it trains on the GPU and
compares; its files go to OUT (default DIR/check). `--target cpu` runs the
check's fp32 and data-parallel comparisons on the CPU target instead (the
bf16 and fp16 bundles, which are CUDA-only, and the CUDA-graph comparison are
left out, saying so): it exercises the check without a GPU. `all` (ctest's)
checks for a GPU, then runs both.

`check` ends with one line per group of checks, `result GROUP: ok (N
checks)`, `result GROUP: FAILED (...)` or `result GROUP: skipped (why)`, for
fp32, bf16, fp16 and data-parallel (scripts/gpu-check.sh reports them).

Without a GPU (no libcuda.so.1, no device, or kiln-run saying the target
cannot run) `check` and `all` print `SKIPPED: <reason>` and exit 77, which
ctest counts as a skip (SKIP_RETURN_CODE). Exit 1 on any disagreement or tool
failure.
"""
import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from kiln_test_io import read_safetensors, save_npz  # noqa: E402

SKIP = 77

# What each model trains, as test/e2e/train-adamw-{gpt2,bert}.test does:
# prepare arguments, kilnc arguments, and the parameters left out of the
# parameter checks. Those biases get an exactly zero gradient (a bias added
# to every key shifts each row of scores equally, which softmax ignores), so
# every implementation sees only rounding noise there and Adam's
# normalisation turns that noise into updates of up to lr per step, of
# either sign.
MODELS = {
    "gpt2": dict(
        prepare=["--optimizer", "adamw", "--lr", "3e-3", "--weight-decay",
                 "0.01", "--steps", "12", "--batch", "8"],
        kilnc=["--batch-size=8", "--optimizer=adamw", "--lr=3e-3",
               "--weight-decay=0.01", "--loss-output=loss"],
        steps=12, exclude=r"attn[.]qkv[.]bias$"),
    "bert": dict(
        prepare=["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay",
                 "0.01", "--steps", "10", "--batch", "4"],
        kilnc=["--batch-size=4", "--optimizer=adamw", "--lr=1e-3",
               "--weight-decay=0.01"],
        steps=10, exclude=r"attention[.]key[.]bias$"),
}
# The BERT-style model with Hugging Face's masks, each batch's second row
# padding alone (compare_training.py --masking): BERT's additive lowest
# float, DistilBERT's masked_fill(padding, lowest), whose attention is
# masked_fill, and GPT-2's causal where() plus the padding mask (the third
# row padded on the left), whose attention is causal_fill. `model` is the
# compare_training.py model a variant prepares. One element of the
# pooler's weight ends 5.1e-5 from torch.optim's with the lowest and fill
# masks on the CPU target (every other within 1e-5; the losses within
# 1.4e-6): Adam moves it a full step on a gradient near 0, of a sign the
# summation order decides, as bert's one element of 1.2e-5 (hence
# torch_param_atol, the parameters' tolerance against torch.optim).
for _masking in ("lowest", "fill", "causal"):
    MODELS["bert-" + _masking] = dict(
        MODELS["bert"], model="bert", torch_param_atol=1e-4,
        prepare=MODELS["bert"]["prepare"] + ["--masking", _masking])

# fp16 (kilnc --amp=fp16), the GPT-2-style model only, as the last block of
# test/e2e/train-cuda-emulated.test (the CPU emulation of the same CUDA
# kernels): eight SGD steps from a loss scale of 2^20 that doubles after
# every 2 finite updates, so it reaches 2^21 at step 3, where the
# activations' gradients, scaled by it and stored in f16 (kiln-amp), pass
# f16's 65504: that update is skipped and the scale halves (again at step
# 6). Its own
# reference, in DIR/fp16/: compare_training.py with f16-rounded product
# operands and GradScaler's rules.
FP16 = dict(
    model="gpt2",
    prepare=["--optimizer", "sgd", "--lr", "0.1", "--steps", "8", "--batch",
             "8", "--fp16-matmul", "--loss-scale", "1048576",
             "--loss-scale-growth-interval", "2"],
    kilnc=["--target=cuda", "--amp=fp16", "--batch-size=8",
           "--optimizer=sgd", "--lr=0.1", "--loss-output=loss",
           "--loss-scale=1048576", "--loss-scale-growth-interval=2"],
    steps=8)

# Data parallelism on one rank, the GPT-2-style model: its fp32 training
# (MODELS) with gradients averaged bucket by bucket; 64 KiB buckets, so that
# its 86 tensors make many all-reduces. Both targets, as the plain bundle,
# so that check --target cpu exercises the comparison too.
DATA_PARALLEL = dict(model="gpt2",
                     kilnc=["--target=cpu,cuda", "--data-parallel",
                            "--bucket-bytes=65536"])

# fp32: the GPU and CPU run the same algorithm in the same precision, but
# not the same order of additions (cuBLASLt's tiling and split reductions
# against OpenBLAS's, one thread per point against vectorised loops), so
# results differ by rounding, which 12 Adam steps amplify only a little.
FP32_LOSS_RTOL = 1e-4
FP32_PARAM_RTOL, FP32_PARAM_ATOL = 1e-4, 1e-5
# Against torch.optim, the tolerances of test/e2e/train-adamw-*.test.
TORCH_LOSS_RTOL = 2e-3
TORCH_PARAM_RTOL, TORCH_PARAM_ATOL = 1e-4, 1e-5
# bf16 (8-bit significand): each operand of a matrix product is rounded to
# a relative 2^-9 (about 0.2%) before the f32 accumulation. A mean loss over
# all tokens averages those errors down to well below that, and over 10-12
# steps the bf16 trajectory drifts from the f32 one by a fraction of a
# percent on these models; 2e-2 relative leaves room for that drift while
# still catching a wrong gradient or update, which moves the losses of these
# runs by far more (they fall by 10-40% over the run).
BF16_LOSS_RTOL = 2e-2
# bf16 parameters: the f32 master weights get AdamW updates of about lr per
# element per step whatever the gradient's size, so an element whose
# gradient is near zero can take a step of the other sign on the other side.
# Compared per tensor: the norm of the difference of the two updates
# (final - initial) against the norm of the f32 update. A wrong gradient
# gives a ratio near or above 1.
BF16_UPDATE_RATIO = 0.35
# fp16 against its reference: the same arithmetic (products of f16-rounded
# operands accumulated in f32, f32 everywhere else, the same loss scales), so
# only the order of additions differs; where it moves an operand across an
# f16 rounding boundary, that operand moves by one f16 step (2^-11
# relative). Attention differs a little more: its tensor-core kernels round
# the probabilities before normalizing them, the reference after. The CPU
# emulation of the same kernels (attention through the kernels' host
# version) matched this reference within 7.3e-6 relative (losses) and 2e-5
# absolute (parameters; with attention as loops, 1.9e-5 and 1.7e-5), and
# within 2.7e-5 and 2.9e-5 since the products store their activations in
# f16 (kiln-amp; the reference rounds the same results), and
# train-cuda-emulated.test allows 2e-4 and rtol 1e-3 atol 1e-4; the GPU's
# cuBLASLt sums in yet another order, so these allow five times that. The
# fp32 reference (no rounding, no skipped update) is 0.1 off in the losses
# and 0.07 in the parameters, and the run's updates reach 0.6: a wrong
# gradient, scale or skip is far outside.
FP16_LOSS_RTOL = 1e-3
FP16_PARAM_RTOL, FP16_PARAM_ATOL = 5e-3, 5e-4
# Data parallelism on one rank: with the plain bundle's kernels (prepare
# compares the CUDA code; the all-reduces are commands, not kernels) the runs
# must be identical, bit for bit, unless the kernels add atomically (the
# scatter-adds of embedding gradients: their order differs from run to run).
# Should the code differ, or add atomically, the comparison falls back to
# this tolerance.
DATA_PARALLEL_RTOL = 1e-4

GROUPS = ("fp32", "bf16", "fp16", "data-parallel")


def skip(reason):
    print("SKIPPED: %s" % reason, flush=True)
    sys.exit(SKIP)


def cuda_devices():
    """(device count, None) from the driver API, or (0, why not)."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return 0, "no NVIDIA driver (%s)" % error
    status = driver.cuInit(0)
    if status != 0:
        return 0, "cuInit failed with CUresult %d" % status
    count = ctypes.c_int(0)
    status = driver.cuDeviceGetCount(ctypes.byref(count))
    if status != 0:
        return 0, "cuDeviceGetCount failed with CUresult %d" % status
    if count.value == 0:
        return 0, "the NVIDIA driver finds no CUDA device"
    return count.value, None


def run(command, log, env=None, timeout=600):
    """Runs command, appends it and its output to the log; returns
    (exit code, stdout + stderr)."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True,
                            env=env, timeout=timeout)
    output = result.stdout + result.stderr
    with open(log, "a") as f:
        f.write("$ %s\n%s(exit %d, %.1f s)\n\n" % (
            " ".join(command), output, result.returncode,
            time.perf_counter() - start))
    return result.returncode, output


def cannot_run_cuda(output):
    """kiln-run's messages for a machine where the CUDA target cannot run."""
    return re.search(r"needs an NVIDIA driver|no CUDA device|built without "
                     r"CUDA", output)


class Checker:
    """The checks' outcomes, by group (GROUPS), and why a group did not
    run."""

    def __init__(self):
        self.failures = []
        self.counts = {group: 0 for group in GROUPS}
        self.failed = {group: [] for group in GROUPS}
        self.skipped = {}

    def expect(self, ok, message, group="fp32"):
        print(("ok: " if ok else "FAIL: ") + message, flush=True)
        self.counts[group] += 1
        if not ok:
            self.failures.append(message)
            self.failed[group].append(message)

    def skip(self, group, why):
        print("note: %s not tested: %s" % (group, why), flush=True)
        self.skipped.setdefault(group, why)

    def print_results(self):
        """One `result GROUP: ...` line per group."""
        for group in GROUPS:
            failed, count = self.failed[group], self.counts[group]
            if failed:
                line = "FAILED (%d of %d checks: %s)" % (
                    len(failed), count, failed[0][:300])
            elif count:
                line = "ok (%d checks)" % count
            else:
                line = "skipped (%s)" % self.skipped.get(group, "not run")
            print("result %s: %s" % (group, line), flush=True)


def losses_of(metrics_path, column="loss"):
    """A column of kiln-run's --metrics records, one value per step."""
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [float("nan") if r.get(column) is None else float(r[column])
            for r in records]


def read_values(path):
    with open(path) as f:
        return [float(x) for x in f.read().split()]


def compare_losses(check, what, got, want, rtol, group="fp32"):
    if len(got) != len(want):
        check.expect(False, "%s: %d losses, %d expected" % (
            what, len(got), len(want)), group)
        return
    got, want = np.array(got, np.float64), np.array(want, np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    worst = int(np.argmax(rel))
    check.expect(bool(np.all(rel <= rtol)),
                 "%s: %d losses, largest relative difference %.3g at step %d "
                 "(%.7g vs %.7g), tolerance %g" % (
                     what, len(got), rel[worst], worst + 1, got[worst],
                     want[worst], rtol), group)


def compare_params(check, what, got, want, exclude, rtol, atol,
                   group="fp32"):
    bad = []
    compared = 0
    worst, worst_name = 0.0, "-"
    for name, expected in want.items():
        if exclude and re.search(exclude, name):
            continue
        compared += 1
        actual = got.get(name)
        if actual is None or actual.shape != expected.shape:
            bad.append("%s missing or misshaped" % name)
            continue
        diff = float(np.abs(actual.astype(np.float64) - expected).max(
            initial=0.0))
        if diff > worst:
            worst, worst_name = diff, name
        if not np.allclose(actual, expected, rtol=rtol, atol=atol):
            bad.append("%s (max abs diff %.3g)" % (name, diff))
    check.expect(not bad and compared > 0,
                 "%s: %d parameters within rtol %g atol %g, largest absolute "
                 "difference %.3g (%s)%s" % (
                     what, compared - len(bad), rtol, atol, worst, worst_name,
                     "; differ: " + ", ".join(bad[:8]) if bad else ""), group)


def scales_text(scales):
    """Loss scales as powers of two where they are."""
    def one(scale):
        mantissa, exponent = np.frexp(scale)
        return "2^%d" % (exponent - 1) if mantissa == 0.5 else "%.9g" % scale
    return "[%s]" % " ".join(one(s) for s in scales)


def compare_loss_scales(check, what, got, want):
    """Every step's loss scale, exactly; on a difference, both sequences
    and the first step where they part."""
    if got == want:
        check.expect(True, "%s: %d loss scales equal %s" % (
            what, len(got), scales_text(got)), "fp16")
        return
    first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
                 min(len(got), len(want)))
    check.expect(False, "%s: the loss scale sequence differs from step %d: "
                 "kiln %s, torch %s (an overflow or growth at another step; "
                 "the losses and parameters from there on cannot agree)" % (
                     what, first + 1, scales_text(got), scales_text(want)),
                 "fp16")


def compare_identical(check, what, got_losses, want_losses, got_params,
                      want_params, rtol=None, exclude=None):
    """Losses and every saved tensor (parameters and optimizer state) equal
    bit for bit; with rtol, within it instead, leaving out the tensors
    `exclude` matches (the biases whose gradient is rounding noise, which
    Adam turns into updates of either sign when the summation order
    differs, as atomic additions' does from run to run)."""
    if rtol is None:
        ok = got_losses == want_losses
        detail = "equal" if ok else "differ"
    else:
        ok = len(got_losses) == len(want_losses) and np.allclose(
            got_losses, want_losses, rtol=rtol, atol=0)
        detail = "within rtol %g" % rtol
    if not ok and len(got_losses) == len(want_losses) and got_losses:
        rel = [abs(g - w) / max(abs(w), 1e-30)
               for g, w in zip(got_losses, want_losses)]
        step = int(np.argmax(rel))
        detail += ", largest relative difference %.3g at step %d (%.9g vs " \
            "%.9g)" % (rel[step], step + 1, got_losses[step],
                       want_losses[step])
    check.expect(ok, "%s: %d losses %s" % (what, len(got_losses), detail),
                 "data-parallel")
    names = sorted(set(got_params) | set(want_params))
    left_out = []
    if rtol is not None and exclude:
        left_out = [n for n in names if re.search(exclude, n)]
        names = [n for n in names if n not in left_out]
    differ = []
    for name in names:
        a, b = got_params.get(name), want_params.get(name)
        if a is None or b is None or a.shape != b.shape:
            differ.append("%s missing or misshaped" % name)
        elif rtol is None and not np.array_equal(a, b):
            differ.append("%s (max abs diff %.3g)" % (name, float(np.abs(
                a.astype(np.float64) - b).max())))
        elif rtol is not None and not np.allclose(a, b, rtol=rtol,
                                                  atol=1e-7):
            differ.append("%s (max abs diff %.3g)" % (name, float(np.abs(
                a.astype(np.float64) - b).max())))
    check.expect(bool(names) and not differ, "%s: %d of %d tensors "
                 "(parameters and optimizer state) %s%s" % (
                     what, len(names) - len(differ), len(names),
                     "bit-identical" if rtol is None else
                     "within rtol %g atol 1e-7" % rtol + (
                         " (%d left out: %s)" % (len(left_out), exclude)
                         if left_out else ""),
                     "; differ: " + ", ".join(differ[:8]) if differ else ""),
                 "data-parallel")


def compare_updates(check, what, got, reference, initial, exclude, ratio):
    """Per tensor, |(got - initial) - (reference - initial)| / |reference -
    initial| (Frobenius norms) at most ratio."""
    worst, worst_name, bad, compared = 0.0, "", [], 0
    for name, ref in reference.items():
        if exclude and re.search(exclude, name) or name not in initial:
            continue
        compared += 1
        actual = got.get(name)
        if actual is None or actual.shape != ref.shape:
            bad.append("%s missing or misshaped" % name)
            continue
        update = ref.astype(np.float64) - initial[name]
        norm = np.linalg.norm(update)
        if norm == 0:
            continue
        r = np.linalg.norm(actual.astype(np.float64) - ref) / norm
        if r > worst:
            worst, worst_name = r, name
        if r > ratio:
            bad.append("%s (%.3g)" % (name, r))
    check.expect(not bad and compared > 0,
                 "%s: %d updates within %g of the f32 CPU run's, worst %.3g "
                 "(%s)%s" % (what, compared - len(bad), ratio, worst,
                             worst_name or "-",
                             "; differ: " + ", ".join(bad[:8]) if bad else ""),
                 "bf16")


def initial_params(onnx_path):
    """The model's initial parameters: the ONNX initializers, which kilnc
    makes the bundle's parameters under the same names."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(onnx_path)
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def load_arrays(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def train(kiln_run, work_dir, out_dir, log, bundle, data, steps, target, tag,
          extra_env=None):
    """Trains bundle (a path in work_dir) for steps steps on data (a path in
    work_dir), writing OUT_DIR/TAG.jsonl and TAG.safetensors; returns
    kiln-run's exit code and output, and the metrics file and final
    parameters (None, None when it failed)."""
    metrics = os.path.join(out_dir, tag + ".jsonl")
    params = os.path.join(out_dir, tag + ".safetensors")
    for path in (metrics, params):
        if os.path.exists(path):
            os.remove(path)
    command = [kiln_run, os.path.join(work_dir, bundle), "--target", target,
               "--data", os.path.join(work_dir, data), "--steps", str(steps),
               "--no-shuffle", "--metrics", metrics, "--save-params", params]
    code, output = run(command, log, env=dict(os.environ, **(extra_env or {})))
    if code:
        return code, output, None, None
    return code, output, metrics, read_safetensors(params)


def cuda_code(bundle):
    """The bundle's CUDA code sections (cubins and PTX), {name: bytes}."""
    e2e = os.path.join(ROOT, "test", "e2e")
    if e2e not in sys.path:
        sys.path.insert(0, e2e)
    from check_cuda_bundle import CUBIN, PTX, sections
    with open(bundle, "rb") as f:
        data = f.read()
    return {name: body for kind, name, body in sections(data)
            if kind in (CUBIN, PTX)}


def kilnc_features(args, log):
    """{feature: None when kilnc has it and it is wanted, else why not} for
    bf16, fp16 and data-parallel, from kilnc --help."""
    code, text = run([args.kilnc, "--help"], log)
    text = text if code == 0 else ""
    has = {"bf16": "=bf16" in text and "--amp" in text,
           "fp16": "=fp16" in text and "--loss-scale" in text,
           "data-parallel": "--data-parallel" in text and
           "--bucket-bytes" in text}
    flags = {"bf16": "--amp=bf16", "fp16": "--amp=fp16 and --loss-scale",
             "data-parallel": "--data-parallel and --bucket-bytes"}
    unwanted = {"bf16": args.no_bf16, "fp16": args.no_fp16,
                "data-parallel": args.no_data_parallel}
    features = {}
    for feature in has:
        if unwanted[feature]:
            features[feature] = "prepared with --no-%s" % feature
        elif not has[feature]:
            features[feature] = ("this kilnc has no %s (kilnc --help does "
                                 "not list it)" % flags[feature])
        else:
            features[feature] = None
    return features


def prepare(args):
    """Writes the references, data, bundles and CPU runs to args.work_dir;
    returns the exit code."""
    start = time.perf_counter()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    log = os.path.join(args.work_dir, "prepare.log")
    print("preparing in %s; commands and their output in %s"
          % (args.work_dir, log), flush=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "test", "lib"))
    compare_training = os.path.join(ROOT, "test", "e2e", "compare_training.py")
    features = kilnc_features(args, log)
    kilnc_help = run([args.kilnc, "--help"], log)[1]
    for feature, why in features.items():
        if why:
            print("note: %s not prepared: %s" % (feature, why), flush=True)
    models = [m for m in args.models.split(",") if m]

    def reference(name, directory, flags, model=None):
        """Prepares compare_training.py's `model` (default `name`); its
        files go to directory as NAME-loss.onnx, NAME-train.npz, ..."""
        model = model or name
        where = (directory if model == name
                 else os.path.join(directory, "." + name))
        os.makedirs(where, exist_ok=True)
        code, output = run([args.python, compare_training, "prepare", model,
                            where] + flags, log, env=env)
        if code:
            raise RuntimeError("compare_training.py prepare %s %s failed: %s"
                               % (model, " ".join(flags),
                                  output.strip()[-2000:]))
        if where != directory:
            for file in os.listdir(where):
                if file.startswith(model + "-"):
                    os.replace(os.path.join(where, file), os.path.join(
                        directory, name + file[len(model):]))
            shutil.rmtree(where)
        return os.path.join(directory, name + "-loss.onnx")

    def compile_bundle(onnx, flags, bundle):
        code, output = run([args.kilnc, onnx] + flags + ["-o", os.path.join(
            args.work_dir, bundle)], log)
        if code:
            raise RuntimeError("kilnc %s failed: %s" % (
                " ".join(flags), output.strip()[-2000:]))
        return bundle

    def prepare_and_compile(name):
        """The reference and the bundles of one model; returns
        {bundle kind: file name in work_dir} or raises RuntimeError."""
        spec = MODELS[name]
        onnx = reference(name, args.work_dir, spec["prepare"],
                         spec.get("model"))
        bundles = {"fp32": ["--target=cpu,cuda"]}
        if not features["bf16"]:
            bundles["bf16"] = ["--target=cuda", "--amp=bf16"]
        if not features["data-parallel"] and name == DATA_PARALLEL["model"]:
            bundles["data-parallel"] = DATA_PARALLEL["kilnc"]
            if "--shard-optimizer" in kilnc_help:
                bundles["sharded"] = DATA_PARALLEL["kilnc"] + [
                    "--shard-optimizer=1"]
        files = {}
        for kind, flags in bundles.items():
            files[kind] = compile_bundle(
                onnx, flags + spec["kilnc"],
                "%s%s.kiln" % (name, "" if kind == "fp32" else "-" + kind))
        save_npz(os.path.join(args.work_dir, name + "-initial.npz"),
                 initial_params(onnx))
        os.remove(onnx)  # check needs no ONNX (nor the onnx package)
        return files

    def prepare_fp16():
        """The fp16 reference and bundle in work_dir/fp16/; returns their
        parity.json entry or raises RuntimeError."""
        name = FP16["model"]
        directory = os.path.join(args.work_dir, "fp16")
        os.makedirs(directory)
        onnx = reference(name, directory, FP16["prepare"])
        entry = dict(model=name, steps=FP16["steps"],
                     bundle=compile_bundle(onnx, FP16["kilnc"],
                                           "fp16/%s.kiln" % name),
                     data="fp16/%s-train.npz" % name,
                     losses="fp16/%s-losses.txt" % name,
                     loss_scales="fp16/%s-loss-scales.txt" % name,
                     final="fp16/%s-final.npz" % name,
                     kilnc=" ".join(FP16["kilnc"]),
                     reference="compare_training.py prepare %s %s" % (
                         name, " ".join(FP16["prepare"])))
        os.remove(onnx)
        return entry

    # The compiles are the slow part; one thread per model and for fp16.
    with ThreadPoolExecutor(max_workers=len(models) + 1) as pool:
        futures = {name: pool.submit(prepare_and_compile, name)
                   for name in models}
        fp16 = (pool.submit(prepare_fp16) if not features["fp16"] and
                FP16["model"] in models else None)
    if not features["fp16"] and FP16["model"] not in models:
        features["fp16"] = "%s is not among --models" % FP16["model"]
    if not features["data-parallel"] and DATA_PARALLEL["model"] not in models:
        features["data-parallel"] = ("%s is not among --models"
                                     % DATA_PARALLEL["model"])
    manifest = dict(models={}, kilnc=args.kilnc,
                    not_prepared={k: v for k, v in features.items() if v})
    failed = False
    for name, future in futures.items():
        try:
            bundles = future.result()
        except RuntimeError as error:
            print("FAIL: %s" % error, flush=True)
            failed = True
            continue
        steps = MODELS[name]["steps"]
        # The CPU target's run of the fp32 bundle, the GPU run's reference.
        code, output, _, _ = train(args.kiln_run, args.work_dir,
                                   args.work_dir, log, bundles["fp32"],
                                   name + "-train.npz", steps, "cpu",
                                   name + "-cpu")
        if code:
            print("FAIL: %s: kiln-run --target cpu failed: %s"
                  % (name, output.strip()[-2000:]), flush=True)
            failed = True
            continue
        entry = dict(bundles=bundles, steps=steps)
        if "data-parallel" in bundles:
            # With the same kernels, one rank must train bit for bit as the
            # plain bundle; check falls back to a tolerance otherwise.
            plain = cuda_code(os.path.join(args.work_dir, bundles["fp32"]))
            # The PTX says whether a kernel adds atomically.
            atomic = any(re.search(rb"\b(atom|red)\.global", body)
                         for code_name, body in plain.items()
                         if "compute_" in code_name)
            entry["data_parallel_same_cuda_code"] = not atomic and plain == (
                cuda_code(os.path.join(args.work_dir,
                                       bundles["data-parallel"])))
            print("%s: the data-parallel bundle's CUDA code is %s the plain "
                  "bundle's%s" % (name, "identical to" if plain == cuda_code(
                      os.path.join(args.work_dir, bundles["data-parallel"]))
                      else "not that of",
                      " and adds atomically" if atomic else ""),
                  flush=True)
        manifest["models"][name] = entry
    if fp16 is not None:
        try:
            manifest["fp16"] = fp16.result()
        except RuntimeError as error:
            print("FAIL: fp16: %s" % error, flush=True)
            failed = True
    with open(os.path.join(args.work_dir, "parity.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("prepared %s in %.1f s" % (", ".join(
        list(manifest["models"]) + (["fp16"] if "fp16" in manifest else []))
        or "nothing", time.perf_counter() - start), flush=True)
    return 1 if failed else 0


def check(args):
    """Trains the prepared bundles on args.target and compares; returns the
    exit code (SKIP where the GPU cannot be used)."""
    gpu = args.target == "cuda"
    if gpu:
        count, why = cuda_devices()
        if not count:
            skip(why)
        print("%d CUDA device(s)" % count, flush=True)
    else:
        print("note: --target cpu: the fp32 and data-parallel bundles train "
              "on the CPU target (this checks the check, not the GPU); the "
              "bf16 and fp16 bundles and the CUDA-graph comparison are left "
              "out", flush=True)
    try:
        with open(os.path.join(args.work_dir, "parity.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as error:
        print("FAIL: %s has no readable parity.json (run the prepare phase "
              "first): %s" % (args.work_dir, error))
        return 1
    out = args.out or os.path.join(args.work_dir, "check")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "commands.log")
    if os.path.exists(log):
        os.remove(log)
    print("commands and their output in %s" % log, flush=True)
    start = time.perf_counter()
    check = Checker()
    for group, why in manifest.get("not_prepared", {}).items():
        check.skip(group, "not prepared: " + why)
    if not gpu:
        for group in ("bf16", "fp16"):
            check.skip(group, "--target cpu: its bundle is CUDA-only")

    def train_on(bundle, data, steps, target, tag, group, extra_env=None):
        """(metrics path, final parameters), or (None, None) after
        reporting the failure."""
        code, output, metrics, params = train(
            args.kiln_run, args.work_dir, out, log, bundle, data, steps,
            target, tag, extra_env)
        if code and target == "cuda" and cannot_run_cuda(output):
            skip("kiln-run cannot use the GPU: " + output.strip())
        if code:
            check.expect(False, "%s: kiln-run failed: %s" % (
                tag, output.strip()[-2000:]), group)
        return metrics, params

    for name, entry in manifest["models"].items():
        spec = MODELS[name]
        bundles = entry["bundles"]
        data, steps = name + "-train.npz", entry["steps"]
        torch_losses = read_values(os.path.join(args.work_dir,
                                                name + "-losses.txt"))
        torch_params = load_arrays(os.path.join(args.work_dir,
                                                name + "-final.npz"))
        cpu_losses = losses_of(os.path.join(args.work_dir,
                                            name + "-cpu.jsonl"))
        cpu_params = read_safetensors(os.path.join(
            args.work_dir, name + "-cpu.safetensors"))
        tag = args.target
        metrics, gpu_params = train_on(bundles["fp32"], data, steps,
                                       args.target, "%s-%s" % (name, tag),
                                       "fp32")
        gpu_losses = losses_of(metrics) if metrics else None
        if gpu_losses is not None:
            compare_losses(check, "%s fp32 losses, %s vs cpu" % (name, tag),
                           gpu_losses, cpu_losses, FP32_LOSS_RTOL)
            compare_params(check, "%s fp32 parameters, %s vs cpu"
                           % (name, tag), gpu_params, cpu_params,
                           spec["exclude"], FP32_PARAM_RTOL, FP32_PARAM_ATOL)
            compare_losses(check, "%s fp32 losses, %s vs torch.optim"
                           % (name, tag), gpu_losses, torch_losses,
                           TORCH_LOSS_RTOL)
            compare_params(check, "%s fp32 parameters, %s vs torch.optim"
                           % (name, tag), gpu_params, torch_params,
                           spec["exclude"], TORCH_PARAM_RTOL,
                           spec.get("torch_param_atol", TORCH_PARAM_ATOL))
        if gpu and name == "gpt2" and gpu_losses is not None:
            # The second run of an entry point captures a CUDA graph and
            # later runs replay it: the same commands run directly must give
            # the same numbers.
            metrics, _ = train_on(bundles["fp32"], data, steps, "cuda",
                                  name + "-cuda-nographs", "fp32",
                                  {"KILN_CUDA_GRAPHS": "0"})
            if metrics:
                compare_losses(check, "%s fp32 losses, CUDA graphs vs "
                               "KILN_CUDA_GRAPHS=0" % name, gpu_losses,
                               losses_of(metrics), 1e-6)
            # The bias gradients as cuBLASLt's epilogue (or, where it has
            # none, as second products) against second products everywhere:
            # the same sums in other orders.
            metrics, _ = train_on(bundles["fp32"], data, steps, "cuda",
                                  name + "-cuda-bias-grad-product", "fp32",
                                  {"KILN_CUDA_BIAS_GRAD": "product"})
            if metrics:
                compare_losses(check, "%s fp32 losses, bias-gradient "
                               "epilogues vs KILN_CUDA_BIAS_GRAD=product"
                               % name, gpu_losses, losses_of(metrics), 1e-5)
        if "data-parallel" in bundles and gpu_losses is not None:
            # One rank (on the GPU, a NCCL communicator of one) averages
            # each gradient over itself: the plain bundle's training.
            metrics, dp_params = train_on(
                bundles["data-parallel"], data, steps, args.target,
                "%s-%s-data-parallel" % (name, tag), "data-parallel")
            if metrics:
                exact = entry.get("data_parallel_same_cuda_code")
                if not exact:
                    print("note: prepare found the data-parallel bundle's "
                          "CUDA code different from the plain one's, or "
                          "adding atomically: compared within rtol %g, not "
                          "bit for bit" % DATA_PARALLEL_RTOL, flush=True)
                compare_identical(
                    check, "%s data-parallel (1 rank) vs plain, %s" % (
                        name, tag), losses_of(metrics), gpu_losses,
                    dp_params, gpu_params,
                    None if exact else DATA_PARALLEL_RTOL, spec["exclude"])
        if "sharded" in bundles and gpu_losses is not None:
            # The optimizer state sharded over one rank: the collectives
            # move each bucket whole, the update is the plain one's.
            metrics, sharded_params = train_on(
                bundles["sharded"], data, steps, args.target,
                "%s-%s-sharded" % (name, tag), "data-parallel")
            if metrics:
                what = "%s sharded optimizer (1 rank)" % name
                compare_losses(check, "%s losses vs plain, %s" % (what, tag),
                               losses_of(metrics), gpu_losses,
                               DATA_PARALLEL_RTOL, "data-parallel")
                compare_params(check, "%s parameters vs torch.optim, %s"
                               % (what, tag), sharded_params, torch_params,
                               spec["exclude"], TORCH_PARAM_RTOL,
                               TORCH_PARAM_ATOL, "data-parallel")
        if gpu and "bf16" in bundles:
            metrics, bf16_params = train_on(bundles["bf16"], data, steps,
                                            "cuda", name + "-cuda-bf16",
                                            "bf16")
            if metrics:
                compare_losses(check, "%s bf16 losses, cuda vs fp32 cpu"
                               % name, losses_of(metrics), cpu_losses,
                               BF16_LOSS_RTOL, "bf16")
                initial = load_arrays(os.path.join(args.work_dir,
                                                   name + "-initial.npz"))
                compare_updates(check, "%s bf16 parameters" % name,
                                bf16_params, cpu_params, initial,
                                spec["exclude"], BF16_UPDATE_RATIO)
    fp16 = manifest.get("fp16")
    if gpu and fp16:
        check_fp16(check, args.work_dir, fp16, train_on)
    if not manifest["models"]:
        check.expect(False, "parity.json lists no prepared model")

    seconds = time.perf_counter() - start
    check.print_results()
    if check.failures:
        print("%d check(s) failed in %.1f s; see %s" % (
            len(check.failures), seconds, log))
        return 1
    print("all checks passed in %.1f s" % seconds)
    return 0


def check_fp16(check, work_dir, fp16, train_on):
    """The fp16 bundle on the GPU against its reference: the losses, the
    loss scale of every step and the final parameters."""
    name = fp16["model"]
    metrics, params = train_on(fp16["bundle"], fp16["data"], fp16["steps"],
                               "cuda", name + "-cuda-fp16", "fp16")
    if not metrics:
        return
    what = "%s fp16, cuda vs torch (f16 products, GradScaler)" % name
    compare_loss_scales(check, what + " loss scales",
                        losses_of(metrics, "loss_scale"),
                        read_values(os.path.join(work_dir,
                                                 fp16["loss_scales"])))
    compare_losses(check, what + " losses", losses_of(metrics),
                   read_values(os.path.join(work_dir, fp16["losses"])),
                   FP16_LOSS_RTOL, "fp16")
    compare_params(check, what + " parameters", params,
                   load_arrays(os.path.join(work_dir, fp16["final"])), "",
                   FP16_PARAM_RTOL, FP16_PARAM_ATOL, "fp16")


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("phase", choices=["prepare", "check", "all"])
    parser.add_argument("--kilnc", help="needed by prepare and all")
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--out", help="check: where its runs and log go "
                        "(default: WORK_DIR/check)")
    parser.add_argument("--target", choices=["cuda", "cpu"], default="cuda",
                        help="check: the target the bundles train on "
                        "(cpu: exercises the check without a GPU)")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python with torch that prepares the "
                        "reference (default: this one)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--no-bf16", action="store_true",
                        help="leave out the --amp=bf16 bundles")
    parser.add_argument("--no-fp16", action="store_true",
                        help="leave out the --amp=fp16 bundle")
    parser.add_argument("--no-data-parallel", action="store_true",
                        help="leave out the --data-parallel bundle")
    args = parser.parse_args(argv)
    if args.phase != "check" and not args.kilnc:
        parser.error("%s needs --kilnc" % args.phase)
    if args.phase == "prepare":
        return prepare(args)
    if args.phase == "check":
        return check(args)
    # all: skip before the slow preparation when there is no GPU.
    count, why = cuda_devices()
    if not count:
        skip(why)
    return prepare(args) or check(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
