#!/usr/bin/env python3
"""kiln-run training on a real compiled model: the MLP example
(examples/mlp/mlp_train.onnx) compiled by kilnc, trained on 36 samples in
batches of 8, so that epochs do not divide into batches.

- Which samples each step consumed: a bundle compiled with --lr=0 never
  changes its parameters, so the loss of each step is the loss of its batch
  at the initial parameters, which the bundle's own `forward` entry point
  computes from batches this script cuts out of the data itself. Checked for
  wrapping epochs, --drop-last and (with kilnc --grad-accum) for the mean over
  accumulated micro-batches.
- The metrics file against the printed losses.
- Resume: 6 AdamW steps straight against 3, then a resume to 5, then a resume
  to 6: the same metrics records and the same final parameters, byte for
  byte; and a checkpoint of another bundle refused.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from kiln_test_harness import Checks, report  # noqa: E402
from kiln_test_io import load_npz, save_npz  # noqa: E402

BATCH = 8
SAMPLES = 36


class Tester(Checks):
    def __init__(self, args):
        super().__init__(args.work_dir)
        self.args = args

    def run(self, tool, *arguments, ok=True):
        result = subprocess.run([tool, *arguments], capture_output=True,
                                text=True, timeout=300)
        if ok:
            self.check(result.returncode == 0,
                       f"{os.path.basename(tool)} {' '.join(arguments)} exited "
                       f"{result.returncode}: {result.stderr.strip()}")
        return result

    def kilnc(self, output, *flags):
        self.run(self.args.kilnc, self.args.model, f"--batch-size={BATCH}",
                 *flags, "-o", self.path(output))

    def kiln_run(self, *arguments, ok=True):
        return self.run(self.args.kiln_run, *arguments, ok=ok)

    def train(self, bundle, steps, *arguments, metrics=None):
        command = [self.path(bundle), "--data", self.path("train.npz"),
                   "--steps", str(steps), *arguments]
        if metrics:
            command += ["--metrics", self.path(metrics)]
        return self.kiln_run(*command)


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def same_bytes(a, b):
    with open(a, "rb") as f1, open(b, "rb") as f2:
        return f1.read() == f2.read()


def forward_losses(t, bundle, data, batches):
    """The loss `forward` computes for each batch of sample indices."""
    losses = []
    for i, batch in enumerate(batches):
        inputs = t.path(f"batch-{i}.npz")
        save_npz(inputs, {name: array[batch] for name, array in data.items()})
        outputs = t.path(f"batch-{i}-out.npz")
        t.kiln_run(t.path(bundle), "--entry", "forward", "--inputs", inputs,
                   "--outputs", outputs)
        losses.append(float(load_npz(outputs)["loss"]))
    return losses


def stream(order_of_epoch, batches, drop_last=False):
    """The batches of sample indices kiln-run's data stream yields."""
    epoch, position, result = 0, 0, []
    for _ in range(batches):
        if drop_last and position + BATCH > SAMPLES:
            epoch, position = epoch + 1, 0
        batch = []
        for _ in range(BATCH):
            batch.append(order_of_epoch(epoch)[position])
            position += 1
            if position == SAMPLES:
                epoch, position = epoch + 1, 0
        result.append(batch)
    return result


def check_losses(t, what, got, expected):
    ok = len(got) == len(expected) and np.allclose(got, expected, rtol=1e-6,
                                                    atol=0)
    t.check(ok, f"{what}: losses {got}, expected {expected}")


def test_batches_of_a_frozen_model(t, data):
    """With lr 0, each step's loss is forward's loss on the batch the stream
    should have taken."""
    t.kilnc("frozen.kiln", "--optimizer=sgd", "--lr=0")
    stored = lambda epoch: list(range(SAMPLES))
    for name, flags in [("wrap", []), ("drop-last", ["--drop-last"])]:
        t.train("frozen.kiln", 6, "--no-shuffle", *flags,
                metrics=f"frozen-{name}.jsonl")
        got = [r["loss"] for r in read_metrics(t.path(f"frozen-{name}.jsonl"))]
        batches = stream(stored, 6, drop_last=bool(flags))
        check_losses(t, f"frozen {name}", got,
                     forward_losses(t, "frozen.kiln", data, batches))
    # Both streams start the same and part where the first epoch runs out.
    t.check(stream(stored, 6)[4] == list(range(32, 36)) + list(range(4)),
            "the wrapping batch of this script's stream")


def test_metrics_match_the_lines(t):
    result = t.train("adamw.kiln", 6, "--log-every", "1",
                     metrics="lines.jsonl")
    printed = [float(m) for m in re.findall(r"loss (\S+)", result.stdout)]
    records = read_metrics(t.path("lines.jsonl"))
    t.check([r["step"] for r in records] == list(range(1, 7)),
            f"metrics steps {[r['step'] for r in records]}")
    t.check(printed == [float("%.6f" % r["loss"]) for r in records],
            f"printed losses {printed} differ from the metrics {records}")
    t.check([r["epoch"] for r in records] == [0, 0, 0, 0, 0, 1],
            f"epochs {[r['epoch'] for r in records]}")
    t.check(all(r["samples"] == BATCH and r["samples_per_s"] > 0
                for r in records), f"samples fields {records}")
    lr_outputs = "lr: f32[]" in t.kiln_run(t.path("adamw.kiln"), "--info").stdout
    t.check(all((r["lr"] is not None) == lr_outputs for r in records),
            f"lr reported {[r['lr'] for r in records]}, bundle has lr: "
            f"{lr_outputs}")


def comparable(records):
    keys = ["step", "epoch", "loss", "lr", "grad_norm", "samples"]
    return [{k: r.get(k) for k in keys} for r in records]


def test_resume_is_bit_identical(t, bundle, steps, splits):
    """`steps` straight against runs that stop at each of `splits` and
    resume."""
    straight = t.path(f"{bundle}-straight")
    t.train(bundle, steps, "--checkpoint-dir", straight, "--save-params",
            t.path(f"{bundle}-straight.safetensors"),
            metrics=f"{bundle}-straight.jsonl")
    resumed = t.path(f"{bundle}-resumed")
    for i, stop in enumerate(splits + [steps]):
        t.train(bundle, stop, "--checkpoint-dir", resumed,
                *(["--resume"] if i else []), "--save-params",
                t.path(f"{bundle}-resumed.safetensors"),
                metrics=f"{bundle}-resumed.jsonl")
    a = comparable(read_metrics(t.path(f"{bundle}-straight.jsonl")))
    b = comparable(read_metrics(t.path(f"{bundle}-resumed.jsonl")))
    t.check(len(a) == steps and a == b,
            f"{bundle}: resumed metrics differ:\n{a}\n{b}")
    t.check(same_bytes(t.path(f"{bundle}-straight.safetensors"),
                       t.path(f"{bundle}-resumed.safetensors")),
            f"{bundle}: resumed parameters differ from the straight run's")
    t.check(same_bytes(os.path.join(straight, f"step-{steps}.safetensors"),
                       t.path(f"{bundle}-straight.safetensors")),
            f"{bundle}: the last checkpoint differs from --save-params")


def test_another_bundle_is_refused(t):
    directory = t.path("adamw.kiln-straight")
    result = t.kiln_run(t.path("frozen.kiln"), "--data", t.path("train.npz"),
                        "--steps", "8", "--checkpoint-dir", directory,
                        "--resume", ok=False)
    t.check(result.returncode == 1 and
            f"checkpoint {directory}/step-6.json was written for a different "
            "bundle" in result.stderr,
            f"resuming with another bundle: {result.returncode} "
            f"{result.stderr!r}")


def test_grad_accum(t, data):
    help_text = t.run(t.args.kilnc, "--help").stdout
    if "--grad-accum" not in help_text:
        print("SKIP: test_grad_accum (this kilnc has no --grad-accum)")
        return
    t.kilnc("accum.kiln", "--optimizer=adamw", "--lr=3e-3", "--grad-accum=2")
    info = t.kiln_run(t.path("accum.kiln"), "--info").stdout
    t.check("  training.grad_accum: 2\n" in info, f"--info: {info}")
    test_resume_is_bit_identical(t, "accum.kiln", 4, [1, 3])
    records = read_metrics(t.path("accum.kiln-straight.jsonl"))
    t.check([r["samples"] for r in records] == [2 * BATCH] * 4,
            f"accumulated samples {records}")
    # Frozen: a step's loss is the mean of its two micro-batches' losses.
    t.kilnc("accum-frozen.kiln", "--optimizer=sgd", "--lr=0",
            "--grad-accum=2")
    t.train("accum-frozen.kiln", 3, "--no-shuffle", metrics="accum-frozen.jsonl")
    micro = forward_losses(t, "accum-frozen.kiln", data,
                           stream(lambda e: list(range(SAMPLES)), 6))
    got = [r["loss"] for r in read_metrics(t.path("accum-frozen.jsonl"))]
    check_losses(t, "accumulated frozen", got,
                 [(micro[2 * s] + micro[2 * s + 1]) / 2 for s in range(3)])


def test_memory_limits(t):
    """Under an address-space limit (ulimit -v) too small for the step, the
    run ends with an out-of-memory error, never spinning or aborting:
    OpenBLAS 0.3.21 retries a failed buffer allocation forever, so the
    runtime checks the room for its buffers before loading it. Limits from
    far too small to enough; each run must end within the timeout with exit
    status 0 or 1, and 1 only with "out of memory" on stderr."""
    def limit(megabytes):
        def apply():
            resource.setrlimit(resource.RLIMIT_AS,
                               (megabytes << 20, megabytes << 20))
        return apply
    outcomes, messages = {}, {}
    for megabytes in (64, 128, 256, 384, 512, 768, 4096):
        try:
            result = subprocess.run(
                [t.args.kiln_run, t.path("adamw.kiln"), "--data",
                 t.path("train.npz"), "--steps", "2"],
                capture_output=True, text=True, timeout=60,
                preexec_fn=limit(megabytes),
                env=dict(os.environ, OMP_NUM_THREADS="2"))
        except subprocess.TimeoutExpired:
            t.check(False, f"ulimit -v {megabytes} MiB: still running after "
                           "60 s")
            continue
        outcomes[megabytes] = result.returncode
        messages[megabytes] = result.stderr
        t.check(result.returncode in (0, 1),
                f"ulimit -v {megabytes} MiB: exit {result.returncode}: "
                f"{result.stderr[-300:]!r}")
        if result.returncode == 1:
            t.check("out of memory" in result.stderr,
                    f"ulimit -v {megabytes} MiB: {result.stderr!r}")
    t.check(outcomes.get(64) == 1 and outcomes.get(4096) == 0,
            f"outcomes by limit {outcomes}")
    # Where the BLAS library's buffers are what does not fit, the error
    # says so (before the check, those limits spun).
    t.check(any("the BLAS library's buffers" in m for m in messages.values()),
            f"no limit was refused for the BLAS buffers: {messages}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--make-data", required=True)
    parser.add_argument("--work-dir", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    t = Tester(args)

    subprocess.run([sys.executable, args.make_data, t.path("full.npz")],
                   check=True)
    data = {k: v[:SAMPLES] for k, v in load_npz(t.path("full.npz")).items()}
    save_npz(t.path("train.npz"), data)
    t.kilnc("adamw.kiln", "--optimizer=adamw", "--lr=3e-3")

    test_batches_of_a_frozen_model(t, data)
    test_metrics_match_the_lines(t)
    test_resume_is_bit_identical(t, "adamw.kiln", 6, [3, 5])
    test_another_bundle_is_refused(t)
    test_grad_accum(t, data)
    test_memory_limits(t)
    return report(t, "all MLP training checks passed")


if __name__ == "__main__":
    sys.exit(main())
