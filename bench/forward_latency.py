"""Forward latency of the MLP, CNN, GPT-2-style and BERT-style models on the
CPU: Kiln (kilnc --inference, kiln-run) against PyTorch eager, and ONNX
Runtime where it is importable, in one run, printed as a table of ratios.

    /usr/bin/python3 bench/forward_latency.py [--threads N] [--batch 8]
        [--seq 128] [--seconds 1] [--trials 5] [--models mlp,cnn,gpt2,bert]
        [--openblas-coretype NAME] [--bin build/bin] [--keep DIR]

Each model is built in eval mode from test/lib/kiln_onnx_models.py (the GPT-2-
and BERT-style ones at d_model 256, 4 layers, 4 heads, vocab 1000, --seq
tokens), exported to ONNX (opset 17), compiled by kilnc --inference at
--batch, and checked once against PyTorch's outputs before it is timed.

Kiln's time for one call is (T(R + 1) - T(1)) / R, where T(n) is the wall
time of a whole `kiln-run --repeat n` process: process start, bundle load,
reading the inputs and writing the outputs cancel out, and so does the first,
cold call. PyTorch's is the mean of R calls of the warm module under
torch.inference_mode. R is chosen to make each trial last about --seconds;
each figure is the median of --trials trials, Kiln's and PyTorch's
interleaved. Both sides get --threads threads (default: the CPUs this process
may run on) through torch.set_num_threads and OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS, set before OpenBLAS is loaded.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

from common import (ROOT, SIZES, add_common_arguments, measure_models, ms,
                    print_columns, print_setup, thread_environment)

MODELS = ("mlp", "cnn", "gpt2", "bert")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128,
                        help="tokens per sequence of the GPT-2- and "
                        "BERT-style models")
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="about how long one timing trial lasts")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args(argv[1:])
    args.models = args.models.split(",")
    for name in args.models:
        if name not in MODELS:
            parser.error("unknown model %r; expected some of %s"
                         % (name, ",".join(MODELS)))
    return args


#===-----------------------------------------------------------------------===#
# Timing.
#===-----------------------------------------------------------------------===#

def calls_per_trial(seconds_per_call, args):
    calls = int(args.seconds / max(seconds_per_call, 1e-7))
    return max(5, min(100000, calls))


def time_torch(module, tensors, calls):
    import torch
    with torch.inference_mode():
        start = time.perf_counter()
        for _ in range(calls):
            module(*tensors)
        return (time.perf_counter() - start) / calls


def time_ort(session, feeds, calls):
    start = time.perf_counter()
    for _ in range(calls):
        session.run(None, feeds)
    return (time.perf_counter() - start) / calls


class KilnRunner:
    def __init__(self, args, bundle, inputs, outputs):
        self.command = [os.path.join(args.bin, "kiln-run"), bundle,
                        "--inputs", inputs, "--outputs", outputs]
        self.env = dict(os.environ)

    def process(self, repeat):
        """Wall seconds of one kiln-run process, and what it printed."""
        start = time.perf_counter()
        result = subprocess.run(self.command + ["--repeat", str(repeat)],
                                capture_output=True, text=True, env=self.env)
        elapsed = time.perf_counter() - start
        if result.returncode:
            raise RuntimeError("kiln-run failed: " + result.stderr.strip())
        return elapsed, result.stdout

    def estimate(self):
        """kiln-run's own mean time of a call, from a short run."""
        _, stdout = self.process(5)
        return parse_kiln_run(stdout)[0]

    def trial(self, calls):
        """(T(calls + 1) - T(1)) / calls, and kiln-run's own mean and fastest
        of the calls + 1."""
        one, _ = self.process(1)
        many, stdout = self.process(calls + 1)
        return (many - one) / calls, parse_kiln_run(stdout)


def parse_kiln_run(stdout):
    match = re.search(r"mean ([0-9.]+) ms, fastest ([0-9.]+) ms", stdout)
    if not match:
        raise RuntimeError("no timing in kiln-run's output: " + stdout)
    return float(match.group(1)) / 1e3, float(match.group(2)) / 1e3


#===-----------------------------------------------------------------------===#
# One model.
#===-----------------------------------------------------------------------===#

def compile_model(args, name, workdir, module, inputs, dynamic_axes):
    """Exports and compiles the model; returns (bundle, inputs npz, compile
    seconds), or raises RuntimeError with kilnc's message."""
    import kiln_onnx_models as models
    from kiln_test_io import save_npz
    onnx_path = os.path.join(workdir, name + ".onnx")
    bundle = os.path.join(workdir, name + ".kiln")
    inputs_path = os.path.join(workdir, name + "-inputs.npz")
    models.export_eval(module, inputs, dynamic_axes, onnx_path)
    save_npz(inputs_path, inputs)
    command = [os.path.join(args.bin, "kilnc"), onnx_path,
               "--batch-size=%d" % args.batch, "--inference", "-o", bundle]
    if name == "bert":
        command.append("--dim=sequence=%d" % args.seq)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError("kilnc failed: " + result.stderr.strip())
    return bundle, inputs_path, seconds


def max_difference(got, want):
    import numpy as np
    return float(np.max(np.abs(got.astype(np.float64) -
                               want.astype(np.float64))))


def measure(args, name, workdir, ort):
    import numpy as np
    import torch

    import kiln_onnx_models as models
    row = {"model": name}
    sizes = dict(SIZES, seq=args.seq)
    module, inputs, dynamic_axes = models.eval_model(name, args.batch, **sizes)
    row["params"] = sum(p.numel() for p in module.parameters())
    tensors = [torch.from_numpy(value) for value in inputs.values()]
    expected = models.run_eval(module, inputs)["output"]

    time_torch(module, tensors, 3)
    torch_calls = calls_per_trial(time_torch(module, tensors, 3), args)

    kiln = None
    try:
        bundle, inputs_path, row["compile_s"] = compile_model(
            args, name, workdir, module, inputs, dynamic_axes)
        outputs_path = os.path.join(workdir, name + "-outputs.npz")
        kiln = KilnRunner(args, bundle, inputs_path, outputs_path)
        kiln_calls = calls_per_trial(kiln.estimate(), args)
        with np.load(outputs_path) as outputs:
            got = outputs["output"]
        row["diff"] = max_difference(got, expected)
        row["close"] = bool(np.allclose(got, expected, rtol=1e-3, atol=1e-4))
    except RuntimeError as error:
        row["error"] = str(error).splitlines()[0]
        kiln = None

    session = None
    if ort:
        session = ort.InferenceSession(
            os.path.join(workdir, name + ".onnx"), ort_options(ort, args),
            providers=["CPUExecutionProvider"])
        time_ort(session, inputs, 3)
        ort_calls = calls_per_trial(time_ort(session, inputs, 3), args)

    torch_times, kiln_times, kiln_means, kiln_fastest, ort_times = \
        [], [], [], [], []
    for _ in range(args.trials):
        torch_times.append(time_torch(module, tensors, torch_calls))
        if kiln:
            per_call, (mean, fastest) = kiln.trial(kiln_calls)
            kiln_times.append(per_call)
            kiln_means.append(mean)
            kiln_fastest.append(fastest)
        if session:
            ort_times.append(time_ort(session, inputs, ort_calls))
    row["torch"] = statistics.median(torch_times)
    if kiln:
        row["kiln"] = statistics.median(kiln_times)
        row["kiln_mean"] = statistics.median(kiln_means)
        row["kiln_fastest"] = min(kiln_fastest)
        row["kiln_calls"] = kiln_calls
    if session:
        row["ort"] = statistics.median(ort_times)
    row["torch_calls"] = torch_calls
    return row


def ort_options(ort, args):
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    return options


#===-----------------------------------------------------------------------===#
# The table.
#===-----------------------------------------------------------------------===#

def print_table(rows, ort):
    header = ["model", "params", "torch ms", "kiln ms", "kiln-run mean/min ms",
              "torch/kiln"]
    if ort:
        header += ["ort ms", "ort/kiln"]
    header += ["kilnc s", "max|kiln-torch|", "calls torch/kiln"]
    table = [header]
    for row in rows:
        kiln = row.get("kiln")
        line = [row["model"], "{:,}".format(row["params"]),
                ms(row["torch"]), ms(kiln),
                "%s/%s" % (ms(row.get("kiln_mean")),
                           ms(row.get("kiln_fastest"))),
                "%.2f" % (row["torch"] / kiln) if kiln else "-"]
        if ort:
            line += [ms(row.get("ort")),
                     "%.2f" % (row["ort"] / kiln) if kiln and "ort" in row
                     else "-"]
        line += ["%.1f" % row["compile_s"] if "compile_s" in row else "-",
                 "%.2g%s" % (row["diff"], "" if row["close"] else " WRONG")
                 if "diff" in row else "-",
                 "%d/%s" % (row["torch_calls"], row.get("kiln_calls", "-"))]
        table.append(line)
    print_columns(table)
    for row in rows:
        if "error" in row:
            print("%s: Kiln not measured: %s" % (row["model"], row["error"]))
    print()
    print("torch/kiln > 1: Kiln is faster. kiln ms: (T(R+1) - T(1)) / R of "
          "whole kiln-run processes; kiln-run mean/min: its own --repeat "
          "figures (the mean includes the cold first call). torch ms: mean "
          "of R warm calls. Medians of the trials; calls: R. WRONG: Kiln's "
          "output is not within rtol 1e-3, atol 1e-4 of PyTorch's.")


def main(argv):
    args = parse_args(argv)
    # Before numpy or torch load OpenBLAS: it reads these once, at load.
    os.environ.update(thread_environment(args))
    sys.path[:0] = [os.path.join(ROOT, "test", "lib")]
    import torch
    torch.set_num_threads(args.threads)
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None

    print("forward latency, batch %d, sequence %d (GPT-2- and BERT-style: "
          "d_model %d, %d layers, %d heads, vocab %d)" % (
              args.batch, args.seq, SIZES["d_model"], SIZES["layers"],
              SIZES["heads"], SIZES["vocab"]))
    print_setup(args, torch)
    print("ONNX Runtime: %s" % (
        "onnxruntime %s, intra-op threads %d" % (ort.__version__, args.threads)
        if ort else "not installed (import onnxruntime fails): not measured"))
    print()
    rows = measure_models(
        args, lambda name, workdir: measure(args, name, workdir, ort))
    print_table(rows, ort)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
