"""Training parity on a GPU: the GPT-2-style and BERT-style test models,
compiled with `kilnc --target=cpu,cuda`, train the same steps on the same
batches with `kiln-run --target cuda` and `--target cpu`; every step's loss
and the final parameters must agree, and both must match torch.optim's
(prepared by test/e2e/compare_training.py). Where kilnc has `--amp`, a second
bundle (`--target=cuda --amp=bf16`) trains on the GPU against the fp32 CPU
run within bf16 tolerances.

Two phases, so that a GPU machine that cannot build Kiln can run the check:

    gpu-training-test.py prepare --kilnc KILNC --kiln-run KILN_RUN
        --work-dir DIR [--models gpt2,bert] [--no-bf16] [--python PY]
    gpu-training-test.py check --kiln-run KILN_RUN --work-dir DIR
        [--out OUT] [--target cuda|cpu]
    gpu-training-test.py all --kilnc KILNC --kiln-run KILN_RUN --work-dir DIR

`prepare` (a build machine with PyTorch; no GPU needed) writes to DIR the
reference (torch.optim's losses and final parameters), the training data, the
bundles, the CPU target's run of the fp32 bundle and the initial parameters,
and DIR/parity.json describing them. `check` needs only kiln-run, NumPy and
DIR: it trains on the GPU and compares; its files go to OUT (default
DIR/check). `--target cpu` runs the check's fp32 comparisons on the CPU target
instead (the bf16 bundles and the CUDA-graph comparison are left out, saying
so): it exercises the check without a GPU. `all` (ctest's) checks for a GPU,
then runs both.

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
    def __init__(self):
        self.failures = []

    def expect(self, ok, message):
        print(("ok: " if ok else "FAIL: ") + message, flush=True)
        if not ok:
            self.failures.append(message)


def losses_of(metrics_path):
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [float("nan") if r["loss"] is None else float(r["loss"])
            for r in records]


def compare_losses(check, what, got, want, rtol):
    if len(got) != len(want):
        check.expect(False, "%s: %d losses, %d expected" % (what, len(got),
                                                            len(want)))
        return
    got, want = np.array(got, np.float64), np.array(want, np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    worst = int(np.argmax(rel))
    check.expect(bool(np.all(rel <= rtol)),
                 "%s: %d losses, largest relative difference %.3g at step %d "
                 "(%.7g vs %.7g), tolerance %g" % (
                     what, len(got), rel[worst], worst + 1, got[worst],
                     want[worst], rtol))


def compare_params(check, what, got, want, exclude, rtol, atol):
    bad = []
    compared = 0
    for name, expected in want.items():
        if exclude and re.search(exclude, name):
            continue
        compared += 1
        actual = got.get(name)
        if actual is None or actual.shape != expected.shape:
            bad.append("%s missing or misshaped" % name)
        elif not np.allclose(actual, expected, rtol=rtol, atol=atol):
            bad.append("%s (max abs diff %.3g)" % (name, float(np.abs(
                actual.astype(np.float64) - expected).max())))
    check.expect(not bad and compared > 0,
                 "%s: %d parameters within rtol %g atol %g%s" % (
                     what, compared - len(bad), rtol, atol,
                     "; differ: " + ", ".join(bad[:8]) if bad else ""))


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
                             "; differ: " + ", ".join(bad[:8]) if bad else ""))


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


def train(kiln_run, work_dir, out_dir, log, name, bundle, target, tag,
          extra_env=None):
    """kiln-run's exit code, output, losses and final parameters (None, None
    when it failed)."""
    spec = MODELS[name]
    metrics = os.path.join(out_dir, "%s-%s.jsonl" % (name, tag))
    params = os.path.join(out_dir, "%s-%s.safetensors" % (name, tag))
    for path in (metrics, params):
        if os.path.exists(path):
            os.remove(path)
    command = [kiln_run, os.path.join(work_dir, bundle), "--target", target,
               "--data", os.path.join(work_dir, name + "-train.npz"),
               "--steps", str(spec["steps"]), "--no-shuffle",
               "--metrics", metrics, "--save-params", params]
    code, output = run(command, log, env=dict(os.environ, **(extra_env or {})))
    if code:
        return code, output, None, None
    return code, output, losses_of(metrics), read_safetensors(params)


def prepare(args):
    """Writes the reference, data, bundles and CPU run to args.work_dir;
    returns the exit code."""
    start = time.perf_counter()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    log = os.path.join(args.work_dir, "prepare.log")
    print("preparing in %s; commands and their output in %s"
          % (args.work_dir, log), flush=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "test", "lib"))
    compare_training = os.path.join(ROOT, "test", "e2e", "compare_training.py")

    help_code, help_text = run([args.kilnc, "--help"], log)
    has_amp = help_code == 0 and "--amp" in help_text
    bf16 = has_amp and not args.no_bf16
    if not has_amp:
        print("note: bf16 not tested: this kilnc has no --amp flag "
              "(kilnc --help does not list it)", flush=True)

    def prepare_and_compile(name):
        """The reference and the bundles of one model; returns
        {bundle kind: file name in work_dir} or raises RuntimeError."""
        spec = MODELS[name]
        code, output = run([args.python, compare_training, "prepare", name,
                            args.work_dir] + spec["prepare"], log, env=env)
        if code:
            raise RuntimeError("compare_training.py prepare %s failed: %s"
                               % (name, output.strip()[-2000:]))
        onnx = os.path.join(args.work_dir, name + "-loss.onnx")
        bundles = {"fp32": ["--target=cpu,cuda"]}
        if bf16:
            bundles["bf16"] = ["--target=cuda", "--amp=bf16"]
        files = {}
        for kind, flags in bundles.items():
            files[kind] = "%s%s.kiln" % (name, "" if kind == "fp32"
                                         else "-" + kind)
            flags = [onnx] + flags + spec["kilnc"]
            code, output = run([args.kilnc] + flags + ["-o", os.path.join(
                args.work_dir, files[kind])], log)
            if code:
                raise RuntimeError("kilnc %s failed for %s: %s" % (
                    " ".join(flags[1:]), name, output.strip()[-2000:]))
        save_npz(os.path.join(args.work_dir, name + "-initial.npz"),
                 initial_params(onnx))
        os.remove(onnx)  # check needs no ONNX (nor the onnx package)
        return files

    models = [m for m in args.models.split(",") if m]
    # The compiles are the slow part; one model per thread.
    with ThreadPoolExecutor(max_workers=len(models)) as pool:
        futures = {name: pool.submit(prepare_and_compile, name)
                   for name in models}
    manifest = dict(models={}, bf16=bf16, kilnc=args.kilnc)
    failed = False
    for name, future in futures.items():
        try:
            bundles = future.result()
        except RuntimeError as error:
            print("FAIL: %s" % error, flush=True)
            failed = True
            continue
        # The CPU target's run of the fp32 bundle, the GPU run's reference.
        code, output, _, _ = train(args.kiln_run, args.work_dir,
                                   args.work_dir, log, name, bundles["fp32"],
                                   "cpu", "cpu")
        if code:
            print("FAIL: %s: kiln-run --target cpu failed: %s"
                  % (name, output.strip()[-2000:]), flush=True)
            failed = True
            continue
        manifest["models"][name] = dict(bundles=bundles,
                                        steps=MODELS[name]["steps"])
    with open(os.path.join(args.work_dir, "parity.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("prepared %s in %.1f s" % (", ".join(manifest["models"]) or
                                     "nothing", time.perf_counter() - start),
          flush=True)
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
        print("note: --target cpu: the fp32 bundles train on the CPU target "
              "(this checks the check, not the GPU); the bf16 bundles and "
              "the CUDA-graph comparison are left out", flush=True)
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

    def train_on(name, bundle, target, tag, extra_env=None):
        code, output, losses, params = train(
            args.kiln_run, args.work_dir, out, log, name, bundle, target,
            tag, extra_env)
        if code and target == "cuda" and cannot_run_cuda(output):
            skip("kiln-run cannot use the GPU: " + output.strip())
        if code:
            check.expect(False, "%s %s: kiln-run failed: %s" % (
                name, tag, output.strip()[-2000:]))
        return losses, params

    for name, entry in manifest["models"].items():
        spec = MODELS[name]
        bundles = entry["bundles"]
        with open(os.path.join(args.work_dir, name + "-losses.txt")) as f:
            torch_losses = [float(x) for x in f.read().split()]
        torch_params = load_arrays(os.path.join(args.work_dir,
                                                name + "-final.npz"))
        cpu_losses = losses_of(os.path.join(args.work_dir,
                                            name + "-cpu.jsonl"))
        cpu_params = read_safetensors(os.path.join(
            args.work_dir, name + "-cpu.safetensors"))
        tag = args.target
        gpu_losses, gpu_params = train_on(name, bundles["fp32"], args.target,
                                          tag)
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
                           TORCH_PARAM_ATOL)
        if gpu and name == "gpt2" and gpu_losses is not None:
            # The second run of an entry point captures a CUDA graph and
            # later runs replay it: the same commands run directly must give
            # the same numbers.
            direct, _ = train_on(name, bundles["fp32"], "cuda",
                                 "cuda-nographs", {"KILN_CUDA_GRAPHS": "0"})
            if direct is not None:
                compare_losses(check, "%s fp32 losses, CUDA graphs vs "
                               "KILN_CUDA_GRAPHS=0" % name, gpu_losses,
                               direct, 1e-6)
        if gpu and "bf16" in bundles:
            bf16_losses, bf16_params = train_on(name, bundles["bf16"],
                                                "cuda", "cuda-bf16")
            if bf16_losses is not None:
                compare_losses(check, "%s bf16 losses, cuda vs fp32 cpu"
                               % name, bf16_losses, cpu_losses,
                               BF16_LOSS_RTOL)
                initial = load_arrays(os.path.join(args.work_dir,
                                                   name + "-initial.npz"))
                compare_updates(check, "%s bf16 parameters" % name,
                                bf16_params, cpu_params, initial,
                                spec["exclude"], BF16_UPDATE_RATIO)
    if not manifest["models"]:
        check.expect(False, "parity.json lists no prepared model")
    if gpu and not manifest.get("bf16"):
        print("note: bf16 not tested: prepared without bf16 bundles",
              flush=True)

    seconds = time.perf_counter() - start
    if check.failures:
        print("%d check(s) failed in %.1f s; see %s" % (
            len(check.failures), seconds, log))
        return 1
    print("all checks passed in %.1f s" % seconds)
    return 0


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
    parser.add_argument("--models", default="gpt2,bert")
    parser.add_argument("--no-bf16", action="store_true",
                        help="leave out the --amp=bf16 bundles")
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
