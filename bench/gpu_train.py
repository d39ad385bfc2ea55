"""Training-step throughput on one GPU: GPT-2 small and BERT-base in bf16 (or
fp16), Kiln (kilnc --target=cuda --amp=bf16, run by kiln-run) beside PyTorch
eager (torch.autocast) and torch.compile on the same model, batch, data and
optimizer (AdamW), as tokens/s, TFLOP/s, MFU and ratios to torch.compile;
with --data-parallel also Kiln's data-parallel bundle on one rank (on the
GPU, its all-reduces through a NCCL communicator of one), and with
--expanded-attention Kiln's bundle computing attention as score products and
softmax kernels, with --loops-attention its bundle computing attention as
loops on CUDA cores, and with --cudnn-attention its bundle computing it on
cuDNN's fused attention, and with --gelu-epilogue its bundle applying the
tanh GELU and its derivative as cuBLASLt epilogues, each as a ratio to the
plain Kiln side.

    python3 bench/gpu_train.py [--models gpt2,bert128,bert512] [--layers N]
        [--gpt2-batch 8] [--bert128-batch 64] [--bert512-batch 32]
        [--steps 20] [--warmup 3] [--seconds 10] [--time-budget S]
        [--precision bf16|fp16|fp32] [--data-parallel] [--bucket-bytes N]
        [--expanded-attention] [--loops-attention] [--cudnn-attention]
        [--gelu-epilogue] [--no-compile]
        [--kiln-only] [--profile] [--profile-steps 3] [--out DIR]
        [--bin build/bin]
    python3 bench/gpu_train.py --tiny --device cpu     # the logic, on a CPU
    python3 bench/gpu_train.py --package-prepare DIR [--keep-onnx] [model options]
    python3 bench/gpu_train.py --package DIR [timing options]

--models lists MODEL or MODEL:PRECISION[+PRECISION...] (for example
gpt2:bf16+fp16,bert128): each model is measured in each of its precisions
(by default --precision's), one row of sides per model and precision.

Package mode (prepare here, run there: a GPU machine that cannot build Kiln).
--package-prepare DIR, on a build machine (no GPU needed), exports each model
and compiles it, in each of its precisions, with kilnc --target=DEVICE
(--amp=bf16 or --amp=fp16) --external-weights: the bundle
DIR/NAME-PRECISION.kiln holds no weights, only its program and kernels; with
--data-parallel also DIR/NAME-PRECISION-dp.kiln, with --expanded-attention
DIR/NAME-PRECISION-expanded.kiln, with --loops-attention
DIR/NAME-PRECISION-loops.kiln and with --cudnn-attention
DIR/NAME-PRECISION-cudnn.kiln, in the model's first precision. Beside them: NAME-train.npz (the batches) and NAME.json (the
architecture, sizes, batch, seed, lr, weight decay, each bundle's precision,
kilnc command and time, and the name and shape of each of the bundles'
parameters: the ONNX float initializers, checked to equal the PyTorch
module's state_dict entries of those names, values included). --package DIR,
on the GPU machine, needs neither kilnc nor ONNX: it builds the same module
(same sizes, torch.manual_seed(0)), saves its state_dict entries under the
recorded initializer names as the --params .npz of `kiln-run --target DEVICE
--params`, and times what the package holds (its models, precisions and
data-parallel and other attention bundles; --models selects among the
models, and
MODEL:PRECISION among its precisions) as below, on
the packaged batches. --bin then names the directory of kiln-run.

Models (test/lib/kiln_onnx_models.py torch_modules, the end-to-end tests'
definitions at full size), each followed by its mean cross-entropy:
  gpt2     GPT-2 small: 12 layers, d_model 768, 12 heads, vocab 50257,
           sequence 1024, tied embeddings, tanh GELU, causal attention
           written out (matmul, mask, softmax, matmul); labels the next token
  bert128  BERT-base: 12 layers, d_model 768, 12 heads, vocab 30522, FFN
           3072, sequence 128, erf GELU, post-LN, padding mask; two classes
           on the pooled first token; rows padded to between half and all
           of their tokens
  bert512  the same at sequence 512
--layers N replaces the 12 layers (to fit a time budget); --tiny uses
d_model 64, 4 heads, 2 layers, vocab 512, sequence 64 (bert128: 32).

Every side starts from the same weights (the exported model's; dropout off:
eval mode) and trains on the same --batches batches of seeded random tokens,
in order, cycling, with AdamW at --lr (1e-4) and --weight-decay (0.01),
torch.optim's other defaults (PyTorch: fused=True where torch has it).
Precision: bf16 (the default on cuda) compiles with kilnc --amp=bf16 and runs
PyTorch's forward under torch.autocast(bfloat16) (both: bf16 matrix
products, f32 accumulation and master weights); fp16 (cuda only) compiles
with kilnc --amp=fp16 (f16 matrix products, f32 accumulation and master
weights, a dynamic loss scale from 65536 that doubles after 2000 finite
steps and halves on an overflow, whose update is skipped) and runs PyTorch's
forward under torch.autocast(float16) with a GradScaler of the same
defaults; fp32 (the default on cpu) neither. If kilnc rejects --amp (an
older kilnc, or --device cpu, whose target computes in f32), Kiln is
compiled in fp32 instead and its rows say so (precision "fp32 (kilnc
rejected --amp=bf16)").

Data parallelism: --data-parallel also compiles each model, in its first
precision, with kilnc --data-parallel (--bucket-bytes N; default kilnc's)
and times that bundle like the plain one, in one process: the side "kiln
(data-parallel, 1 rank, NCCL)" ("kiln (data-parallel, 1 rank)" on the CPU
target, whose all-reduces are MPI's), whose "vs kiln" is its tokens/s over
the plain Kiln side's: what the all-reduces cost when there is nothing to
exchange. One rank averages each gradient over itself, so its losses must
be the plain side's: every step both ran is compared (rtol 1e-5); WRONG
otherwise.

Attention: kilnc's CUDA target computes attention and its gradient in bf16
or f16 on the runtime's tensor-core kernels (--cuda-attention=flash, its
default). --expanded-attention (cuda only) also compiles each model, in its
first precision, with --cuda-attention=expanded (score products on tensor
cores, softmax kernels over the stored scores) and --loops-attention with
--cuda-attention=loops (a thread per query or key row on CUDA cores), and
--cudnn-attention with --cuda-attention=cudnn (cuDNN's fused attention for
the attention it takes: GPT-2's causal, BERT's padding mask), and times
them, after the
PyTorch sides, as the sides "kiln (expanded attention)", "kiln (attention
loops)" and "kiln (cuDNN attention)", whose "vs kiln" is their tokens/s
over the plain Kiln side's; their losses are checked like every side's.

Timing. Kiln: one `kiln-run --target T --data --steps W+S --no-shuffle
--metrics` process; a step's time is its metrics record's samples /
samples_per_s (kiln-run's own wall time of the step: copying the batch in,
the step, reading the loss back); the figure is the mean over the steps
after the W warm-up steps (the first ones run the commands directly and
capture the CUDA graph). When the timed steps pass --seconds, the process is
stopped early (its metrics file holds every finished step). PyTorch: W warm-up
steps, then up to S steps or --seconds, each zero_grad, forward, backward,
optimizer.step (through the GradScaler in fp16) and loss.item() (kiln-run
also reads every step's loss, so both sides wait for the GPU once per step),
between torch.cuda.synchronize calls. torch.compile compiles
torch.compile(model) (mode "default"); its first step's time (compilation)
is reported apart. Once --time-budget is spent, the sides and models not yet
measured are skipped and listed (skipped_for_time); gpu_train.json is
written again after every model, so a run stopped from outside keeps what it
measured.

FLOPs per step: 6 * N * tokens + 12 * L * d_model * seq * tokens (PaLM,
appendix B: the 6N of the matrix products of forward and backward, plus the
attention scores and weighted sum, QK^T and AV, over the full seq x seq
matrices; the models compute them in full, under a mask), tokens = batch *
seq (padding included: it is computed). N counts the parameters of matrix
products: all parameters but embedding tables that are only looked up (GPT-2
keeps its token embedding, which is also the output projection). TFLOP/s =
FLOPs per step / step time; MFU = TFLOP/s / --peak-tflops (989, the dense
bf16 and fp16 peak of an H100/H200; not shown on a CPU).

Correctness: the first --check-steps (3) losses of every side against
PyTorch's, within --rtol (2e-2 in bf16 and fp16, else 2e-3); a mismatch is
printed as WRONG and the script exits 1 (after timing). In bf16 and fp16 the
reference is PyTorch eager in fp32 (those steps run untimed before the
sides), since either rounding may move a step's loss: on an H200, BERT-base
at sequence 512 had a second loss of 1.4045 in fp32, 1.4095 for Kiln's bf16
step and 1.3775 for PyTorch eager's; in fp32 it is eager itself. In fp16 a
side whose dynamic loss scale skipped an update (its scale drops after that
step) trains on from other weights than a side that did not, and whether one
overflows is a matter of rounding: the losses are compared up to the first
step either side skipped, that step included, and the check says so.

--kiln-only leaves the PyTorch sides out (no loss check then): for
KILN_CUDA_PROFILE=FILE runs, whose per-command device times the CUDA
backend writes to FILE (see docs/runtime.md). --profile (cuda only) takes
such a profile of each row's plain Kiln bundle after the row's sides:
--profile-steps (3) steps of kiln-run under
KILN_CUDA_PROFILE=OUT/profile-MODEL-PRECISION.txt (the first run is left
out; the others run the commands without a CUDA graph), read back into the
row's "profile" record and one `profile_lines` entry per entry point (the
step's time on the stream and in commands, by kind, and its longest kernel
or shape); a profile run that fails counts as a failure. On cuda every
bundle is compiled with kilnc --report=cost --gpu=h100,h200,a100 too, its
report kept beside it (NAME-PRECISION.cost.txt, packaged with it), and
each profiled entry point gets a `model_lines` entry: the cost model's
prediction for this GPU beside the measurement, the step and each kind of
command (gemm, kernel, layer_norm, attention), measured / predicted ms.

Writes DIR/gpu_train.json (setup, formula, one record per model, precision
and side) to --out (default: $OUT when set, else ./gpu-bench-out), and ends
with two lines, `result fp16: ...` and `result data-parallel: ...` (ok,
FAILED or not measured, with the figures), which scripts/gpu-check.sh puts
into its summary; exits 1 when a side fails or a check is WRONG, 0
otherwise.
"""
import argparse
import copy
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))

PEAK_TFLOPS_H100 = 989.0
PRECISIONS = ("bf16", "fp16", "fp32")
# One rank trains as the plain bundle: the same kernels, each gradient
# averaged over itself.
DATA_PARALLEL_RTOL = 1e-5

# name -> (architecture, sizes, default batch)
FULL = {
    "gpt2": ("gpt2", dict(d_model=768, heads=12, vocab=50257, seq=1024,
                          layers=12), 8),
    "bert128": ("bert", dict(d_model=768, heads=12, vocab=30522, seq=128,
                             layers=12), 64),
    "bert512": ("bert", dict(d_model=768, heads=12, vocab=30522, seq=512,
                             layers=12), 32),
}
TINY = {
    "gpt2": ("gpt2", dict(d_model=64, heads=4, vocab=512, seq=64, layers=2),
             4),
    "bert128": ("bert", dict(d_model=64, heads=4, vocab=512, seq=32,
                             layers=2), 8),
    "bert512": ("bert", dict(d_model=64, heads=4, vocab=512, seq=64,
                             layers=2), 4),
}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tiny", action="store_true",
                        help="small dims, to exercise the script")
    parser.add_argument("--models", default="gpt2,bert128,bert512",
                        help="MODEL or MODEL:PRECISION[+PRECISION...], "
                        "comma-separated")
    parser.add_argument("--layers", type=int,
                        help="layers of every model (default 12; tiny 2)")
    for name in FULL:
        parser.add_argument("--%s-batch" % name, type=int,
                            dest="%s_batch" % name)
    parser.add_argument("--batches", type=int, default=4,
                        help="distinct batches of data, cycled")
    parser.add_argument("--steps", type=int, default=20,
                        help="timed steps at most, per side")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="stop a side's timed steps after this long")
    parser.add_argument("--time-budget", type=float,
                        help="seconds for the whole script: a side or model "
                        "whose measurement would start later is skipped")
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="of the models that name none (default bf16 on "
                        "cuda, fp32 on cpu; fp16 is cuda-only)")
    parser.add_argument("--data-parallel", action="store_true",
                        help="also time kilnc --data-parallel's bundle on "
                        "one rank, in each model's first precision")
    parser.add_argument("--bucket-bytes", type=int,
                        help="kilnc --bucket-bytes for --data-parallel "
                        "(default kilnc's)")
    parser.add_argument("--expanded-attention", action="store_true",
                        help="also time kilnc --cuda-attention=expanded's "
                        "bundle, in each model's first precision")
    parser.add_argument("--loops-attention", action="store_true",
                        help="also time kilnc --cuda-attention=loops's "
                        "bundle, in each model's first precision")
    parser.add_argument("--cudnn-attention", action="store_true",
                        help="also time kilnc --cuda-attention=cudnn's "
                        "bundle (cuDNN's fused attention), in each model's "
                        "first precision")
    parser.add_argument("--gelu-epilogue", action="store_true",
                        help="also time kilnc --cuda-gelu-epilogue's bundle "
                        "(the tanh GELU and its derivative as cuBLASLt "
                        "epilogues), in each model's first precision")
    parser.add_argument("--no-compile", action="store_true",
                        help="leave torch.compile out")
    parser.add_argument("--kiln-only", action="store_true",
                        help="leave the PyTorch sides out (no loss check)")
    parser.add_argument("--profile", action="store_true",
                        help="after each row, run its plain Kiln bundle "
                        "again for --profile-steps steps under "
                        "KILN_CUDA_PROFILE, to --out's "
                        "profile-MODEL-PRECISION.txt (cuda only)")
    parser.add_argument("--profile-steps", type=int, default=3,
                        help="steps of a --profile run; the first is left "
                        "out of the profile (default 3)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--check-steps", type=int, default=3)
    parser.add_argument("--rtol", type=float,
                        help="loss tolerance (default 2e-2 bf16 and fp16, "
                        "2e-3 fp32)")
    parser.add_argument("--peak-tflops", type=float,
                        help="for MFU (default 989 on cuda, none on cpu)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where kilnc and kiln-run are")
    parser.add_argument("--out", default=os.environ.get("OUT") or
                        "gpu-bench-out",
                        help="directory for gpu_train.json (default: $OUT, "
                        "else ./gpu-bench-out)")
    parser.add_argument("--work-dir", metavar="DIR",
                        help="write the models, data, bundles and kilnc and "
                        "kiln-run logs to DIR and keep them (default: a "
                        "temporary directory, removed at the end; GPT-2 "
                        "small's bundle is 1.5 GB)")
    parser.add_argument("--kilnc-timeout", type=float, default=900)
    parser.add_argument("--kilnc-jobs", type=int,
                        default=max(2, min(8, (os.cpu_count() or 2) // 2)),
                        help="kilnc processes at once (default: half the "
                        "cores, 2 to 8; each takes up to 3 GiB on GPT-2 "
                        "small)")
    parser.add_argument("--package-prepare", metavar="DIR",
                        help="export and compile the models with "
                        "--external-weights into DIR, and stop")
    parser.add_argument("--keep-onnx", action="store_true",
                        help="with --package-prepare, keep each model's "
                        "NAME.onnx in DIR (removed by default: the "
                        "package carries no weights), to compile it again "
                        "with other kilnc options")
    parser.add_argument("--package", metavar="DIR",
                        help="time what a --package-prepare directory holds "
                        "(its models, precisions, data-parallel bundles, "
                        "sizes, batches and data)")
    args = parser.parse_args(argv)
    if args.package_prepare and args.package:
        parser.error("--package-prepare and --package exclude each other")
    args.precision = args.precision or ("bf16" if args.device == "cuda"
                                        else "fp32")
    try:
        args.rows = model_rows(args.models, args.precision)
    except ValueError as error:
        parser.error(str(error))
    if args.package:
        if (args.data_parallel or args.bucket_bytes or
                args.expanded_attention or args.loops_attention or
                args.cudnn_attention or args.gelu_epilogue):
            parser.error("--package measures the data-parallel and other "
                         "attention bundles the package holds; "
                         "--data-parallel, --bucket-bytes, "
                         "--expanded-attention, --loops-attention, "
                         "--cudnn-attention and --gelu-epilogue belong to "
                         "--package-prepare")
        rows = package_rows(args.package)
        if not rows:
            parser.error("%s holds no packaged model (NAME.json)"
                         % args.package)
        if args.models != parser.get_default("models"):
            # MODEL selects its packaged precisions, MODEL:P[+P...] those.
            wanted = model_rows(args.models, None)
            rows = [(n, p) for n, p in rows
                    if (n, p) in wanted or (n, None) in wanted]
        args.rows = rows
    if args.device != "cuda" and (args.expanded_attention or
                                  args.loops_attention or
                                  args.cudnn_attention or args.gelu_epilogue):
        parser.error("--expanded-attention, --loops-attention, "
                     "--cudnn-attention and --gelu-epilogue need "
                     "--device cuda: --cuda-attention chooses between the "
                     "CUDA target's ways (the CPU target always expands "
                     "attention)")
    if args.profile and args.device != "cuda":
        parser.error("--profile needs --device cuda: KILN_CUDA_PROFILE is "
                     "the CUDA backend's (the CPU target has no per-command "
                     "device times)")
    if args.profile and args.profile_steps < 2:
        parser.error("--profile-steps must be at least 2: a profile leaves "
                     "the entry point's first run out")
    if args.device != "cuda" and any(p == "fp16" for _, p in args.rows):
        parser.error("fp16 needs --device cuda: kilnc --amp=fp16 rounds the "
                     "products to f16 on the CUDA target only (the CPU target "
                     "computes in f32), and PyTorch's GradScaler is CUDA's")
    args.models = list(dict.fromkeys(name for name, _ in args.rows))
    if args.peak_tflops is None and args.device == "cuda":
        args.peak_tflops = PEAK_TFLOPS_H100
    return args


def model_rows(spec, default_precision):
    """[(model, precision)] of a --models list (MODEL or
    MODEL:PRECISION[+PRECISION...]), a MODEL alone with default_precision
    (which may be None: any); raises ValueError."""
    rows = []
    for item in (m for m in spec.split(",") if m):
        name, _, precisions = item.partition(":")
        if name not in FULL:
            raise ValueError("unknown model %r (gpt2, bert128, bert512)"
                             % name)
        for precision in (precisions.split("+") if precisions
                          else [default_precision]):
            if precision not in PRECISIONS and (precisions or
                                                precision is not None):
                raise ValueError("unknown precision %r in %r (bf16, fp16, "
                                 "fp32)" % (precision, item))
            if (name, precision) not in rows:
                rows.append((name, precision))
    return rows


def rtol_of(args, precision):
    if args.rtol is not None:
        return args.rtol
    return 2e-2 if precision in ("bf16", "fp16") else 2e-3


def package_rows(directory):
    """[(model, precision)] of a package directory: its models in FULL's
    order, each in its packaged precisions' order."""
    rows = []
    for name in FULL:
        path = os.path.join(directory, name + ".json")
        if os.path.exists(path):
            with open(path) as f:
                rows += [(name, p) for p in json.load(f)["bundles"]]
    return rows


def model_config(args, name):
    if args.package:
        config = read_package_config(args, name)
        return config["arch"], config["sizes"], config["batch"]
    arch, sizes, batch = (TINY if args.tiny else FULL)[name]
    sizes = dict(sizes)
    if args.layers:
        sizes["layers"] = args.layers
    return arch, sizes, getattr(args, "%s_batch" % name) or batch


#===-----------------------------------------------------------------------===#
# Models, data, FLOPs.
#===-----------------------------------------------------------------------===#

def loss_model(arch, sizes):
    """The model followed by its mean cross-entropy, seeded, in eval mode."""
    import torch

    import kiln_onnx_models as models
    torch.manual_seed(0)
    _, _, _, Gpt, Bert = models.torch_modules(**sizes)
    classes = sizes["vocab"] if arch == "gpt2" else 2

    class WithLoss(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, *inputs):
            *features, labels = inputs
            logits = self.net(*features)
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, classes), labels.reshape(-1))

    return WithLoss(Gpt() if arch == "gpt2" else Bert()).eval()


def training_data(arch, sizes, samples):
    """samples rows keyed by input name, labels last (as
    bench/train_throughput.py)."""
    generator = np.random.default_rng(1)
    seq, vocab = sizes["seq"], sizes["vocab"]
    if arch == "gpt2":
        tokens = generator.integers(0, vocab, (samples, seq + 1))
        return {"idx": tokens[:, :-1].copy(), "labels": tokens[:, 1:].copy()}
    input_ids = generator.integers(1, vocab, (samples, seq))
    attention_mask = np.ones((samples, seq), np.int64)
    for row, length in enumerate(generator.integers(seq // 2, seq + 1,
                                                    samples)):
        input_ids[row, length:] = 0
        attention_mask[row, length:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "labels": generator.integers(0, 2, samples)}


def matmul_parameters(model, arch):
    """Parameters of matrix products: all but lookup-only embeddings."""
    lookup_only = ("wpe",) if arch == "gpt2" else (
        "word_embeddings", "position_embeddings", "token_type_embeddings")
    return sum(p.numel() for name, p in model.named_parameters()
               if not any(part in name for part in lookup_only))


def flops_per_step(n, sizes, batch):
    tokens = batch * sizes["seq"]
    return (6 * n * tokens +
            12 * sizes["layers"] * sizes["d_model"] * sizes["seq"] * tokens)


def export_onnx(model, data, batch, path):
    import inspect

    import torch
    example = tuple(torch.from_numpy(v[:batch].astype(np.int64))
                    for v in data.values())
    extra = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        extra["dynamo"] = False  # the TorchScript exporter, as in the tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, path, opset_version=17,
                          input_names=list(data), output_names=["loss"],
                          dynamic_axes={k: {0: "batch"} for k in data},
                          do_constant_folding=False, **extra)


#===-----------------------------------------------------------------------===#
# Kiln.
#===-----------------------------------------------------------------------===#

def kilnc_command(args, onnx_path, batch, bundle, amp, data_parallel,
                  attention=None):
    command = [os.path.join(args.bin, "kilnc"), onnx_path,
               "--batch-size=%d" % batch, "--optimizer=adamw",
               "--lr=%g" % args.lr, "--weight-decay=%g" % args.weight_decay,
               "--loss-output=loss", "--target=%s" % args.device]
    if amp:
        command.append("--amp=%s" % amp)
    if data_parallel:
        command.append("--data-parallel")
        if args.bucket_bytes:
            command.append("--bucket-bytes=%d" % args.bucket_bytes)
    if attention == "gelu":
        command.append("--cuda-gelu-epilogue")
    elif attention:
        command.append("--cuda-attention=%s" % attention)
    if args.package_prepare:
        command.append("--external-weights")
    if args.device == "cuda":
        # The cost model's prediction for each GPU the benchmark may run
        # on, beside the bundle (cost_file): the profile compares.
        command += ["--report=cost", "--gpu=" + ",".join(COST_GPUS)]
    return command + ["-o", bundle]


# The GPUs kilnc's cost report models (kilnc --gpu), by the name
# torch.cuda.get_device_name() and the report's header give them.
COST_GPUS = ("h100", "h200", "a100")


def cost_file(bundle):
    """Where the cost model's report of `bundle` is kept."""
    return re.sub(r"\.kiln$", "", bundle) + ".cost.txt"


class KilnCompile:
    """kilnc in the background, at most --kilnc-jobs at once (the others
    wait their turn); retried in fp32 when it rejects --amp. wait() returns
    (bundle, precision, seconds) or raises RuntimeError."""

    lock = threading.Lock()
    queued, running = [], 0

    def __init__(self, args, onnx_path, batch, bundle, log, precision,
                 data_parallel=False, attention=None):
        self.args, self.onnx_path, self.batch = args, onnx_path, batch
        self.bundle, self.log = bundle, log
        self.data_parallel, self.attention = data_parallel, attention
        self.amp = precision if precision in ("bf16", "fp16") else None
        self.precision = precision
        self.done = threading.Event()
        with KilnCompile.lock:
            KilnCompile.queued.append(self)
        KilnCompile.start_queued(args.kilnc_jobs)

    @classmethod
    def start_queued(cls, jobs):
        with cls.lock:
            while cls.queued and cls.running < max(1, jobs):
                cls.queued.pop(0)._start()

    def _start(self):
        """Starts kilnc (under the lock) and a thread that waits for it."""
        KilnCompile.running += 1
        self.command = kilnc_command(self.args, self.onnx_path, self.batch,
                                     self.bundle, self.amp,
                                     self.data_parallel, self.attention)
        self.output = open(self.log, "w")
        self.output.write("$ %s\n" % " ".join(self.command))
        self.output.flush()
        self.timed_out = False
        self.started = time.perf_counter()
        self.process = subprocess.Popen(self.command, stdout=self.output,
                                        stderr=subprocess.STDOUT)
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        try:
            self.code = self.process.wait(self.args.kilnc_timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.code = self.process.wait()
            self.timed_out = True
        self.seconds = time.perf_counter() - self.started
        self.output.close()
        with KilnCompile.lock:
            KilnCompile.running -= 1
        self.done.set()
        KilnCompile.start_queued(self.args.kilnc_jobs)

    def wait(self):
        self.done.wait()
        if self.timed_out:
            raise RuntimeError("kilnc did not finish in %.0f s "
                               "(--kilnc-timeout)" % self.args.kilnc_timeout)
        with open(self.log) as f:
            text = f.read()
        if self.code and self.amp and "--amp" in text and (
                "Unknown command line argument" in text or
                "unknown" in text.lower() or
                "applies to the CUDA target" in text):
            message = [l for l in text.splitlines()
                       if "--amp" in l and not l.startswith("$ ")]
            print("note: kilnc rejected --amp=%s (%s); compiling Kiln in "
                  "fp32 instead" % (self.amp, message[0].strip() if message
                                    else "see " + self.log), flush=True)
            self.precision = "fp32 (kilnc rejected --amp=%s)" % self.amp
            self.amp = None
            os.rename(self.log, self.log + ".amp-rejected")
            self.done.clear()
            with KilnCompile.lock:
                self._start()
            return self.wait()
        if self.code:
            raise RuntimeError("kilnc failed (exit %d): %s" % (
                self.code, text.strip()[-3000:]))
        report = text.find("cost report: ")
        if report >= 0:
            with open(cost_file(self.bundle), "w") as f:
                f.write(text[report:])
        return self.bundle, self.precision, self.seconds


def run_kiln(args, bundle, data_path, workdir, name, params=None):
    """Trains with kiln-run until W + S steps or --seconds of timed steps
    (from the --params file params when given); returns (per-step seconds of
    the timed steps, all losses, all loss scales or None)."""
    metrics = os.path.join(workdir, name + "-kiln-metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    total = args.warmup + args.steps
    command = [os.path.join(args.bin, "kiln-run"), bundle, "--target",
               args.device, "--data", data_path, "--steps", str(total),
               "--no-shuffle", "--log-every", str(total), "--metrics",
               metrics] + (["--params", params] if params else [])
    log_path = os.path.join(workdir, name + "-kiln-run.log")
    with open(log_path, "w") as log:
        log.write("$ %s\n" % " ".join(command))
        log.flush()
        process = subprocess.Popen(command, stdout=log,
                                   stderr=subprocess.STDOUT)
        timed_since = None
        records = []
        while process.poll() is None:
            time.sleep(0.2)
            records = read_records(metrics)
            if len(records) >= args.warmup and timed_since is None:
                timed_since = time.perf_counter()
            if (timed_since is not None and len(records) >= args.warmup + 2
                    and time.perf_counter() - timed_since > args.seconds):
                process.terminate()
                process.wait()
                break
    records = read_records(metrics)
    if process.returncode not in (0, -15) or len(records) <= args.warmup:
        with open(log_path) as f:
            output = f.read().split("\n", 1)[-1]  # after the command line
        raise RuntimeError("kiln-run failed (exit %s, %d steps): %s" % (
            process.returncode, len(records), output.strip()[-3000:]))
    times = [r["samples"] / r["samples_per_s"] for r in records[args.warmup:]
             if r.get("samples_per_s")]
    scales = ([r.get("loss_scale") for r in records]
              if any("loss_scale" in r for r in records) else None)
    return times, [r["loss"] for r in records], scales


def parse_profile(text):
    """The figures of a KILN_CUDA_PROFILE file (runtime/src/cuda/Profile.cpp
    writes it): per entry point, the runs timed, the stream's and the
    commands' milliseconds per run, the time by kind and by kernel or shape
    (longest first); a list of dicts, in the file's order."""
    entries, entry, table = [], None, None
    row = re.compile(r"^\s+([0-9.]+)\s+([0-9.]+)%\s+([0-9]*)\s+(.*)$")
    for line in text.splitlines():
        head = re.match(r"^entry point '([^']*)': (\d+) run", line)
        if head:
            entry = dict(entry=head.group(1), runs=int(head.group(2)),
                         by_kind=[], longest=[])
            entries.append(entry)
            table = None
            continue
        if entry is None:
            continue
        per_run = re.match(r"^\s+per run: ([0-9.]+) ms on the stream.*, "
                           r"([0-9.]+) ms \(", line)
        if per_run:
            entry["stream_ms"] = float(per_run.group(1))
            entry["commands_ms"] = float(per_run.group(2))
        elif line.strip() == "by kind:":
            table = "by_kind"
        elif line.strip().startswith("by kernel or shape"):
            table = "longest"
        elif line.strip().startswith("by command"):
            table = None
        elif table and row.match(line):
            ms, _, count, what = row.match(line).groups()
            entry[table].append(dict(ms=float(ms), count=int(count or 0),
                                     what=what))
    return entries


def parse_cost_report(text):
    """kilnc --report=cost's predictions (tools/kilnc/CostModel.cpp writes
    them): {GPU (as the header names it, "H200"): {entry point:
    dict(predicted_ms, bound_ms, kinds={kind: predicted ms})}}."""
    reports, gpu, entry = {}, None, None
    for line in text.splitlines():
        head = re.match(r"^cost report: NVIDIA (\S+)", line)
        if head:
            gpu = head.group(1).upper()
            reports[gpu] = {}
            continue
        point = re.match(r"^entry point '([^']*)': \d+ commands, predicted "
                         r"([0-9.]+) ms, lower bound ([0-9.]+) ms", line)
        if point and gpu:
            entry = reports[gpu][point.group(1)] = dict(
                predicted_ms=float(point.group(2)),
                bound_ms=float(point.group(3)), kinds={})
            continue
        kind = re.match(r"^  (\w+)\s+\d+\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)"
                        r"\s+[0-9.]+%\s+[0-9.]+$", line)
        if kind and entry is not None:
            entry["kinds"][kind.group(1)] = float(kind.group(2))
    return reports


def cost_gpu(device_name):
    """The cost report's name of the GPU torch names `device_name` ("NVIDIA
    H200" -> "H200"), or None for one kilnc does not model."""
    for gpu in COST_GPUS:
        if gpu.upper() in device_name.upper():
            return gpu.upper()
    return None


def model_line(tag, gpu, entry, predicted):
    """The cost model's prediction for a profiled entry point beside what
    the profile measured: the step on the stream, then each kind of
    command, measured / predicted ms."""
    if not predicted:
        return "%s %s: no prediction (no cost report of it for %s)" % (
            tag, entry["entry"], gpu or "this GPU, which kilnc does not model")
    if not entry["runs"]:
        return "%s %s: not measured (no run timed); predicted %.2f ms on %s" % (
            tag, entry["entry"], predicted["predicted_ms"], gpu)
    measured = entry.get("stream_ms", float("nan"))
    kinds = {k["what"]: k["ms"] for k in entry["by_kind"]}
    parts = ["%s %.2f/%.2f" % (kind, kinds.get(kind, 0.0), ms)
             for kind, ms in sorted(predicted["kinds"].items(),
                                    key=lambda item: -item[1])]
    return ("%s %s on %s: measured %.2f ms, predicted %.2f (measured / "
            "predicted %.2f; bound %.2f); by kind, measured/predicted ms: %s"
            % (tag, entry["entry"], gpu, measured, predicted["predicted_ms"],
               measured / predicted["predicted_ms"]
               if predicted["predicted_ms"] else float("nan"),
               predicted["bound_ms"], ", ".join(parts)))


def profile_line(tag, entry):
    """One line of a profile's figures: the stream's time per run and where
    it went by kind, and the longest kernel or shape."""
    if not entry["runs"]:
        return "%s %s: no run timed (a profile leaves an entry point's " \
            "first run out)" % (tag, entry["entry"])
    kinds = ", ".join("%s %.2f ms (%d)" % (k["what"], k["ms"], k["count"])
                      for k in entry["by_kind"])
    longest = entry["longest"][0] if entry["longest"] else None
    return "%s %s: %.2f ms/run on the stream, %.2f ms in commands: %s%s" % (
        tag, entry["entry"], entry.get("stream_ms", float("nan")),
        entry.get("commands_ms", float("nan")), kinds or "no commands",
        "; longest %s %.2f ms (%d)" % (longest["what"], longest["ms"],
                                       longest["count"]) if longest else "")


def profile_kiln(args, bundle, data_path, tag, params):
    """Runs the bundle for --profile-steps steps under KILN_CUDA_PROFILE
    (commands run without a CUDA graph, each between two events); returns
    the row's profile record: the file, its figures or the error."""
    path = os.path.abspath(os.path.join(args.out, "profile-%s.txt" % tag))
    if os.path.exists(path):
        os.remove(path)
    command = [os.path.join(args.bin, "kiln-run"), bundle, "--target",
               args.device, "--data", data_path, "--steps",
               str(args.profile_steps), "--no-shuffle", "--log-every",
               str(args.profile_steps)] + (["--params", params] if params
                                           else [])
    log_path = os.path.join(args.work_dir, tag + "-profile-kiln-run.log")
    started = time.perf_counter()
    with open(log_path, "w") as log:
        log.write("$ KILN_CUDA_PROFILE=%s %s\n" % (path, " ".join(command)))
        log.flush()
        try:
            code = subprocess.call(command, stdout=log,
                                   stderr=subprocess.STDOUT, timeout=300,
                                   env=dict(os.environ,
                                            KILN_CUDA_PROFILE=path))
        except subprocess.TimeoutExpired:
            code = "timed out after 300 s"
        except OSError as error:
            code = "could not start: %s" % error
    record = dict(file=path, seconds=time.perf_counter() - started)
    if code != 0:
        with open(log_path) as f:
            output = f.read().split("\n", 1)[-1]
        record["error"] = "kiln-run failed (exit %s): %s" % (
            code, output.strip()[-1000:])
    elif not os.path.exists(path):
        record["error"] = ("kiln-run wrote no profile to %s (a backend "
                           "without KILN_CUDA_PROFILE?)" % path)
    else:
        with open(path) as f:
            record["entries"] = parse_profile(f.read())
        if not record["entries"]:
            record["error"] = "%s holds no entry point's figures" % path
        record["cost"] = predictions(bundle)
    return record


def read_records(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:  # a line being written
            break
    return records


#===-----------------------------------------------------------------------===#
# PyTorch.
#===-----------------------------------------------------------------------===#

AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}


class TorchSide:
    """A copy of the model on the device, its AdamW (and in fp16 its
    GradScaler), the batches there."""

    def __init__(self, args, model, data, batch, compiled, precision):
        import torch
        self.torch = torch
        self.args = args
        self.precision = precision
        self.device = torch.device(args.device)
        self.model = copy.deepcopy(model).to(self.device).eval()
        kwargs = dict(lr=args.lr, weight_decay=args.weight_decay)
        self.fused = False
        if args.device == "cuda":
            import inspect
            if "fused" in inspect.signature(torch.optim.AdamW).parameters:
                kwargs["fused"] = True
                self.fused = True
        self.optimizer = torch.optim.AdamW(self.model.parameters(), **kwargs)
        self.forward = torch.compile(self.model) if compiled else self.model
        # GradScaler's defaults are kilnc --amp=fp16's: scale 65536, doubled
        # after 2000 finite steps, halved on an overflow (update skipped).
        self.scaler = None
        if precision == "fp16":
            self.scaler = (torch.amp.GradScaler("cuda")
                           if hasattr(torch.amp, "GradScaler")
                           else torch.cuda.amp.GradScaler())
        tensors = [torch.from_numpy(v.astype(np.int64)).to(self.device)
                   for v in data.values()]
        count = len(tensors[0]) // batch
        self.batches = [tuple(t[i * batch:(i + 1) * batch] for t in tensors)
                        for i in range(count)]
        self.cursor = 0
        # The scale each of the first --check-steps + 1 steps used.
        self.scales = []

    def synchronize(self):
        if self.args.device == "cuda":
            self.torch.cuda.synchronize()

    def step(self):
        torch = self.torch
        batch = self.batches[self.cursor % len(self.batches)]
        self.cursor += 1
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler and len(self.scales) <= self.args.check_steps:
            self.scales.append(self.scaler.get_scale())
        dtype = AUTOCAST.get(self.precision)
        with torch.autocast(device_type=self.args.device,
                            dtype=getattr(torch, dtype or "bfloat16"),
                            enabled=dtype is not None):
            loss = self.forward(*batch)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def loss_scale(self):
        return self.scaler.get_scale() if self.scaler else None

    def run(self):
        """(first step seconds, per-step seconds of the timed steps, losses
        of every step)."""
        losses = []
        start = time.perf_counter()
        losses.append(self.step())
        first = time.perf_counter() - start
        for _ in range(self.args.warmup - 1):
            losses.append(self.step())
        self.synchronize()
        times = []
        begin = time.perf_counter()
        while (len(times) < self.args.steps and
               (len(times) < 2 or
                time.perf_counter() - begin < self.args.seconds)):
            start = time.perf_counter()
            losses.append(self.step())
            self.synchronize()
            times.append(time.perf_counter() - start)
        return first, times, losses

    def release(self):
        del self.model, self.forward, self.optimizer, self.batches
        self.scaler = None
        if self.args.device == "cuda":
            self.torch.cuda.empty_cache()


def torch_compile_status(args, torch):
    """None when torch.compile can run here, else why not."""
    if args.no_compile:
        return "left out (--no-compile)"
    if not hasattr(torch, "compile"):
        return "unavailable: torch %s has no torch.compile" % torch.__version__
    return None


#===-----------------------------------------------------------------------===#
# The measurement and the report.
#===-----------------------------------------------------------------------===#

def side_record(side, precision, times, losses, flops, tokens, args,
                extra=None):
    record = dict(side=side, precision=precision, steps_timed=len(times),
                  first_losses=losses[:args.check_steps])
    if times:
        step = sum(times) / len(times)
        record.update(ms_per_step=step * 1e3,
                      median_ms_per_step=float(np.median(times)) * 1e3,
                      tokens_per_s=tokens / step,
                      tflops=flops / step / 1e12)
        if args.peak_tflops:
            record["mfu"] = record["tflops"] / args.peak_tflops
    record.update(extra or {})
    return record


def first_skip(scales):
    """The first step (from 1) whose update a dynamic loss scale skipped:
    the scale it used drops after it; None if none did."""
    for step in range(1, len(scales or [])):
        if scales[step] < scales[step - 1]:
            return step
    return None


def check_losses(record, reference, rtol):
    """The record's first losses against the reference record's (PyTorch
    eager's, in fp32 for bf16 and fp16 rows), up to the first step either
    skipped in fp16."""
    got = record.get("first_losses") or []
    want = reference.get("first_losses") or []
    count = min(len(got), len(want))
    skips = [(step, who) for step, who in (
        (first_skip(record.get("first_loss_scales")), record["side"]),
        (first_skip(reference.get("first_loss_scales")), reference["side"]))
        if step is not None]
    if skips:
        step, who = min(skips)
        if step < count:
            count = step
            record["loss_check_note"] = (
                "compared up to step %d, whose update %s skipped" % (step, who))
    if count == 0:
        return
    diff = max(abs(g - w) / max(abs(w), 1e-30) if g is not None else
               float("inf") for g, w in zip(got[:count], want[:count]))
    record["loss_rel_diff"] = diff
    record["loss_reference"] = reference["side"]
    record["loss_check_steps"] = count
    record["loss_check"] = "ok" if diff <= rtol else "WRONG"


def check_data_parallel_losses(record, got, want):
    """The data-parallel side's losses against the plain Kiln side's, over
    the steps both ran: equal, or within DATA_PARALLEL_RTOL, or WRONG."""
    count = min(len(got), len(want))
    if count == 0:
        record["losses_vs_kiln"] = "not compared (no common step)"
        return
    diff = max(abs(g - w) / max(abs(w), 1e-30) if None not in (g, w) else
               float("inf") for g, w in zip(got[:count], want[:count]))
    record["losses_vs_kiln_rel_diff"] = diff
    record["losses_vs_kiln_steps"] = count
    record["losses_vs_kiln"] = ("equal" if diff == 0 else "within %g"
                                % DATA_PARALLEL_RTOL
                                if diff <= DATA_PARALLEL_RTOL else "WRONG")


# The other ways kilnc can compute attention on the CUDA target, and the
# GELU epilogues: the job and package kind, the side's name and the
# bundle's suffix.
ATTENTION_VARIANTS = [("expanded", "kiln (expanded attention)", "-expanded"),
                      ("loops", "kiln (attention loops)", "-loops"),
                      ("cudnn", "kiln (cuDNN attention)", "-cudnn"),
                      ("gelu", "kiln (GELU epilogues)", "-gelu")]


def variant_wanted(args, kind):
    """Whether the command line asks for the bundle of this kind."""
    if kind == "gelu":
        return args.gelu_epilogue
    return getattr(args, kind + "_attention")


def data_parallel_side(args):
    return ("kiln (data-parallel, 1 rank, NCCL)" if args.device == "cuda"
            else "kiln (data-parallel, 1 rank)")


class Budget:
    """--time-budget: whether the next side or model may start."""

    def __init__(self, args, started):
        self.limit, self.started = args.time_budget, started
        self.skipped = []

    def spent(self, what):
        if (self.limit and time.perf_counter() - self.started >
                self.limit):
            self.skipped.append(what)
            print("  %s: skipped (--time-budget %.0f s spent)"
                  % (what, self.limit), flush=True)
            return True
        return False


def run_kiln_side(args, side, compiled, data_path, tag, params, flops,
                  tokens):
    """The record of one Kiln side, and its losses (None when it failed)."""
    try:
        if isinstance(compiled, RuntimeError):
            raise compiled
        bundle, precision, kilnc_seconds = compiled
        print("  %s: kilnc %.1f s (%s)" % (side, kilnc_seconds, precision),
              flush=True)
        times, losses, scales = run_kiln(args, bundle, data_path,
                                         args.work_dir, tag, params)
        extra = dict(kilnc_s=kilnc_seconds)
        if scales:
            extra.update(loss_scale_first=scales[0],
                         loss_scale_last=scales[-1],
                         first_loss_scales=scales[:args.check_steps + 1])
        record = side_record(side, precision, times, losses, flops, tokens,
                             args, extra)
        print("  %s: %.2f ms/step" % (side, record.get(
            "ms_per_step", float("nan"))), flush=True)
        return record, losses
    except RuntimeError as error:
        print("  %s: FAILED: %s" % (side, error), flush=True)
        return dict(side=side, error=str(error)), None


def measure(args, name, precision, prepared, compiled, budget):
    """One row: Kiln (and its data-parallel bundle) beside PyTorch eager and
    torch.compile, for one model in one precision; returns (row,
    failures)."""
    import torch
    arch, sizes, batch = model_config(args, name)
    model, n, data, data_path, params = (
        prepared[k] for k in ("model", "n", "data", "data_path", "params"))
    flops = flops_per_step(n, sizes, batch)
    tokens = batch * sizes["seq"]
    row = dict(model=name, precision=precision, arch=arch, sizes=sizes,
               batch=batch, tokens_per_step=tokens, matmul_params=n,
               params=sum(p.numel() for p in model.parameters()),
               flops_per_step=flops, sides=[])
    what = "%s %s" % (name, precision)
    tag = "%s-%s" % (name, precision)
    skipped = dict(skipped="--time-budget spent")
    kiln_losses = None
    if budget.spent(what + " kiln"):
        row["sides"].append(dict(side="kiln", **skipped))
    else:
        record, kiln_losses = run_kiln_side(
            args, "kiln", compiled["plain"], data_path, tag, params, flops,
            tokens)
        row["sides"].append(record)

    def other_bundle(kind, side, suffix):
        """Times the model's other Kiln bundle of this kind, if any."""
        if compiled.get(kind) is None:
            return
        if budget.spent("%s %s" % (what, side)):
            row["sides"].append(dict(side=side, **skipped))
            return
        record, losses = run_kiln_side(args, side, compiled[kind], data_path,
                                       tag + suffix, params, flops, tokens)
        if (kind == "data_parallel" and losses is not None and
                kiln_losses is not None):
            check_data_parallel_losses(record, losses, kiln_losses)
        row["sides"].append(record)
    other_bundle("data_parallel", data_parallel_side(args), "-dp")
    sides = [("torch eager", False)]
    compile_status = torch_compile_status(args, torch)
    if args.kiln_only:
        sides = []
        row["torch"] = "left out (--kiln-only)"
    elif args.torch_unavailable:
        sides = []
        row["torch"] = args.torch_unavailable
    elif compile_status is None:
        sides.append(("torch.compile", True))
    else:
        row["torch_compile"] = compile_status
    if sides and precision != "fp32":
        # The loss check's reference: the same steps in fp32, untimed.
        try:
            trainer = TorchSide(args, model, data, batch, False, "fp32")
            row["reference"] = dict(
                side="torch eager (fp32)", precision="fp32",
                first_losses=[trainer.step()
                              for _ in range(args.check_steps)])
            trainer.release()
        except Exception as error:  # then eager's own precision serves
            print("  fp32 reference: FAILED: %s" % error, flush=True)
    for side, compile_model in sides:
        if budget.spent("%s %s" % (what, side)):
            row["sides"].append(dict(side=side, **skipped))
            continue
        try:
            trainer = TorchSide(args, model, data, batch, compile_model,
                                precision)
            first, times, losses = trainer.run()
            extra = dict(first_step_s=first, adamw_fused=trainer.fused)
            if trainer.loss_scale() is not None:
                extra["loss_scale_last"] = trainer.loss_scale()
                extra["first_loss_scales"] = trainer.scales
            trainer.release()
            row["sides"].append(side_record(side, precision, times, losses,
                                            flops, tokens, args, extra))
            print("  %s: %.2f ms/step" % (side, row["sides"][-1].get(
                "ms_per_step", float("nan"))), flush=True)
        except Exception as error:  # a peer's failure is reported, not fatal
            print("  %s: FAILED: %s" % (side, error), flush=True)
            row["sides"].append(dict(side=side, error="%s: %s" % (
                type(error).__name__, error)))
            if args.device == "cuda":
                torch.cuda.empty_cache()
    # After the peers: when time runs short, the comparison with PyTorch
    # comes first.
    for kind, side, suffix in ATTENTION_VARIANTS:
        other_bundle(kind, side, suffix)
    failures = compare_sides(args, row)
    if args.profile and not isinstance(compiled["plain"], RuntimeError):
        if not budget.spent(what + " profile"):
            row["profile"] = profile_kiln(args, compiled["plain"][0],
                                          data_path, tag, params)
            if "error" in row["profile"]:
                print("  kiln profile: FAILED: %s" % row["profile"]["error"],
                      flush=True)
                failures += 1
            for entry in row["profile"].get("entries", []):
                print("  kiln profile: " + profile_line(tag, entry),
                      flush=True)
    return row, failures


def compare_sides(args, row):
    """Loss checks and ratios between the row's sides; returns the
    failures (failed sides and WRONG checks)."""
    sides = row["sides"]
    failures = sum("error" in s for s in sides)
    eager = next((s for s in sides if s["side"] == "torch eager"
                  and "first_losses" in s), None)
    # In bf16 and fp16 the losses are checked against fp32 PyTorch's.
    checked_against = row.get("reference") or eager
    reference = next((s for s in sides if s["side"] == "torch.compile"
                      and "tokens_per_s" in s), None)
    kiln = next((s for s in sides if s["side"] == "kiln"
                 and "tokens_per_s" in s), None)
    for record in sides:
        if (checked_against and record is not checked_against and
                "first_losses" in record):
            check_losses(record, checked_against,
                         rtol_of(args, row["precision"]))
            # A peer's own rounding is reported, not a failure of Kiln's.
            failures += (record.get("loss_check") == "WRONG" and
                         record["side"].startswith("kiln"))
        failures += record.get("losses_vs_kiln") == "WRONG"
        if reference and "tokens_per_s" in record:
            record["vs_torch_compile"] = (record["tokens_per_s"] /
                                          reference["tokens_per_s"])
        if eager and "tokens_per_s" in record and "tokens_per_s" in eager:
            record["vs_torch_eager"] = (record["tokens_per_s"] /
                                        eager["tokens_per_s"])
        if (kiln and record is not kiln and "tokens_per_s" in record and
                record["side"].startswith("kiln")):
            record["vs_kiln"] = record["tokens_per_s"] / kiln["tokens_per_s"]
    return failures


def prepare(args, name):
    """Builds and exports one model, writes its data and starts kilnc for
    each of its precisions (and the data-parallel bundle); returns (the
    model's entry, {precision: {"plain": KilnCompile, "data_parallel":
    KilnCompile or None}})."""
    arch, sizes, batch = model_config(args, name)
    model = loss_model(arch, sizes)
    data = training_data(arch, sizes, args.batches * batch)
    from kiln_test_io import save_npz
    data_path = os.path.join(args.work_dir, name + "-train.npz")
    save_npz(data_path, data)
    onnx_path = os.path.join(args.work_dir, name + ".onnx")
    start = time.perf_counter()
    export_onnx(model, data, batch, onnx_path)
    print("%s: exported in %.1f s (%.1fM parameters); kilnc started"
          % (name, time.perf_counter() - start,
             sum(p.numel() for p in model.parameters()) / 1e6), flush=True)
    jobs = start_compiles(args, name, onnx_path, batch, args.work_dir)
    return dict(model=model, n=matmul_parameters(model, arch), data=data,
                data_path=data_path, params=None), jobs


def start_compiles(args, name, onnx_path, batch, directory):
    """{precision: {"plain": KilnCompile, "data_parallel": KilnCompile or
    None, "expanded": KilnCompile or None, "loops": KilnCompile or None,
    "cudnn": KilnCompile or None, "gelu": KilnCompile or None}}
    for the model's rows; the data-parallel (--data-parallel) and other
    attention (--expanded-attention, --loops-attention, --cudnn-attention)
    and GELU-epilogue (--gelu-epilogue) bundles in its first
    precision."""
    precisions = [p for n, p in args.rows if n == name]
    jobs = {}
    for precision in precisions:
        stem = os.path.join(directory, "%s-%s" % (name, precision))
        jobs[precision] = dict(plain=KilnCompile(
            args, onnx_path, batch, stem + ".kiln", stem + "-kilnc.log",
            precision), data_parallel=None, expanded=None, loops=None,
            cudnn=None, gelu=None)
        if args.data_parallel and precision == precisions[0]:
            jobs[precision]["data_parallel"] = KilnCompile(
                args, onnx_path, batch, stem + "-dp.kiln",
                stem + "-dp-kilnc.log", precision, data_parallel=True)
        for kind, _, suffix in ATTENTION_VARIANTS:
            if variant_wanted(args, kind) and \
                    precision == precisions[0]:
                jobs[precision][kind] = KilnCompile(
                    args, onnx_path, batch, stem + suffix + ".kiln",
                    stem + suffix + "-kilnc.log", precision, attention=kind)
    return jobs


def wait_all(jobs):
    """jobs with each KilnCompile replaced by its wait()'s result or
    RuntimeError."""
    done = {}
    for precision, pair in jobs.items():
        done[precision] = {}
        for kind, job in pair.items():
            if job is None:
                done[precision][kind] = None
                continue
            try:
                done[precision][kind] = job.wait()
            except RuntimeError as error:
                done[precision][kind] = error
    return done


#===-----------------------------------------------------------------------===#
# Package mode: compiled here, weights and timing there.
#===-----------------------------------------------------------------------===#

def onnx_initializers(onnx_path):
    """{name: array} of the ONNX model's initializers."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(onnx_path)
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def parameter_file_arrays(model, names):
    """{name: array} of the module's state_dict entries of the given names
    (tied weights appear in the state_dict under each of their names, so
    whichever name the exporter kept is there); raises RuntimeError naming
    any name the module lacks."""
    state = model.state_dict()
    missing = [n for n in names if n not in state]
    if missing:
        raise RuntimeError("the module has no state_dict entry for the ONNX "
                           "initializer(s) %s" % ", ".join(missing[:8]))
    return {n: state[n].detach().cpu().numpy() for n in names}


def check_initializers(model, onnx_path):
    """The names and shapes of the bundle's parameters (the ONNX float
    initializers: kilnc makes integer and boolean ones constants, kept in the
    bundle), after checking that each initializer equals the module's
    state_dict entry of that name (what package mode saves as --params
    there). The exporter keeps one of several initializers of equal value
    (tied weights, and equal initial values too: every LayerNorm's weight
    becomes one initializer), under one of their names."""
    initializers = onnx_initializers(onnx_path)
    saved = parameter_file_arrays(model, list(initializers))
    differ = [n for n, value in initializers.items()
              if value.shape != saved[n].shape or value.dtype != saved[n].dtype
              or not np.array_equal(value, saved[n])]
    if differ:
        raise RuntimeError("ONNX initializers differ from the module's "
                           "state_dict entries of the same name: %s"
                           % ", ".join(differ[:8]))
    return {n: list(v.shape) for n, v in initializers.items()
            if np.issubdtype(v.dtype, np.floating)}


def short_command(job):
    """The job's kilnc command with its files named by base name."""
    return " ".join(os.path.basename(a) if a in (job.onnx_path, job.bundle)
                    or a.endswith("/kilnc") else a for a in job.command)


def package_prepare(args):
    """Exports every model and compiles it, in each of its precisions (and
    its data-parallel bundle), with --external-weights into
    args.package_prepare; returns the exit code."""
    from kiln_test_io import save_npz
    import torch
    directory = args.package_prepare
    os.makedirs(directory, exist_ok=True)
    started = time.perf_counter()
    jobs = {}
    for name in args.models:
        arch, sizes, batch = model_config(args, name)
        model = loss_model(arch, sizes)
        data = training_data(arch, sizes, args.batches * batch)
        save_npz(os.path.join(directory, name + "-train.npz"), data)
        onnx_path = os.path.join(directory, name + ".onnx")
        start = time.perf_counter()
        export_onnx(model, data, batch, onnx_path)
        parameters = check_initializers(model, onnx_path)
        print("%s: exported in %.1f s (%.1fM parameters; the bundle's %d, "
              "ONNX float initializers, each equal to the state_dict entry "
              "of its name); kilnc started" % (
                  name, time.perf_counter() - start,
                  sum(p.numel() for p in model.parameters()) / 1e6,
                  len(parameters)), flush=True)
        config = dict(
            model=name, arch=arch, sizes=sizes, batch=batch,
            batches=args.batches, seed="torch.manual_seed(0) before "
            "building the module (bench/gpu_train.py loss_model); data: "
            "numpy default_rng(1) (training_data), stored in the package",
            lr=args.lr, weight_decay=args.weight_decay, target=args.device,
            matmul_params=matmul_parameters(model, arch),
            params=sum(p.numel() for p in model.parameters()),
            prepared_with_torch=torch.__version__,
            bundle_parameters=parameters)
        jobs[name] = (config, onnx_path, start_compiles(
            args, name, onnx_path, batch, directory))
        del model
    failures = 0
    for name, (config, onnx_path, pending) in jobs.items():
        bundles = {}
        for precision, pair in pending.items():
            entry = {}
            for kind, job in pair.items():
                if job is None:
                    continue
                try:
                    bundle, label, seconds = job.wait()
                except RuntimeError as error:
                    print("%s %s %s: FAILED: %s" % (name, precision, kind,
                                                    error), flush=True)
                    failures += 1
                    continue
                entry[kind] = dict(file=os.path.basename(bundle),
                                   precision=label, kilnc_s=seconds,
                                   kilnc_command=short_command(job))
                print("%s: %s, %.1f MB, kilnc %.1f s (%s)" % (
                    name, bundle, os.path.getsize(bundle) / 1e6, seconds,
                    label), flush=True)
            if "plain" in entry:
                bundles[precision] = entry
        if not args.keep_onnx:
            os.remove(onnx_path)
        if not bundles:
            continue
        config["bundles"] = bundles
        with open(os.path.join(directory, name + ".json"), "w") as f:
            json.dump(config, f, indent=1)
    print("packaged in %.0f s" % (time.perf_counter() - started))
    return 1 if failures else 0


def read_package_config(args, name):
    with open(os.path.join(args.package, name + ".json")) as f:
        return json.load(f)


def prepare_from_package(args, name):
    """The module the package's bundles were compiled from, rebuilt, and its
    initial weights as the --params file; returns what prepare does, with
    the packaged bundles as compiled."""
    config = read_package_config(args, name)
    arch, sizes, batch = config["arch"], config["sizes"], config["batch"]
    if config["target"] != args.device:
        raise SystemExit("%s: the package's bundles are for --target=%s, not "
                         "--device %s" % (name, config["target"],
                                          args.device))
    if (config["lr"], config["weight_decay"]) != (args.lr,
                                                   args.weight_decay):
        print("note: %s: the bundles were compiled with lr %g, weight decay "
              "%g; PyTorch uses the same" % (name, config["lr"],
                                             config["weight_decay"]),
              flush=True)
        args.lr, args.weight_decay = config["lr"], config["weight_decay"]
    model = loss_model(arch, sizes)
    from kiln_test_io import load_npz, save_npz
    data_path = os.path.join(args.package, name + "-train.npz")
    data = load_npz(data_path)
    arrays = parameter_file_arrays(model, list(config["bundle_parameters"]))
    misshaped = [n for n, shape in config["bundle_parameters"].items()
                 if list(arrays[n].shape) != shape]
    if misshaped:
        raise SystemExit("%s: the module's %s differ in shape from the "
                         "package's" % (name, ", ".join(misshaped[:8])))
    params = os.path.join(args.work_dir, name + "-params.npz")
    save_npz(params, arrays)
    compiled = {}
    for precision in (p for n, p in args.rows if n == name):
        compiled[precision] = {
            kind: (os.path.join(args.package, entry["file"]),
                   entry["precision"], entry["kilnc_s"]) if entry else None
            for kind, entry in (
                ("plain", config["bundles"][precision]["plain"]),
                ("data_parallel",
                 config["bundles"][precision].get("data_parallel")),
                ("expanded", config["bundles"][precision].get("expanded")),
                ("loops", config["bundles"][precision].get("loops")),
                ("cudnn", config["bundles"][precision].get("cudnn")),
                ("gelu", config["bundles"][precision].get("gelu")))}
    print("%s: packaged bundles (%s; batch %d, %s); %d initial weights saved "
          "for --params" % (name, ", ".join(
              p + "".join(" and " + kind.replace("_", "-")
                          for kind in ("data_parallel", "expanded", "loops",
                                       "cudnn", "gelu")
                          if c[kind])
              for p, c in compiled.items()), batch,
              ", ".join("%s %s" % kv for kv in sizes.items()), len(arrays)),
          flush=True)
    return dict(model=model, n=matmul_parameters(model, arch), data=data,
                data_path=data_path, params=params), compiled


def setup_info(args, torch):
    info = dict(device=args.device, tiny=args.tiny,
                rows=["%s %s" % row for row in args.rows],
                host=platform.node(), python=sys.version.split()[0],
                torch=torch.__version__, lr=args.lr,
                weight_decay=args.weight_decay, warmup=args.warmup,
                max_steps=args.steps, seconds=args.seconds,
                peak_tflops=args.peak_tflops)
    if args.device == "cuda":
        info["cuda_available_to_torch"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["torch_cuda"] = torch.version.cuda
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True,
            timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        info["nvidia_smi"] = None
    return info


FORMULA = ("FLOPs/step = 6*N*tokens + 12*L*d_model*seq*tokens, tokens = "
           "batch*seq, N = parameters of matrix products (lookup-only "
           "embeddings excluded); TFLOP/s = FLOPs/step / step time; MFU = "
           "TFLOP/s / peak")


def print_table(rows, args):
    header = ["model", "batch x seq", "side", "precision", "ms/step",
              "tokens/s", "TFLOP/s", "MFU", "vs compile", "vs eager",
              "vs kiln", "compile s", "loss check"]
    table = [header]
    for row in rows:
        for s in row["sides"]:
            def fmt(key, pattern):
                return pattern % s[key] if s.get(key) is not None else "-"
            compile_s = s.get("kilnc_s", s.get("first_step_s")
                              if s["side"] == "torch.compile" else None)
            check = ("%s (%.1e%s)" % (
                s["loss_check"], s["loss_rel_diff"],
                ", to step %d" % s["loss_check_steps"]
                if "loss_check_note" in s else "")
                if "loss_check" in s else "-")
            if "losses_vs_kiln" in s:
                check += "; vs kiln: %s" % s["losses_vs_kiln"]
            status = ("%s, %s" % (row["precision"], "FAILED" if "error" in s
                                  else "skipped") if "error" in s or
                      "skipped" in s else s.get("precision", "-"))
            table.append([
                row["model"], "%d x %d" % (row["batch"], row["sizes"]["seq"]),
                s["side"], status, fmt("ms_per_step", "%.2f"),
                fmt("tokens_per_s", "%.0f"), fmt("tflops", "%.3g"),
                "%.1f%%" % (100 * s["mfu"]) if s.get("mfu") is not None
                else "-",
                fmt("vs_torch_compile", "%.2fx"),
                fmt("vs_torch_eager", "%.2fx"), fmt("vs_kiln", "%.3fx"),
                "%.1f" % compile_s if compile_s is not None else "-", check])
        for side, key in (("torch", "torch"),
                          ("torch.compile", "torch_compile")):
            if row.get(key):
                table.append([row["model"], "", side, row[key]] + [""] * 9)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(w) if i < 4 else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(line, widths))))
    print("\n" + FORMULA + (" (%g TFLOP/s)" % args.peak_tflops
                            if args.peak_tflops else "; no MFU on a CPU"))
    print("ms/step: mean over the timed steps after %d warm-up steps (Kiln: "
          "kiln-run's --metrics step times); vs compile/eager/kiln: tokens/s "
          "over that side's (kiln: the plain Kiln side of the row); compile "
          "s: kilnc's time (Kiln), the first step (torch.compile); loss "
          "check: the first %d losses against PyTorch eager's, in fp32 for "
          "bf16 and fp16 rows (rtol %s; a WRONG of a PyTorch side is "
          "reported, not failed), and "
          "a data-parallel side's losses against the plain Kiln side's "
          "(rtol %g)" % (args.warmup, args.check_steps,
                         ", ".join(sorted({"%g %s" % (rtol_of(args, r[
                             "precision"]), r["precision"]) for r in rows}))
                         or "-", DATA_PARALLEL_RTOL))


def fp16_result(args, row):
    """(text, failed) of one fp16 row's Kiln side; None when not
    measured."""
    kiln = next((s for s in row["sides"] if s["side"] == "kiln"), None)
    if kiln is None or "skipped" in kiln:
        return None
    if "error" in kiln:
        return "kiln failed: %s" % kiln["error"][:200], True
    parts = ["%.0f tokens/s" % kiln.get("tokens_per_s", 0)]
    for key, what in (("vs_torch_compile", "torch.compile"),
                      ("vs_torch_eager", "eager")):
        if kiln.get(key):
            parts.append("%.2fx %s" % (kiln[key], what))
    compiled_as = kiln.get("precision")
    if compiled_as != "fp16":
        parts.append("compiled as %s" % compiled_as)
    parts.append("loss check %s" % kiln.get("loss_check", "-"))
    if "loss_check_note" in kiln:
        parts.append("losses %s" % kiln["loss_check_note"])
    torch_scale = next((s.get("loss_scale_last") for s in row["sides"]
                        if s["side"] == "torch eager"), None)
    parts.append("loss scale %s after %d steps (torch eager %s)" % (
        "%g" % kiln["loss_scale_last"] if kiln.get("loss_scale_last")
        else "-", kiln["steps_timed"] + args.warmup,
        "%g" % torch_scale if torch_scale else "-"))
    return "kiln " + ", ".join(parts), (kiln.get("loss_check") == "WRONG" or
                                        compiled_as != "fp16")


def data_parallel_result(args, row):
    """(text, failed) of one row's data-parallel side; None when not
    measured."""
    name = data_parallel_side(args)
    side = next((s for s in row["sides"] if s["side"] == name), None)
    if side is None or "skipped" in side:
        return None
    if "error" in side:
        return "failed: %s" % side["error"][:200], True
    kiln = next((s for s in row["sides"] if s["side"] == "kiln"), {})
    return ("%s plain kiln (%.0f vs %s tokens/s), losses %s over %d steps"
            % ("%.3fx" % side["vs_kiln"] if side.get("vs_kiln") else "-",
               side.get("tokens_per_s", 0),
               "%.0f" % kiln["tokens_per_s"] if "tokens_per_s" in kiln
               else "-", side.get("losses_vs_kiln", "not compared"),
               side.get("losses_vs_kiln_steps", 0)),
            side.get("losses_vs_kiln") == "WRONG")


def result_lines(args, rows, dp_rows):
    """`result fp16: ...` and `result data-parallel: ...`: ok, FAILED or
    not measured, and each wanted row's figures."""
    measured = {(r["model"], r["precision"]): r for r in rows}

    def line(group, wanted, describe, how):
        if not wanted:
            return "result %s: not measured (not requested: %s)" % (group,
                                                                   how)
        parts, failed, done = [], False, False
        for key in wanted:
            outcome = describe(args, measured[key]) if key in measured \
                else None
            if outcome is None:
                parts.append("%s %s: not measured (out of time)" % key)
                continue
            parts.append("%s %s: %s" % (key + (outcome[0],)))
            failed |= outcome[1]
            done = True
        status = "FAILED" if failed else "ok" if done else "not measured"
        return "result %s: %s; %s" % (group, status, "; ".join(parts))
    return [line("fp16", [r for r in args.rows if r[1] == "fp16"],
                 fp16_result, "--precision fp16 or MODEL:fp16"),
            line("data-parallel", dp_rows, data_parallel_result,
                 "--data-parallel")]


def predictions(bundle):
    """The cost model's predictions for `bundle` on this GPU: dict(gpu,
    entries={entry point: prediction}) (entries empty without a report)."""
    import torch
    gpu = cost_gpu(torch.cuda.get_device_name(0))
    entries = {}
    if gpu and os.path.exists(cost_file(bundle)):
        with open(cost_file(bundle)) as f:
            entries = parse_cost_report(f.read()).get(gpu, {})
    return dict(gpu=gpu, entries=entries)


def model_lines(rows):
    """One line per profiled row and entry point: the cost model's
    prediction beside the profile's measurement (model_line)."""
    lines = []
    for row in rows:
        profile = row.get("profile")
        if not profile or "cost" not in profile:
            continue
        tag = "%s-%s" % (row["model"], row["precision"])
        cost = profile["cost"]
        lines += [model_line(tag, cost["gpu"], entry,
                             cost["entries"].get(entry["entry"]))
                  for entry in profile.get("entries", [])]
    return lines


def profile_lines(rows):
    """One line per profiled row and entry point (--profile), or its
    error: `MODEL-PRECISION ENTRY: ...` or `MODEL-PRECISION: FAILED: ...`."""
    lines = []
    for row in rows:
        profile = row.get("profile")
        if not profile:
            continue
        tag = "%s-%s" % (row["model"], row["precision"])
        if "error" in profile:
            lines.append("%s: FAILED: %s" % (tag, profile["error"][:300]))
        lines += [profile_line(tag, entry)
                  for entry in profile.get("entries", [])]
    return lines


def main(argv):
    args = parse_args(argv)
    if args.package_prepare:
        return package_prepare(args)
    os.makedirs(args.out, exist_ok=True)
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
        return benchmark(args)
    import tempfile
    with tempfile.TemporaryDirectory(prefix="kiln-gpu-bench-") as scratch:
        args.work_dir = scratch
        return benchmark(args)


def benchmark(args):
    started = time.perf_counter()
    import torch
    args.torch_unavailable = None
    if args.device == "cuda" and not torch.cuda.is_available():
        args.torch_unavailable = (
            "unavailable: this PyTorch (%s, %s) sees no CUDA device" % (
                torch.__version__, sys.executable))
        print("note: PyTorch %s; Kiln is measured alone (run the "
              "script with a Python whose torch has CUDA for the peers)"
              % args.torch_unavailable, flush=True)
    info = setup_info(args, torch)
    print("setup: " + ", ".join("%s %s" % (k, v) for k, v in info.items()
                                if k != "nvidia_smi"), flush=True)
    if args.package:
        info["package"] = os.path.abspath(args.package)
    prepared, compiled = {}, {}
    for name in args.models:
        if args.package:
            prepared[name], compiled[name] = prepare_from_package(args, name)
        else:
            prepared[name], compiled[name] = prepare(args, name)
    # Every kilnc finishes before anything is timed, so that no compile
    # competes with a measurement for the CPU.
    if not args.package:
        compiled = {name: wait_all(jobs) for name, jobs in compiled.items()}
    print("exported and compiled in %.0f s" % (time.perf_counter() - started),
          flush=True)
    budget = Budget(args, started)
    rows, failures = [], 0
    dp_rows = [(name, precision) for name, precision in args.rows
               if compiled[name][precision]["data_parallel"] is not None]
    info["data_parallel_rows"] = ["%s %s" % row for row in dp_rows]

    def write_results():
        """gpu_train.json as it stands (written after every row, so that a
        run stopped from outside keeps its rows)."""
        result = dict(setup=info, formula=FORMULA, results=rows,
                      skipped_for_time=budget.skipped,
                      result_lines=result_lines(args, rows, dp_rows),
                      profile_lines=profile_lines(rows),
                      model_lines=model_lines(rows),
                      wall_s=time.perf_counter() - started)
        with open(os.path.join(args.out, "gpu_train.json"), "w") as f:
            json.dump(result, f, indent=1)
        return result
    for name, precision in args.rows:
        if budget.spent("%s %s" % (name, precision)):
            continue
        print("%s %s: measuring" % (name, precision), flush=True)
        row, bad = measure(args, name, precision, prepared[name],
                           compiled[name][precision], budget)
        rows.append(row)
        failures += bad
        write_results()
    print()
    print_table(rows, args)
    result = write_results()
    print("\nwrote %s (%.0f s in all)" % (os.path.join(
        args.out, "gpu_train.json"), result["wall_s"]))
    for line in result["result_lines"]:
        print(line)
    for line in result["profile_lines"]:
        print("profile " + line)
    for line in result["model_lines"]:
        print("model " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
