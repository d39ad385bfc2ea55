"""Training-step throughput of the GPT-2-style and BERT-style models on the
CPU: Kiln (kilnc --optimizer=adamw, kiln-run --data --steps) against PyTorch
eager with torch.optim.AdamW and, where it is installed, JAX/XLA (the same
models in jax.numpy, the whole step under jax.jit), in one run, printed as a
table of ratios.

    /usr/bin/python3 bench/train_throughput.py [--threads N] [--batch 16]
        [--seq 128] [--seconds 10 | --steps R] [--trials 3]
        [--models gpt2,bert] [--lr 1e-4] [--weight-decay 0.01]
        [--check-steps 3] [--no-memory] [--openblas-coretype NAME]
        [--jax-python PATH | --no-jax] [--bin build/bin] [--keep DIR]

The models are those of bench/forward_latency.py (test/lib/kiln_onnx_models.py
eval_model: d_model 256, 4 layers, 4 heads, vocab 1000, --seq tokens), each
followed by its mean cross-entropy loss: over the vocabulary at every position
for the GPT-2-style decoder (labels: the next token), over two classes of the
pooled first token for the BERT-style encoder (labels: 0 or 1; rows padded to
between --seq / 2 and --seq tokens, masked). Dropout is inactive on both
sides: the loss model is exported in eval mode (opset 17, inputs named after
the model's plus "labels", output "loss"), so Kiln's train_step has none, and
PyTorch runs it in eval mode too. kilnc compiles it with --optimizer=adamw
and the script's --lr, --weight-decay and --batch; PyTorch uses
torch.optim.AdamW with the same settings (its defaults otherwise, as kilnc's).
Both train on the same --batches batches of seeded random tokens, in order,
cycling.

Correctness first: Kiln's and PyTorch's losses over the first --check-steps
steps, from the same initial weights on the same batches, must agree within
--rtol (2e-3); otherwise the mismatch is printed, that model is not timed, and
the script exits 1. It also exits 1 when kilnc or kiln-run fails.

Kiln's time for one step is (T(R + 1) - T(1)) / R, where T(n) is the wall time
of a whole `kiln-run --data --steps n --no-shuffle` process: process start,
bundle load, reading the data, opening the session and the first, cold step
cancel out. Where kiln-run has --metrics, the median of its own per-step
times (steps 2 to R + 1 of each trial) is printed beside it as a cross-check.
PyTorch's is the mean of R warm iterations of zero_grad, forward, backward,
optimizer.step (and loss.item(), as kiln-run reads each loss). R is chosen
to make each trial last about --seconds (at least 3 steps), or is --steps;
each figure is the median of --trials trials, Kiln's and PyTorch's
interleaved. Both sides get --threads threads (default: the CPUs this process
may run on) through torch.set_num_threads and OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS, set before OpenBLAS is loaded, and the same
OPENBLAS_CORETYPE.

Peak memory (unless --no-memory): the peak resident set (ru_maxrss) of two
separate processes each running --memory-steps steps on the same data: a
`kiln-run --data --steps` process, and a fresh Python process (this script as
a worker) that builds the PyTorch model and AdamW, reads the data and trains.
Each is started by a small launcher that forks it and reads its ru_maxrss from
wait4 (Linux carries a process's peak across execve, so a child spawned
straight from this large process would report this process's peak; the
launcher's own, about 5 MiB, is the floor). Both are whole-process figures:
PyTorch's includes the interpreter and libtorch, so its resident set just
before the first step is printed too, and Kiln's is set beside the arena kilnc
planned for train_step and the bytes of parameters and optimizer state
(kiln-run --info). PyTorch's peak grows over the first steps (gradients and
AdamW's state are allocated on first use, then the allocator's cache), so
--memory-steps defaults to 5.

JAX/XLA: bench/train_jax.py, run by a Python that has JAX (--jax-python;
default /opt/kiln-jax/bin/python, the virtual environment bench/README.md
installs, where it exists; without one the script says so and measures Kiln
and PyTorch alone). It writes the two models in jax.numpy after
kiln_onnx_models.py (eval mode, the same loss), starts from the PyTorch
model's initial parameters (an .npz of named_parameters: the tied GPT-2
embedding once), trains on the same data file as kiln-run, and updates with
an AdamW written as torch.optim.AdamW's (decoupled decay p *= 1 - lr * wd,
bias corrections, eps outside the square root). The step (forward,
jax.value_and_grad, AdamW) is one jax.jit function with the parameters and
the optimizer state donated, lowered and compiled ahead of time: "jax jit s".
Its losses over the first --check-steps steps must agree with PyTorch's
within --rtol too, or JAX is not timed and the script exits 1 (it also exits
1 when the JAX worker fails; Kiln and PyTorch are still measured). Only a
model whose Kiln losses agreed is run on JAX. The worker is one process that
times R steps when asked, so that its trials interleave with Kiln's and
PyTorch's: the mean of R steps, each waited for with block_until_ready and
its loss read as a float, as PyTorch's .item(). Threads: NPROC=--threads,
which sizes the XLA CPU client's thread pool (XLA_FLAGS
--xla_cpu_multi_thread_eigen=false does not limit it; bench/README.md).
Peak memory: a fresh worker process through the same launcher, its resident
set before the first step (after compiling) printed beside it.
"""
import argparse
import copy
import json
import math
import os
import re
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from common import (ROOT, SIZES, add_common_arguments, ms, print_columns,
                    measure_models, print_setup, resident_kib,
                    thread_environment)

MODELS = ("gpt2", "bert", "llama")
WORKER_FLAG = "--torch-memory-worker"
JAX_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "train_jax.py")
# Where bench/README.md installs JAX: a virtual environment of its own, so
# that the system Python's NumPy and torch stay as they are.
DEFAULT_JAX_PYTHON = "/opt/kiln-jax/bin/python"
# Runs argv[2:] as a child and writes its ru_maxrss (KiB) to argv[1]. Linux
# carries a process's peak resident set across execve, and a child spawned
# straight from this (large) process would report this process's peak; a
# child forked from this small launcher starts from the launcher's (about
# 10 MiB), so what it reports is its own peak.
PEAK_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_common_arguments(parser)
    parser.set_defaults(trials=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128,
                        help="tokens per sequence")
    parser.add_argument("--models", default=",".join(MODELS))
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--seconds", type=float, default=10.0,
                        help="about how long one timing trial of each side "
                        "lasts")
    length.add_argument("--steps", type=int,
                        help="steps per timing trial (instead of --seconds)")
    parser.add_argument("--batches", type=int, default=8,
                        help="distinct batches in the training data")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--check-steps", type=int, default=3,
                        help="steps whose losses must agree before timing")
    parser.add_argument("--rtol", type=float, default=2e-3)
    parser.add_argument("--compile-timeout", type=float, default=3600,
                        metavar="SECONDS",
                        help="give up on a model whose kilnc runs longer")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the peak-memory measurement")
    parser.add_argument("--memory-steps", type=int, default=5,
                        help="steps of each peak-memory process")
    jax = parser.add_mutually_exclusive_group()
    jax.add_argument("--jax-python", metavar="PATH",
                     help="a Python with JAX, for the JAX/XLA side (default: "
                     "%s if it exists)" % DEFAULT_JAX_PYTHON)
    jax.add_argument("--no-jax", action="store_true",
                     help="leave the JAX/XLA side out")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="leave the torch.compile side out (it is "
                        "measured with PyTorch 2.x)")
    args = parser.parse_args(argv[1:])
    args.models = args.models.split(",")
    for name in args.models:
        if name not in MODELS:
            parser.error("unknown model %r; expected some of %s"
                         % (name, ",".join(MODELS)))
    for flag in ("batch", "seq", "batches", "check_steps", "trials",
                 "memory_steps", "threads"):
        if getattr(args, flag) < 1:
            parser.error("--%s must be at least 1" % flag.replace("_", "-"))
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")
    for tool in ("kilnc", "kiln-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            parser.error("no executable %s in %s (--bin)" % (tool, args.bin))
    if args.jax_python and not os.access(args.jax_python, os.X_OK):
        parser.error("no executable %s (--jax-python)" % args.jax_python)
    if args.jax_python is None and not args.no_jax and os.access(
            DEFAULT_JAX_PYTHON, os.X_OK):
        args.jax_python = DEFAULT_JAX_PYTHON
    return args


#===-----------------------------------------------------------------------===#
# The models, their data and the PyTorch side.
#===-----------------------------------------------------------------------===#

def model_sizes(args):
    """SIZES, with what args.sizes (where it exists: bench/data_parallel.py
    --smoke) overrides."""
    return dict(SIZES, **getattr(args, "sizes", {}))


def loss_model(name, args):
    """The eval-mode model NAME followed by its mean cross-entropy; the same
    weights for the same arguments (eval_model seeds them)."""
    import torch

    import kiln_onnx_models as models

    class WithLoss(torch.nn.Module):
        def __init__(self, net, classes):
            super().__init__()
            self.net = net
            self.classes = classes

        def forward(self, *inputs):
            *features, labels = inputs
            logits = self.net(*features)
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, self.classes), labels.reshape(-1))

    sizes = dict(model_sizes(args), seq=args.seq)
    if name == "llama":
        module = llama_model(**sizes)
    else:
        module, _, _ = models.eval_model(name, args.batch, **sizes)
    model = WithLoss(module, 2 if name == "bert" else sizes["vocab"])
    return model.eval()


def llama_model(d_model, heads, vocab, layers, seq, seed=0):
    """A Llama-style decoder: RMSNorm before attention and feed-forward,
    rotary position embeddings, grouped-query causal attention (heads / 2
    key/value heads), a SwiGLU feed-forward of width 8/3 d_model (rounded up
    to 64), no biases, an untied output layer. Written with the operations
    PyTorch 1.13 has too (RMSNorm and the attention spelled out), and with no
    float buffers: the rotary tables are computed in forward, so that every
    initializer of the export is a parameter."""
    import torch
    from torch import nn

    head = d_model // heads
    kv_heads = max(1, heads // 2)
    hidden = (8 * d_model // 3 + 63) // 64 * 64

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d_model))

        def forward(self, x):
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
            return x * scale * self.weight

    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = RMSNorm()
            self.q = nn.Linear(d_model, d_model, bias=False)
            self.k = nn.Linear(d_model, kv_heads * head, bias=False)
            self.v = nn.Linear(d_model, kv_heads * head, bias=False)
            self.o = nn.Linear(d_model, d_model, bias=False)
            self.ffn_norm = RMSNorm()
            self.gate = nn.Linear(d_model, hidden, bias=False)
            self.up = nn.Linear(d_model, hidden, bias=False)
            self.down = nn.Linear(hidden, d_model, bias=False)

        def forward(self, x, cos, sin, causal):
            b, t, _ = x.shape
            h = self.attn_norm(x)
            q = self.q(h).view(b, t, heads, head).transpose(1, 2)
            k = self.k(h).view(b, t, kv_heads, head).transpose(1, 2)
            v = self.v(h).view(b, t, kv_heads, head).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.matmul(q, k.transpose(-1, -2)) / head ** 0.5
            scores = scores.masked_fill(causal, float("-inf"))
            a = torch.matmul(torch.softmax(scores, -1), v)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d_model))
            h = self.ffn_norm(x)
            return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.norm = RMSNorm()
            self.head = nn.Linear(d_model, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            inverse = 1.0 / (10000.0 ** (
                torch.arange(0, head, 2, dtype=torch.float32) / head))
            angles = torch.outer(torch.arange(t, dtype=torch.float32), inverse)
            angles = torch.cat([angles, angles], -1)
            cos, sin = angles.cos(), angles.sin()
            causal = torch.ones(t, t, dtype=torch.bool).triu(1)
            x = self.embed(idx)
            for block in self.blocks:
                x = block(x, cos, sin, causal)
            return self.head(self.norm(x))

    torch.manual_seed(seed)
    return Llama()


def training_data(name, args):
    """args.batches * args.batch samples, keyed by input name, labels last."""
    import numpy as np
    generator = np.random.default_rng(1)
    samples = args.batches * args.batch
    vocab = model_sizes(args)["vocab"]
    if name in ("gpt2", "llama"):
        tokens = generator.integers(0, vocab, (samples, args.seq + 1))
        return {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
    input_ids = generator.integers(1, vocab, (samples, args.seq))
    attention_mask = np.ones((samples, args.seq), np.int64)
    lengths = generator.integers(args.seq // 2, args.seq + 1, samples)
    for row, length in enumerate(lengths):
        input_ids[row, length:] = 0
        attention_mask[row, length:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "labels": generator.integers(0, 2, samples)}


def torch_batches(data, batch):
    """The batches kiln-run --no-shuffle visits, in order, as tensors."""
    import torch
    tensors = [torch.from_numpy(value.astype("int64")) for value in
               data.values()]
    count = len(tensors[0]) // batch
    return [tuple(t[i * batch:(i + 1) * batch] for t in tensors)
            for i in range(count)]


class TorchTrainer:
    """A model, its AdamW and the batches, run from batch 0 on."""

    def __init__(self, model, batches, args, compiled=False):
        """With compiled, the model runs as torch.compile makes it (the
        forward and, through AOTAutograd, the backward; Inductor's C++
        kernels on the CPU) and the optimizer as it is."""
        import torch
        self.model = torch.compile(model) if compiled else model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                                           weight_decay=args.weight_decay)
        self.batches = batches
        self.cursor = 0

    def steps(self, count):
        """Runs count steps; returns their losses."""
        losses = []
        for _ in range(count):
            batch = self.batches[self.cursor % len(self.batches)]
            self.cursor += 1
            self.optimizer.zero_grad()
            loss = self.model(*batch)
            loss.backward()
            self.optimizer.step()
            losses.append(loss.item())
        return losses

    def time(self, count):
        """Mean wall seconds of one of count steps."""
        start = time.perf_counter()
        self.steps(count)
        return (time.perf_counter() - start) / count


def torch_memory_worker(config_path):
    """Runs in its own process (WORKER_FLAG CONFIG): builds the PyTorch model
    and optimizer, reads the data, prints its resident set before the first
    step as JSON, and trains; PEAK_LAUNCHER reads its peak from wait4."""
    with open(config_path) as f:
        config = json.load(f)
    sys.path[:0] = [os.path.join(ROOT, "test", "lib")]
    import numpy as np
    import torch
    torch.set_num_threads(config["threads"])
    args = argparse.Namespace(**config["args"])
    with np.load(config["data"]) as archive:
        data = {key: archive[key] for key in archive.files}
    trainer = TorchTrainer(loss_model(config["model"], args),
                           torch_batches(data, args.batch), args,
                           compiled=config.get("compiled", False))
    before = resident_kib()
    trainer.steps(config["steps"])
    print(json.dumps({"rss_before_first_step_kib": before}))
    return 0


#===-----------------------------------------------------------------------===#
# The Kiln side.
#===-----------------------------------------------------------------------===#

def run_process(command, env, timeout=None):
    """Runs command; returns (wall seconds, exit code, stdout, stderr). After
    timeout seconds the process is killed and RuntimeError raised."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise RuntimeError("%s did not finish in %.0f s (--compile-timeout)"
                               % (os.path.basename(command[0]), timeout))
        elapsed = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return (elapsed, process.returncode, out.read().decode(),
                err.read().decode())


def peak_resident_kib(command, env, workdir):
    """Runs command through PEAK_LAUNCHER; returns (its peak resident KiB,
    stdout), or raises RuntimeError with its message."""
    result_path = os.path.join(workdir, "peak-rss.txt")
    _, code, stdout, stderr = run_process(
        [sys.executable, "-S", "-c", PEAK_LAUNCHER, result_path] + command,
        env)
    if code:
        raise RuntimeError("%s failed (exit %d): %s" % (
            os.path.basename(command[0]), code, stderr.strip() or "no message"))
    with open(result_path) as f:
        return int(f.read()), stdout


def torch_major(torch):
    """PyTorch's major version: 2 and later export with the dynamo exporter
    and have torch.compile."""
    return int(torch.__version__.split(".")[0])


def export_loss_model(args, name, workdir, model, data):
    """Writes NAME.onnx (batch axis dynamic) and NAME-train.npz; returns their
    paths. bench/data_parallel.py uses it too."""
    import warnings

    import torch

    from kiln_test_io import save_npz
    onnx_path = os.path.join(workdir, name + ".onnx")
    data_path = os.path.join(workdir, name + "-train.npz")
    save_npz(data_path, data)
    example = torch_batches(data, args.batch)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if torch_major(torch) >= 2:
            # What a user of today's PyTorch writes: the dynamo exporter at
            # its default opset, unoptimized (docs/kilnc.md: the optimizer
            # folds weight transposes into anonymous constants), at the
            # batch size kilnc compiles for.
            torch.onnx.export(model, example, onnx_path, dynamo=True,
                              optimize=False, input_names=list(data),
                              output_names=["loss"])
        else:
            torch.onnx.export(model, example, onnx_path, opset_version=17,
                              input_names=list(data), output_names=["loss"],
                              dynamic_axes={key: {0: "batch"}
                                            for key in data},
                              do_constant_folding=False)
    return onnx_path, data_path


def compile_training(args, onnx_path, bundle, batch, extra_flags=()):
    """kilnc --optimizer=adamw with the script's --lr and --weight-decay at
    batch, plus extra_flags; returns its seconds, or raises RuntimeError with
    kilnc's message."""
    command = [os.path.join(args.bin, "kilnc"), onnx_path,
               "--batch-size=%d" % batch, "--optimizer=adamw",
               "--lr=%g" % args.lr, "--weight-decay=%g" % args.weight_decay,
               "--loss-output=loss", "--target=cpu"] + list(extra_flags) + [
                   "-o", bundle]
    seconds, code, _, stderr = run_process(command, dict(os.environ),
                                           timeout=args.compile_timeout)
    if code:
        raise RuntimeError("kilnc failed (exit %d): %s"
                           % (code, stderr.strip() or "no message"))
    return seconds


def export_and_compile(args, name, workdir, model, data):
    """Writes NAME.onnx, NAME-train.npz and NAME.kiln; returns (bundle, data
    path, kilnc seconds), or raises RuntimeError with kilnc's message."""
    onnx_path, data_path = export_loss_model(args, name, workdir, model, data)
    bundle = os.path.join(workdir, name + ".kiln")
    seconds = compile_training(args, onnx_path, bundle, args.batch)
    return bundle, data_path, seconds


class KilnTrainer:
    def __init__(self, args, bundle, data_path, workdir, name):
        self.args = args
        self.command = [os.path.join(args.bin, "kiln-run"), bundle,
                        "--data", data_path, "--no-shuffle"]
        self.env = dict(os.environ)
        self.metrics_path = os.path.join(workdir, name + "-metrics.jsonl")
        self.has_metrics = "--metrics" in subprocess.run(
            [self.command[0], "--help"], capture_output=True,
            text=True).stdout
        self.workdir = workdir

    def process(self, steps, metrics=False):
        """(wall seconds, stdout) of one kiln-run process of steps steps;
        with metrics, it writes --metrics to self.metrics_path."""
        command = self.command + ["--steps", str(steps)]
        if metrics:
            if os.path.exists(self.metrics_path):
                os.remove(self.metrics_path)
            command += ["--metrics", self.metrics_path]
        elapsed, code, stdout, stderr = run_process(command, self.env)
        if code:
            raise RuntimeError("kiln-run failed (exit %d): %s"
                               % (code, stderr.strip() or "no message"))
        return elapsed, stdout

    def losses(self, steps):
        """The losses of the first steps steps, and the wall time."""
        elapsed, stdout = self.process(steps)
        losses = [float(value) for value in
                  re.findall(r"\bloss ([-+0-9.eEnaif]+)", stdout)]
        if len(losses) != steps:
            raise RuntimeError("kiln-run printed %d losses for %d steps: %s"
                               % (len(losses), steps, stdout.strip()))
        return losses, elapsed

    def trial(self, steps):
        """(T(steps + 1) - T(1)) / steps, and kiln-run's own seconds of
        steps 2 to steps + 1 (from --metrics; empty without it)."""
        # Both with --metrics where there is one, so that writing it cancels.
        one, _ = self.process(1, metrics=self.has_metrics)
        many, _ = self.process(steps + 1, metrics=self.has_metrics)
        own = []
        if self.has_metrics:
            with open(self.metrics_path) as metrics:
                records = [json.loads(line) for line in metrics]
            own = [record["samples"] / record["samples_per_s"]
                   for record in records[1:]]
        return (many - one) / steps, own

    def peak_kib(self, steps):
        """The peak resident KiB of a kiln-run process of steps steps."""
        peak, _ = peak_resident_kib(self.command + ["--steps", str(steps)],
                                    self.env, self.workdir)
        return peak

    def info(self):
        """kiln-run --info's train_step arena and parameter bytes."""
        _, code, stdout, stderr = run_process(
            [self.command[0], self.command[1], "--info"], self.env)
        if code:
            raise RuntimeError("kiln-run --info failed: " + stderr.strip())
        arena = re.search(r"train_step\(.*\n\s*(?:cpu: )?arena (\d+) bytes",
                          stdout)
        params = re.search(r"parameters: \d+, (\d+) bytes", stdout)
        return (int(arena.group(1)) if arena else None,
                int(params.group(1)) if params else None)


#===-----------------------------------------------------------------------===#
# The JAX/XLA side: bench/train_jax.py under --jax-python.
#===-----------------------------------------------------------------------===#

def jax_environment(args):
    """XLA's CPU client sizes its thread pool from NPROC (bench/README.md
    says what else was tried)."""
    env = dict(os.environ)
    env["NPROC"] = str(args.threads)
    return env


def jax_versions(args):
    """'JAX x (jaxlib y)' of --jax-python; None and the reason when it
    cannot import jax."""
    try:
        _, code, stdout, stderr = run_process(
            [args.jax_python, "-c", "import jax, jaxlib.version as v; "
             "print('JAX %s (jaxlib %s), devices %s' % (jax.__version__, "
             "v.__version__, jax.devices('cpu')))"],
            jax_environment(args), timeout=300)
    except (OSError, RuntimeError) as error:
        return None, str(error)
    if code:
        lines = stderr.strip().splitlines()
        return None, lines[-1] if lines else "exit %d" % code
    return stdout.strip(), None


def jax_config(args, name, workdir, data, data_path, mode):
    """Writes the worker's configuration; returns its path."""
    path = os.path.join(workdir, "%s-jax-%s.json" % (name, mode))
    with open(path, "w") as f:
        json.dump({"mode": mode, "model": name,
                   "params": os.path.join(workdir, name + "-params.npz"),
                   "data": data_path, "inputs": list(data),
                   "batch": args.batch, "heads": SIZES["heads"],
                   "layers": SIZES["layers"], "lr": args.lr,
                   "weight_decay": args.weight_decay,
                   "check_steps": args.check_steps,
                   "memory_steps": args.memory_steps}, f)
    return path


def save_parameters(model, path):
    """The initial weights for the JAX side: named_parameters (tied weights
    once), without WithLoss's "net." prefix."""
    from kiln_test_io import save_npz
    save_npz(path, {key[len("net."):]: value.detach().numpy()
                    for key, value in model.named_parameters()})


class JaxError(RuntimeError):
    """The JAX side failed; the others go on."""


class JaxTrainer:
    """A train_jax.py process: compiles and checks on start, then times
    steps on request, so that its trials interleave with the others'."""

    def __init__(self, args, config_path, workdir, name):
        self.stderr_path = os.path.join(workdir, name + "-jax.err")
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [args.jax_python, JAX_WORKER, config_path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=jax_environment(args), text=True)
        first = self.read(args.compile_timeout)
        self.compile_s, self.losses = first["compile_s"], first["losses"]

    def read(self, timeout=None):
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            with open(self.stderr_path) as stderr:
                lines = stderr.read().strip().splitlines()
            raise JaxError("the JAX worker %s: %s" % (
                "did not answer in %.0f s" % timeout if not ready else
                "failed (exit %s)" % self.process.returncode,
                lines[-1] if lines else "no message"))
        try:
            record = json.loads(line)
        except ValueError:
            raise JaxError("the JAX worker printed %r" % line.strip())
        if "error" in record:
            raise JaxError("the JAX worker: " + record["error"])
        return record

    def time(self, count):
        """Mean wall seconds of one of count steps."""
        try:
            self.process.stdin.write("time %d\n" % count)
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # It has ended: read() says how.
        return self.read()["seconds_per_step"]

    def close(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def jax_memory(args, config_path, workdir):
    """(peak KiB, KiB before the first step) of a fresh JAX process."""
    try:
        peak, stdout = peak_resident_kib(
            [args.jax_python, JAX_WORKER, config_path], jax_environment(args),
            workdir)
    except RuntimeError as error:
        raise JaxError("the JAX memory worker: %s" % error)
    report = json.loads(stdout.strip().splitlines()[-1])
    return peak, report["rss_before_first_step_kib"]


#===-----------------------------------------------------------------------===#
# One model.
#===-----------------------------------------------------------------------===#

def steps_per_trial(seconds_per_step, args):
    if args.steps is not None:
        return args.steps
    return max(3, min(10000, int(args.seconds / max(seconds_per_step, 1e-6))))


def check_losses(kiln_losses, torch_losses, rtol):
    """The largest relative difference (NaN counts as infinite), and whether
    it is within rtol."""
    worst = 0.0
    for got, want in zip(kiln_losses, torch_losses):
        difference = abs(got - want) / max(abs(want), 1e-30)
        worst = max(worst, math.inf if math.isnan(difference) else difference)
    return worst, worst <= rtol


def torch_memory(args, name, workdir, data_path, compiled=False):
    """(peak KiB, KiB before the first step) of a fresh PyTorch process
    (running torch.compile's model with compiled)."""
    config_path = os.path.join(workdir, name + "-torch-memory.json")
    with open(config_path, "w") as f:
        json.dump({"model": name, "data": data_path, "threads": args.threads,
                   "steps": args.memory_steps, "compiled": compiled,
                   "args": {"batch": args.batch, "seq": args.seq,
                            "lr": args.lr,
                            "weight_decay": args.weight_decay}}, f)
    peak, stdout = peak_resident_kib(
        [sys.executable, os.path.abspath(__file__), WORKER_FLAG, config_path],
        dict(os.environ), workdir)
    report = json.loads(stdout.strip().splitlines()[-1])
    return peak, report["rss_before_first_step_kib"]


def measure(args, name, workdir):
    row = {"model": name}
    data = training_data(name, args)
    initial = loss_model(name, args)
    row["params"] = sum(p.numel() for p in initial.parameters())
    batches = torch_batches(data, args.batch)

    try:
        bundle, data_path, row["compile_s"] = export_and_compile(
            args, name, workdir, initial, data)
        kiln = KilnTrainer(args, bundle, data_path, workdir, name)
        kiln_losses, check_seconds = kiln.losses(args.check_steps)
    except RuntimeError as error:
        row["error"] = str(error)
        return row

    torch_losses = TorchTrainer(copy.deepcopy(initial), batches,
                                args).steps(args.check_steps)
    row["diff"], row["close"] = check_losses(kiln_losses, torch_losses,
                                             args.rtol)
    row["losses"] = list(zip(kiln_losses, torch_losses))
    compiled = None
    if args.torch_compile and row["close"]:
        start = time.perf_counter()
        compiled = TorchTrainer(copy.deepcopy(initial), batches, args,
                                compiled=True)
        compiled_losses = compiled.steps(args.check_steps)
        row["compile_diff"], row["compile_close"] = check_losses(
            compiled_losses, torch_losses, args.rtol)
        row["torch_compile_s"] = time.perf_counter() - start
        if not row["compile_close"]:
            row["compile_losses"] = list(zip(compiled_losses, torch_losses))
            compiled = None
    jax = None
    # bench/train_jax.py writes the GPT-2- and BERT-style models only.
    if args.jax_python and row["close"] and name in ("gpt2", "bert"):
        jax = start_jax(args, name, workdir, initial, data, data_path,
                        torch_losses, row)
    if not row["close"]:
        return row

    trainer = TorchTrainer(copy.deepcopy(initial), batches, args)
    trainer.steps(2)
    torch_steps = steps_per_trial(trainer.time(2), args)
    kiln_steps = steps_per_trial(check_seconds / args.check_steps, args)
    compiled_steps = None
    if compiled:
        compiled.steps(2)
        compiled_steps = steps_per_trial(compiled.time(2), args)
    jax_steps = None
    if jax:
        try:
            jax_steps = steps_per_trial(jax.time(2), args)
        except JaxError as error:
            jax = drop_jax(row, jax, error)

    torch_times, kiln_times, kiln_own, jax_times = [], [], [], []
    compiled_times = []
    try:
        for _ in range(args.trials):
            torch_times.append(trainer.time(torch_steps))
            if compiled:
                compiled_times.append(compiled.time(compiled_steps))
            per_step, own = kiln.trial(kiln_steps)
            kiln_times.append(per_step)
            kiln_own += own
            if jax:
                try:
                    jax_times.append(jax.time(jax_steps))
                except JaxError as error:
                    jax = drop_jax(row, jax, error)
        if jax:
            jax.close()  # Its memory and threads go before the peak runs.
        if not args.no_memory:
            row["torch_peak_kib"], row["torch_before_kib"] = torch_memory(
                args, name, workdir, data_path)
            if compiled:
                row["compile_peak_kib"], _ = torch_memory(
                    args, name, workdir, data_path, compiled=True)
            row["kiln_peak_kib"] = kiln.peak_kib(args.memory_steps)
            row["kiln_arena"], row["kiln_param_bytes"] = kiln.info()
            if jax:
                try:
                    row["jax_peak_kib"], row["jax_before_kib"] = jax_memory(
                        args, jax_config(args, name, workdir, data,
                                         data_path, "memory"), workdir)
                except JaxError as error:
                    row["jax_error"] = str(error)
    except RuntimeError as error:
        row["error"] = str(error)
        return row
    finally:
        if jax:
            jax.close()
    row["load"] = os.getloadavg()[0]
    row["torch"] = statistics.median(torch_times)
    row["kiln"] = statistics.median(kiln_times)
    row["kiln_own"] = statistics.median(kiln_own) if kiln_own else None
    if compiled_times:
        row["compiled"] = statistics.median(compiled_times)
    row["compiled_steps"] = compiled_steps
    if jax and "jax_error" not in row:
        row["jax"] = statistics.median(jax_times)
    row["steps"] = (torch_steps, kiln_steps, jax_steps)
    return row


def start_jax(args, name, workdir, initial, data, data_path, torch_losses,
              row):
    """The JAX worker, compiled and checked against PyTorch's losses; None,
    with row["jax_error"] or a false row["jax_close"], when it is not to be
    timed."""
    save_parameters(initial, os.path.join(workdir, name + "-params.npz"))
    config = jax_config(args, name, workdir, data, data_path, "train")
    try:
        jax = JaxTrainer(args, config, workdir, name)
    except JaxError as error:
        return drop_jax(row, None, error)
    row["jax_compile_s"] = jax.compile_s
    row["jax_diff"], row["jax_close"] = check_losses(jax.losses, torch_losses,
                                                     args.rtol)
    row["jax_losses"] = list(zip(jax.losses, torch_losses))
    if not row["jax_close"]:
        jax.close()
        return None
    return jax


def drop_jax(row, jax, error):
    """Records why the JAX side stopped and ends its worker; the other sides
    go on without it. Returns None, the JAX side from now on."""
    row["jax_error"] = str(error)
    if jax:
        jax.close()
    return None


#===-----------------------------------------------------------------------===#
# The table.
#===-----------------------------------------------------------------------===#

def mib(kib):
    return "%.0f" % (kib / 1024.0) if kib is not None else "-"


def ratio(numerator, denominator):
    return "%.2f" % (numerator / denominator) if numerator and denominator \
        else "-"


def print_mismatch(model, what, reference, side, reference_side, losses,
                   rtol):
    """Prints that `what` losses differ from `reference` ones, step by
    step (losses: (got, want) pairs)."""
    print("%s: %s losses differ from %s beyond rtol %g:"
          % (model, what, reference, rtol))
    for step, (got, want) in enumerate(losses, 1):
        print("  step %d: %s %.7g %s %.7g"
              % (step, side, got, reference_side, want))


def print_table(rows, args):
    with_jax = bool(args.jax_python)
    with_compile = args.torch_compile
    header = ["model", "params", "torch ms/step"]
    header += ["compile ms/step"] if with_compile else []
    header += ["kiln ms/step", "kiln-run own ms"]
    header += ["jax ms/step"] if with_jax else []
    header += ["torch/kiln"]
    header += ["compile/kiln"] if with_compile else []
    header += ["torch/jax", "jax/kiln"] if with_jax else []
    header += ["samples/s torch/kiln" + ("/jax" if with_jax else "")]
    if not args.no_memory:
        header += ["peak MiB torch/" + ("compile/" if with_compile else "") +
                   "kiln" + ("/jax" if with_jax else "")]
    header += ["kilnc s"] + (["jax jit s"] if with_jax else [])
    header += ["loss rel diff" + (" kiln/jax" if with_jax else ""),
               "steps torch/kiln" + ("/jax" if with_jax else ""), "load"]
    table = [header]
    for row in rows:
        kiln, torch_s, jax = row.get("kiln"), row.get("torch"), row.get("jax")
        sides = [torch_s, kiln] + ([jax] if with_jax else [])
        line = [row["model"], "{:,}".format(row["params"]), ms(torch_s)]
        line += [ms(row.get("compiled"))] if with_compile else []
        line += [ms(kiln), ms(row.get("kiln_own"))]
        line += [ms(jax)] if with_jax else []
        line += [ratio(torch_s, kiln)]
        line += [ratio(row.get("compiled"), kiln)] if with_compile else []
        line += [ratio(torch_s, jax), ratio(jax, kiln)] if with_jax else []
        line += ["/".join("%.1f" % (args.batch / t) if t else "-"
                          for t in sides) if kiln else "-"]
        if not args.no_memory:
            peaks = ["torch_peak_kib"]
            peaks += ["compile_peak_kib"] if with_compile else []
            peaks += ["kiln_peak_kib"]
            peaks += ["jax_peak_kib"] if with_jax else []
            line += ["/".join(mib(row.get(key)) for key in peaks)
                     if "kiln_peak_kib" in row else "-"]
        line += ["%.1f" % row["compile_s"] if "compile_s" in row else "-"]
        if with_jax:
            line += ["%.1f" % row["jax_compile_s"]
                     if "jax_compile_s" in row else "-"]
        diffs = [("diff", "close")]
        diffs += [("jax_diff", "jax_close")] if with_jax else []
        line += ["/".join("%.2g%s" % (row[diff], "" if row[close] else
                                      " WRONG") if diff in row else "-"
                          for diff, close in diffs)
                 if "diff" in row else "-"]
        line += ["/".join("%d" % n if n else "-"
                          for n in row["steps"][:len(sides)])
                 if "steps" in row else "-",
                 "%.2f" % row["load"] if "load" in row else "-"]
        table.append(line)
    print_columns(table)
    print()
    if with_compile:
        print("compile ms/step: as torch ms/step, with the model run by "
              "torch.compile (default mode: the forward and, through "
              "AOTAutograd, the backward as Inductor's C++ kernels; AdamW as "
              "in eager); compile/kiln > 1: Kiln is faster. Its losses are "
              "checked against eager's before timing (its rel diff: "
              "'compile diff' below).")
        for row in rows:
            if "compile_diff" in row:
                print("  %s: compile diff %.2g%s, torch.compile's first %d "
                      "steps %.1f s" % (
                          row["model"], row["compile_diff"],
                          "" if row["compile_close"] else " WRONG",
                          args.check_steps, row["torch_compile_s"]))
    print("torch/kiln > 1: Kiln is faster. kiln ms/step: (T(R+1) - T(1)) / R "
          "of whole kiln-run --steps processes; kiln-run own: the median of "
          "its --metrics step times after the first. torch ms/step: mean of R "
          "warm zero_grad/forward/backward/AdamW steps. Medians of %d trials; "
          "steps: R. loss rel diff: the largest of the first %d steps, "
          "checked before timing (WRONG beyond rtol %g). load: the 1-minute "
          "load average after the model's trials (this benchmark's own "
          "threads add up to %d; more means other processes competed)."
          % (args.trials, args.check_steps, args.rtol, args.threads))
    if with_jax:
        print("jax ms/step: mean of R warm calls of the jax.jit-compiled "
              "step (forward, jax.grad, AdamW), each waited for "
              "(block_until_ready) and its loss read; torch/jax > 1: JAX is "
              "faster than PyTorch, jax/kiln > 1: Kiln is faster than JAX. "
              "jax jit s: lowering and compiling the step. Its loss rel diff "
              "is against PyTorch too.")
    if not args.no_memory:
        print("peak MiB: ru_maxrss of separate processes training on the same "
              "data, %d steps each: a fresh PyTorch process and a kiln-run "
              "--steps process%s." % (args.memory_steps,
                                      ", and a fresh JAX process" if with_jax
                                      else ""))
        for row in rows:
            if "kiln_peak_kib" in row:
                print("  %s: PyTorch process resident before its first step "
                      "%s MiB (interpreter, libtorch, model, optimizer, "
                      "data); Kiln train_step arena %s MiB, parameters and "
                      "optimizer state %s MiB (kiln-run --info)%s" % (
                          row["model"], mib(row["torch_before_kib"]),
                          mib(row["kiln_arena"] / 1024.0)
                          if row["kiln_arena"] else "-",
                          mib(row["kiln_param_bytes"] / 1024.0)
                          if row["kiln_param_bytes"] else "-",
                          "; JAX process resident before its first step %s "
                          "MiB (interpreter, jaxlib, compiled step, "
                          "parameters, AdamW state, data)"
                          % mib(row["jax_before_kib"])
                          if "jax_before_kib" in row else ""))
    failed = False
    for row in rows:
        if "error" in row:
            failed = True
            print("%s: not measured: %s" % (row["model"], row["error"]))
        elif not row["close"]:
            failed = True
            print_mismatch(row["model"], "not timed: Kiln's", "PyTorch's",
                           "kiln", "torch", row["losses"], args.rtol)
        if "jax_error" in row:
            failed = True
            print("%s: JAX side failed: %s" % (row["model"], row["jax_error"]))
        elif not row.get("jax_close", True):
            failed = True
            print_mismatch(row["model"], "JAX not timed: its", "PyTorch's",
                           "jax", "torch", row["jax_losses"], args.rtol)
        if not row.get("compile_close", True):
            failed = True
            print_mismatch(row["model"], "torch.compile not timed: its",
                           "eager's", "compile", "eager",
                           row["compile_losses"], args.rtol)
    return failed


def print_jax_setup(args):
    """What the JAX side runs, or why there is none (args.jax_python is then
    None)."""
    if args.no_jax:
        print("JAX/XLA: left out (--no-jax)")
        return
    if not args.jax_python:
        print("JAX/XLA: not available: no %s and no --jax-python (bench/"
              "README.md says how to install it); Kiln and PyTorch only"
              % DEFAULT_JAX_PYTHON)
        return
    versions, why = jax_versions(args)
    if not versions:
        print("JAX/XLA: not available: %s cannot import jax (%s); Kiln and "
              "PyTorch only" % (args.jax_python, why))
        args.jax_python = None
        return
    print("JAX/XLA on the CPU: %s, %s; NPROC=%d (the size of XLA's CPU "
          "thread pool)" % (versions, args.jax_python, args.threads))


def main(argv):
    if len(argv) == 3 and argv[1] == WORKER_FLAG:
        return torch_memory_worker(argv[2])
    args = parse_args(argv)
    # Before numpy or torch load OpenBLAS: it reads these once, at load.
    os.environ.update(thread_environment(args))
    sys.path[:0] = [os.path.join(ROOT, "test", "lib")]
    import torch
    torch.set_num_threads(args.threads)
    args.torch_compile = (not args.no_torch_compile and
                          torch_major(torch) >= 2)

    print("training-step throughput, %s" % time.strftime("%Y-%m-%d %H:%M %Z"))
    print("command: %s" % " ".join(shlex.quote(a) for a in argv))
    print("batch %d, sequence %d, AdamW lr %g weight decay %g (GPT-2- and "
          "BERT-style: d_model %d, %d layers, %d heads, vocab %d)" % (
              args.batch, args.seq, args.lr, args.weight_decay,
              SIZES["d_model"], SIZES["layers"], SIZES["heads"],
              SIZES["vocab"]))
    print_setup(args, torch)
    print_jax_setup(args)
    print()
    rows = measure_models(
        args, lambda name, workdir: measure(args, name, workdir))
    failed = print_table(rows, args)
    print("load average at the end: %.2f" % os.getloadavg()[0])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
