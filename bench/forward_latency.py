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
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ("mlp", "cnn", "gpt2", "bert")
# The benchmark sizes of the GPT-2- and BERT-style models (issue 3, item 9).
SIZES = dict(d_model=256, heads=4, vocab=1000, layers=4)
LIBBLAS = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
LIBOPENBLAS = "libopenblas.so.0"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--threads", type=int,
                        default=len(os.sched_getaffinity(0)),
                        help="threads for each side (default: usable CPUs)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128,
                        help="tokens per sequence of the GPT-2- and "
                        "BERT-style models")
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="about how long one timing trial lasts")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--openblas-coretype", metavar="NAME",
                        default=default_coretype(),
                        help="OPENBLAS_CORETYPE for both sides (default: "
                        "the one Kiln's runtime picks for this CPU, so that "
                        "PyTorch's OpenBLAS gets the same fast kernels; "
                        "'none' leaves it unset)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where kilnc and kiln-run are")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the models, inputs and bundles to DIR "
                        "and keep them")
    args = parser.parse_args(argv[1:])
    args.models = args.models.split(",")
    for name in args.models:
        if name not in MODELS:
            parser.error("unknown model %r; expected some of %s"
                         % (name, ",".join(MODELS)))
    return args


def default_coretype():
    """What Kiln's runtime sets when OPENBLAS_CORETYPE is unset
    (runtime/src/CpuCode.cpp): OpenBLAS 0.3.21 falls back to slow generic
    kernels on CPUs newer than itself, and the peer must not be left there."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return os.environ["OPENBLAS_CORETYPE"]
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f
                          if l.startswith("flags")), [])
    except OSError:
        return None
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
        return "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Haswell"
    return None


def thread_environment(args):
    """The variables both sides run under; set in this process before numpy
    or torch load OpenBLAS, and passed to kiln-run."""
    env = {"OMP_NUM_THREADS": str(args.threads),
           "OPENBLAS_NUM_THREADS": str(args.threads)}
    if args.openblas_coretype and args.openblas_coretype != "none":
        env["OPENBLAS_CORETYPE"] = args.openblas_coretype
    return env


#===-----------------------------------------------------------------------===#
# What each side runs on.
#===-----------------------------------------------------------------------===#

def openblas_config(library):
    """openblas_get_config() and openblas_get_num_threads() of library, as
    loaded here (it reads OPENBLAS_CORETYPE and the thread variables)."""
    try:
        blas = ctypes.CDLL(library)
        blas.openblas_get_config.restype = ctypes.c_char_p
        return "%s, %d threads" % (blas.openblas_get_config().decode(),
                                   blas.openblas_get_num_threads())
    except (OSError, AttributeError) as error:
        return "not OpenBLAS or not loadable (%s)" % error


def blas_alternative():
    """What Debian's libblas.so.3 alternative points to, by
    update-alternatives."""
    try:
        text = subprocess.run(
            ["update-alternatives", "--display",
             "libblas.so.3-x86_64-linux-gnu"], capture_output=True,
            text=True, check=True).stdout
        match = re.search(r"link currently points to (\S+)", text)
        return match.group(1) if match else text.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as error:
        return "update-alternatives failed (%s)" % error


def loaded_libraries(pattern):
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line}
    return sorted(path for path in paths
                  if re.search(pattern, os.path.basename(path)))


def cpu_name():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def print_setup(args, torch, ort):
    print("host: %s, %d usable CPUs (nproc), load average %.2f at start"
          % (cpu_name(), len(os.sched_getaffinity(0)), os.getloadavg()[0]))
    print("threads: %d each side; OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s "
          "OPENBLAS_CORETYPE=%s" % (
              args.threads, os.environ["OMP_NUM_THREADS"],
              os.environ["OPENBLAS_NUM_THREADS"],
              os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    config = torch.__config__.show()
    blas_info = re.search(r"BLAS_INFO=([^,]+)", config)
    print("PyTorch %s: torch.get_num_threads() %d, interop %d, "
          "BLAS_INFO=%s, %s" % (
              torch.__version__, torch.get_num_threads(),
              torch.get_num_interop_threads(),
              blas_info.group(1) if blas_info else "?",
              "oneDNN (MKL-DNN) on" if torch.backends.mkldnn.is_available()
              else "oneDNN off"))
    print("  libblas.so.3 alternative: %s" % blas_alternative())
    loaded = [os.path.realpath(path)
              for path in loaded_libraries(r"blas|mkl")]
    print("  BLAS libraries loaded with torch: %s"
          % (", ".join(loaded) or "none"))
    print("  libblas.so.3: %s" % openblas_config(LIBBLAS))
    print("Kiln: kernels link %s -> %s" % (
        LIBOPENBLAS, os.path.realpath(
            "/usr/lib/x86_64-linux-gnu/" + LIBOPENBLAS)))
    print("  %s: %s" % (LIBOPENBLAS, openblas_config(LIBOPENBLAS)))
    print("ONNX Runtime: %s" % (
        "onnxruntime %s, intra-op threads %d" % (ort.__version__, args.threads)
        if ort else "not installed (import onnxruntime fails): not measured"))
    print()


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
    from compare_model import save_npz
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

def ms(seconds):
    return "%.3f" % (seconds * 1e3) if seconds is not None else "-"


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
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.rjust(width) if i else cell.ljust(width)
                        for i, (cell, width) in enumerate(zip(line, widths))))
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
    sys.path[:0] = [os.path.join(ROOT, "test", "lib"),
                    os.path.join(ROOT, "test", "e2e")]
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
    print_setup(args, torch, ort)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as scratch:
        workdir = args.keep or scratch
        os.makedirs(workdir, exist_ok=True)
        rows = []
        for name in args.models:
            print("measuring %s ..." % name, file=sys.stderr, flush=True)
            rows.append(measure(args, name, workdir, ort))
    print_table(rows, ort)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
