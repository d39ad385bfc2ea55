"""Data-parallel scaling on CPU ranks: the GPT-2-style model of
bench/train_throughput.py trained on one rank at batch N*B against N ranks
(mpirun -np N) at batch B each, the same global batch on the same data.

    /usr/bin/python3 bench/data_parallel.py [--ranks 2] [--batch 8]
        [--seq 128] [--warmup 3] [--steps 10] [--trials 3] [--batches 4]
        [--lr 1e-4] [--weight-decay 0.01] [--rtol 1e-5]
        [--openblas-coretype NAME] [--bin build/bin] [--keep DIR] [--smoke]
        [--shard-optimizer]

The model, its loss, its weights and its data are train_throughput.py's
(loss_model, training_data, export_loss_model, compile_training: d_model 256,
4 layers, 4 heads, vocab 1000, --seq tokens, next-token cross-entropy, eval
mode, AdamW at --lr and --weight-decay), with --batches * N * B samples of
seeded random tokens. One ONNX export is compiled twice, with the same flags
but the batch size:

    kilnc gpt2.onnx --optimizer=adamw --lr=.. --weight-decay=.. \\
        --loss-output=loss --target=cpu --data-parallel --batch-size=B
    (and --batch-size=N*B)

and trained by kiln-run --data --no-shuffle --metrics in two set-ups:

  (a) one process, the batch-N*B bundle, OMP_NUM_THREADS=N and
      OPENBLAS_NUM_THREADS=N (its kernels use N threads);
  (b) mpirun -np N --oversubscribe --bind-to none (and --allow-run-as-root as
      root) of the batch-B bundle, OMP_NUM_THREADS=1 and
      OPENBLAS_NUM_THREADS=1 in every rank (-x).

Both get the same OPENBLAS_CORETYPE (the one Kiln's runtime picks for this
CPU, as in the other benchmarks). With --no-shuffle, rank r of N takes the
samples at positions r, r + N, ... of the stored order, so step t of (b)
averages its loss and gradients over exactly the N*B samples step t of (a)
takes: the per-step losses of the two must agree to fp32 rounding (the
sums run in another order), within --rtol; the largest relative difference
is printed, and beyond --rtol the script says WRONG and exits 1.

Throughput. Each trial runs each set-up twice: a short run of --warmup
steps and a long run of --warmup + --steps steps. Two figures per set-up:

  steady samples/s   from the long run's --metrics (rank 0 writes them; in
                     (b) `samples` counts all ranks'): the samples of the
                     steps after the warm-up over the sum of their step
                     times. This is the figure the ratio is taken of.
  process samples/s  --steps * N*B / (T(long) - T(short)), T the wall time
                     of the whole process (mpirun included): start-up,
                     bundle load, reading the data and the warm-up steps
                     cancel out. A cross-check.

Each figure is the median over --trials trials, (a) and (b) interleaved.
scaling = (b) / (a) of the steady rates: above 1, N single-threaded ranks
train faster than one process with N threads on the same cores.

--shard-optimizer adds (c): (b) with the batch-B bundle compiled also with
--shard-optimizer=N (ZeRO-1: each rank keeps 1/N of the AdamW state,
gradients reduce-scattered, parameters all-gathered). Its losses must agree
with (a)'s as (b)'s do; it prints (c) / (b) of the steady rates and each
bundle's parameter and state bytes per rank (kiln-run --info).

--smoke: a tiny model (d_model 32, 1 layer, 2 heads, vocab 64, 16 tokens,
batch 2, 1 warm-up step, 2 timed steps, one trial) to check the script in
seconds; its numbers mean nothing. No test runs this script: benchmarks are
never pass/fail in ctest.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import ROOT, default_coretype, print_columns
from train_throughput import (compile_training, export_loss_model,
                              loss_model, model_sizes, run_process,
                              training_data)

MODEL = "gpt2"
SMOKE = dict(sizes=dict(d_model=32, heads=2, vocab=64, layers=1), seq=16,
             batch=2, warmup=1, steps=2, trials=1, batches=2)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2,
                        help="N: ranks of (b), threads of (a)")
    parser.add_argument("--batch", type=int, default=8,
                        help="B: the batch of one rank of (b); (a) runs N*B")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3,
                        help="steps before the timed ones")
    parser.add_argument("--steps", type=int, default=10,
                        help="timed steps after the warm-up")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--batches", type=int, default=4,
                        help="distinct global batches in the data")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--rtol", type=float, default=1e-5,
                        help="how far the per-step losses of (a) and (b) "
                        "may differ, relative")
    parser.add_argument("--compile-timeout", type=float, default=3600,
                        metavar="SECONDS")
    parser.add_argument("--openblas-coretype", metavar="NAME",
                        default=default_coretype(),
                        help="OpenBLAS kernels of both set-ups "
                        "(KILN_OPENBLAS_CORETYPE; 'none': Kiln's runtime "
                        "picks them for this CPU)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where kilnc and kiln-run are")
    parser.add_argument("--mpirun", default=shutil.which("mpirun"),
                        help="the MPI launcher (default: mpirun on PATH)")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the model, data, bundles and metrics to "
                        "DIR and keep them")
    parser.add_argument("--shard-optimizer", action="store_true",
                        help="also (c): (b) with the optimizer state "
                        "sharded over the ranks")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model and few steps, to check the "
                        "script; the numbers mean nothing")
    args = parser.parse_args(argv[1:])
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    for flag in ("ranks", "batch", "seq", "warmup", "steps", "trials",
                 "batches"):
        if getattr(args, flag) < 1:
            parser.error("--%s must be at least 1" % flag)
    for tool in ("kilnc", "kiln-run"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            parser.error("no executable %s in %s (--bin)" % (tool, args.bin))
    if not args.mpirun:
        parser.error("no mpirun on PATH (--mpirun)")
    return args


def parameter_bytes(kiln_run, bundle):
    """The bytes of a bundle's parameters and optimizer state (one rank's
    shard of sharded state), from kiln-run --info."""
    info = subprocess.run([kiln_run, bundle, "--info"], capture_output=True,
                          text=True, check=True).stdout
    for line in info.splitlines():
        if line.startswith("parameters:"):
            return "{:,}".format(int(line.split(",")[1].split()[0]))
    raise RuntimeError("%s --info lists no parameters" % bundle)


def uptime():
    return subprocess.run(["uptime"], capture_output=True,
                          text=True).stdout.strip()


def environment(args, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("KILN_OPENBLAS_CORETYPE", None)
    if args.openblas_coretype and args.openblas_coretype != "none":
        env["OPENBLAS_CORETYPE"] = args.openblas_coretype
        env["KILN_OPENBLAS_CORETYPE"] = args.openblas_coretype
    return env


class Setup:
    """One way of training: a command line (less --steps and --metrics) and
    its environment."""

    def __init__(self, label, prefix, bundle, data_path, env, metrics_path):
        self.label = label
        self.command = prefix + [bundle, "--data", data_path, "--no-shuffle"]
        self.env = env
        self.metrics_path = metrics_path

    def run(self, steps):
        """(wall seconds, metrics records) of one run of steps steps."""
        if os.path.exists(self.metrics_path):
            os.remove(self.metrics_path)
        command = self.command + ["--steps", str(steps),
                                  "--metrics", self.metrics_path]
        elapsed, code, stdout, stderr = run_process(command, self.env)
        if code:
            raise RuntimeError("%s failed (exit %d): %s" % (
                " ".join(command), code,
                (stderr.strip() or stdout.strip() or "no message")[-2000:]))
        with open(self.metrics_path) as metrics:
            records = [json.loads(line) for line in metrics]
        if len(records) != steps:
            raise RuntimeError("%s: %d metrics records for %d steps"
                               % (self.label, len(records), steps))
        return elapsed, records

    def trial(self, args):
        """(steady samples/s, process samples/s, per-step losses)."""
        short, _ = self.run(args.warmup)
        long, records = self.run(args.warmup + args.steps)
        timed = records[args.warmup:]
        samples = sum(record["samples"] for record in timed)
        seconds = sum(record["samples"] / record["samples_per_s"]
                      for record in timed)
        return (samples / seconds, samples / (long - short),
                [record["loss"] for record in records])


def main(argv):
    args = parse_args(argv)
    sys.path[:0] = [os.path.join(ROOT, "test", "lib")]
    n, batch = args.ranks, args.batch
    print("data-parallel scaling on CPU ranks, %s"
          % time.strftime("%Y-%m-%d %H:%M %Z"))
    print("command: %s" % " ".join(shlex.quote(a) for a in argv))
    print("uptime before: %s" % uptime())
    sizes = model_sizes(args)
    print("GPT-2-style: d_model %d, %d layers, %d heads, vocab %d, sequence "
          "%d; AdamW lr %g weight decay %g; global batch %d (%d x %d); %d "
          "distinct global batches, --no-shuffle" % (
              sizes["d_model"], sizes["layers"], sizes["heads"],
              sizes["vocab"], args.seq, args.lr, args.weight_decay, n * batch,
              n, batch, args.batches)
          + ("; --smoke: the numbers mean nothing" if args.smoke else ""))

    with tempfile.TemporaryDirectory(prefix="kiln-bench-dp-") as scratch:
        workdir = args.keep or scratch
        os.makedirs(workdir, exist_ok=True)
        # The data and the model at the global batch.
        global_args = argparse.Namespace(**dict(vars(args), batch=n * batch))
        data = training_data(MODEL, global_args)
        model = loss_model(MODEL, global_args)
        print("parameters: {:,}".format(sum(p.numel()
                                            for p in model.parameters())))
        onnx_path, data_path = export_loss_model(global_args, MODEL, workdir,
                                                 model, data)
        flags = ["--target=cpu", "--data-parallel"]
        bundles = {}
        builds = [(batch, "", flags), (n * batch, "", flags)]
        if args.shard_optimizer:
            builds.append((batch, "-sharded",
                           flags + ["--shard-optimizer=%d" % n]))
        for size, suffix, build_flags in builds:
            key = (size, suffix)
            bundles[key] = os.path.join(workdir,
                                        "gpt2-b%d%s.kiln" % (size, suffix))
            seconds = compile_training(args, onnx_path, bundles[key], size,
                                       build_flags)
            print("kilnc %s --optimizer=adamw --lr=%g --weight-decay=%g "
                  "--loss-output=loss %s --batch-size=%d: %.1f s" % (
                      os.path.basename(onnx_path), args.lr,
                      args.weight_decay, " ".join(build_flags), size,
                      seconds))

        kiln_run = os.path.join(args.bin, "kiln-run")
        mpirun = [args.mpirun, "-np", str(n), "--oversubscribe",
                  "--bind-to", "none"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        one_env, ranks_env = environment(args, n), environment(args, 1)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "OPENBLAS_CORETYPE", "KILN_OPENBLAS_CORETYPE"):
            if name in ranks_env:
                mpirun += ["-x", name]
        setups = [
            Setup("(a) 1 rank", [kiln_run], bundles[(n * batch, "")],
                  data_path, one_env, os.path.join(workdir, "a.jsonl")),
            Setup("(b) %d ranks" % n, mpirun + [kiln_run],
                  bundles[(batch, "")], data_path, ranks_env,
                  os.path.join(workdir, "b.jsonl")),
        ]
        envs = [one_env, ranks_env]
        whats = ["1 process, batch %d" % (n * batch),
                 "%d ranks, batch %d each" % (n, batch)]
        if args.shard_optimizer:
            setups.append(Setup(
                "(c) %d ranks, sharded" % n, mpirun + [kiln_run],
                bundles[(batch, "-sharded")], data_path, ranks_env,
                os.path.join(workdir, "c.jsonl")))
            envs.append(ranks_env)
            whats.append("%d ranks, batch %d each, --shard-optimizer=%d"
                         % (n, batch, n))
            for label, key in (("(b)", (batch, "")),
                               ("(c)", (batch, "-sharded"))):
                print("%s parameters and optimizer state per rank: %s bytes"
                      % (label, parameter_bytes(kiln_run, bundles[key])))
        for setup, env, what in zip(setups, envs, whats):
            print("%s: %s; OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s "
                  "OPENBLAS_CORETYPE=%s" % (
                      setup.label, what, env["OMP_NUM_THREADS"],
                      env["OPENBLAS_NUM_THREADS"],
                      env.get("OPENBLAS_CORETYPE", "(unset)")))
            print("  %s --steps S --metrics FILE"
                  % " ".join(shlex.quote(os.path.basename(a)
                                         if os.path.isabs(a) else a)
                             for a in setup.command))
        print("timing: %d trials of %d warm-up + %d timed steps per set-up"
              % (args.trials, args.warmup, args.steps), flush=True)

        steady = {s.label: [] for s in setups}
        process = {s.label: [] for s in setups}
        losses = {s.label: [] for s in setups}
        for trial in range(args.trials):
            for setup in setups:
                rate, whole, trial_losses = setup.trial(args)
                steady[setup.label].append(rate)
                process[setup.label].append(whole)
                losses[setup.label].append(trial_losses)
                print("  trial %d %s: steady %.2f samples/s, process %.2f "
                      "samples/s, load %.2f" % (
                          trial + 1, setup.label, rate, whole,
                          os.getloadavg()[0]), flush=True)

    labels = [s.label for s in setups]
    a, b = labels[:2]
    table = [["set-up", "steady samples/s", "process samples/s",
              "steady ms/step", "trials steady samples/s"]]
    for label in labels:
        rate = statistics.median(steady[label])
        table.append([label, "%.2f" % rate,
                      "%.2f" % statistics.median(process[label]),
                      "%.1f" % (1e3 * n * batch / rate),
                      " ".join("%.2f" % r for r in steady[label])])
    print()
    print_columns(table)
    scaling = statistics.median(steady[b]) / statistics.median(steady[a])
    print("scaling (b)/(a), steady: %.3f; process: %.3f" % (
        scaling,
        statistics.median(process[b]) / statistics.median(process[a])))

    if len(labels) > 2:
        c = labels[2]
        print("sharded (c)/(b), steady: %.3f; process: %.3f" % (
            statistics.median(steady[c]) / statistics.median(steady[b]),
            statistics.median(process[c]) / statistics.median(process[b])))

    ok = True
    for other in labels[1:]:
        worst = 0.0
        for got, want in zip(losses[other], losses[a]):
            for x, y in zip(got, want):
                worst = max(worst, abs(x - y) / abs(y))
        ok = ok and worst <= args.rtol
        print("losses (a) vs %s: %d steps x %d trials, largest relative "
              "difference %.3g%s (first step %.7g / %.7g, last %.7g / %.7g)"
              % (other.split()[0], args.warmup + args.steps, args.trials,
                 worst,
                 "" if worst <= args.rtol else
                 " WRONG (beyond --rtol %g)" % args.rtol,
                 losses[a][0][0], losses[other][0][0], losses[a][0][-1],
                 losses[other][0][-1]))
    print("uptime after: %s" % uptime())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
