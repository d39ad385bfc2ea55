#!/usr/bin/env python3
"""kiln-run under mpirun: data parallelism on CPU ranks.

Drives the toy data-parallel bundles (TestBundles.h, "train-dp"): each step
averages, through libkilnrt's MPI collectives, its batch's mean (the loss)
and its "gradients" (the mean and the mean square, added to the parameter
w) over the ranks. Sample i of the data is 2**i, so every value is exact in
f32 and each step's loss says which samples the ranks' batches held.

Checks: 2 ranks at batch 2 reproduce 1 rank at batch 4 exactly (per-step
metrics and final parameters, plain and shuffled, across epochs); the shards
against an independent NumPy replica of DistributedSampler(drop_last=True)
on a sample count W does not divide; rank 0 alone prints and writes; a
checkpoint resumes at the same world size and is refused at another; a
bundle not compiled with kilnc --data-parallel is refused on every rank; a
rank that fails ends the job promptly, non-zero, with its message; a rank
left waiting in a collective gives up at --collective-timeout. Exits 77
(ctest: skipped) where mpirun is missing.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from kiln_test_harness import Checks, run_tests  # noqa: E402
from kiln_test_io import save_npz  # noqa: E402

SKIP = 77


class Tester(Checks):
    def __init__(self, args, mpirun):
        super().__init__(args.work_dir)
        self.kiln_run = args.kiln_run
        self.mpirun = [mpirun, "--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            self.mpirun.append("--allow-run-as-root")

    def kiln_args(self, bundle, data, steps, *arguments, metrics=None):
        command = [self.kiln_run, self.path(bundle), "--data", self.path(data),
                   "--steps", str(steps), *arguments]
        if metrics:
            command += ["--metrics", self.path(metrics)]
        return command

    def launch(self, command, timeout=60):
        start = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=timeout)
        result.seconds = time.monotonic() - start
        return result

    def launch_checked(self, command, expect_ok):
        result = self.launch(command)
        if expect_ok:
            self.check(result.returncode == 0,
                       f"{' '.join(command)} exited {result.returncode}: "
                       f"{result.stderr.strip()}")
        return result

    def ranks(self, count, bundle, data, steps, *arguments, metrics=None,
              expect_ok=True):
        """kiln-run on `count` ranks under mpirun."""
        command = self.mpirun + ["-np", str(count)] + self.kiln_args(
            bundle, data, steps, *arguments, metrics=metrics)
        return self.launch_checked(command, expect_ok)

    def single(self, bundle, data, steps, *arguments, metrics=None,
               expect_ok=True):
        """kiln-run as one process, without a launcher."""
        command = self.kiln_args(bundle, data, steps, *arguments,
                                 metrics=metrics)
        return self.launch_checked(command, expect_ok)


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


KEYS = ["step", "epoch", "loss", "lr", "grad_norm", "samples"]


def strip(records):
    return [{k: r.get(k) for k in KEYS} for r in records]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_two_ranks_equal_one_rank_at_twice_the_batch(t):
    """2 ranks at batch 2 and 1 rank at batch 4 over the same data: the
    same per-step loss, grad_norm and lr, and the same final parameters, bit
    for bit; in the stored order and shuffled, over several epochs (10
    samples: batches run across epoch ends)."""
    for name, data, flags in [("plain", "toy8.npz", ["--no-shuffle"]),
                              ("shuffled", "toy10.npz", ["--seed", "3"])]:
        t.single("train-dp4.kiln", data, 7, *flags, "--save-params",
                 t.path(f"one-{name}.safetensors"), metrics=f"one-{name}.jsonl")
        result = t.ranks(2, "train-dp2.kiln", data, 7, *flags, "--save-params",
                         t.path(f"two-{name}.safetensors"),
                         metrics=f"two-{name}.jsonl")
        if result.returncode != 0:
            continue
        one = strip(read_metrics(t.path(f"one-{name}.jsonl")))
        two = strip(read_metrics(t.path(f"two-{name}.jsonl")))
        t.check(len(two) == 7 and one == two,
                f"{name}: 2 ranks at batch 2 differ from 1 rank at batch 4:\n"
                f"{one}\n{two}")
        t.check(all(r["samples"] == 4 for r in two),
                f"{name}: samples per step {[r['samples'] for r in two]}")
        t.check(read_bytes(t.path(f"one-{name}.safetensors")) ==
                read_bytes(t.path(f"two-{name}.safetensors")),
                f"{name}: final parameters differ")


def distributed_sampler(samples, world, rank):
    """torch.utils.data.DistributedSampler(shuffle=False, drop_last=True):
    the indices cut to a multiple of the world size, every world-th from
    `rank`."""
    total = samples // world * world
    return list(range(samples))[:total][rank:total:world]


def expected_steps(samples, world, batch, steps):
    """Each step's (loss, grad_norm): per rank the mean and mean square of
    its next `batch` samples of its shard (wrapping epochs), averaged over
    the ranks; sample i is 2**i."""
    shards = [distributed_sampler(samples, world, r) for r in range(world)]
    result = []
    for step in range(steps):
        means, squares = [], []
        for shard in shards:
            indices = [shard[(step * batch + i) % len(shard)]
                       for i in range(batch)]
            values = np.float32(2.0) ** np.array(indices, dtype=np.float32)
            means.append(values.mean(dtype=np.float64))
            squares.append((values.astype(np.float64) ** 2).mean())
        result.append((float(np.float32(np.mean(means))),
                       float(np.float32(np.mean(squares)))))
    return result


def test_shards_match_distributed_sampler(t):
    """9 samples on 2 ranks: the last sample is dropped, rank 0 takes
    0, 2, 4, 6 and rank 1 takes 1, 3, 5, 7, batches of 2 wrap into the next
    epoch; the losses against an independent NumPy computation."""
    result = t.ranks(2, "train-dp2.kiln", "toy9.npz", 5, "--no-shuffle",
                     metrics="shards.jsonl")
    if result.returncode != 0:
        return
    records = read_metrics(t.path("shards.jsonl"))
    got = [(r["loss"], r["grad_norm"]) for r in records]
    expected = expected_steps(9, 2, 2, 5)
    t.check(got == expected, f"shards: got {got}, expected {expected}")
    t.check([r["epoch"] for r in records] == [0, 0, 1, 1, 2],
            f"shards: epochs {[r['epoch'] for r in records]}")


def test_rank_zero_alone_reports(t):
    """One line per step on stdout (not one per rank), one metrics record
    per step, the checkpoint files of one writer."""
    directory = t.path("ckpt-report")
    result = t.ranks(2, "train-dp2.kiln", "toy8.npz", 4, "--no-shuffle",
                     "--checkpoint-dir", directory, "--checkpoint-every", "2",
                     metrics="report.jsonl")
    if result.returncode != 0:
        return
    lines = [l for l in result.stdout.splitlines() if l.startswith("step ")]
    t.check([l.split()[1] for l in lines] == ["1/4", "2/4", "3/4", "4/4"],
            f"printed lines: {result.stdout!r}")
    t.check(lines and lines[0].startswith("step 1/4  epoch 0  loss 3.750000"),
            f"first line {lines[:1]}")
    t.check([r["step"] for r in read_metrics(t.path("report.jsonl"))] ==
            [1, 2, 3, 4], "metrics records are not one per step")
    # Rank 0 alone writes them, and holds the directory's lock.
    t.check(sorted(os.listdir(directory)) ==
            ["kiln-run.lock", "latest", "step-2.json", "step-2.safetensors",
             "step-4.json", "step-4.safetensors"],
            f"checkpoint files {sorted(os.listdir(directory))}")


def test_resume_at_the_same_world_size(t):
    """6 steps straight and 3 + a resume to 6 on 2 ranks: the same metrics
    and parameters; the sidecar records 2 ranks; resuming it on 1 rank, or
    a 1-rank checkpoint on 2 ranks, is refused."""
    flags = ["--seed", "7"]
    t.ranks(2, "train-dp2.kiln", "toy10.npz", 6, *flags, "--save-params",
            t.path("resume-straight.safetensors"),
            metrics="resume-straight.jsonl")
    directory = t.path("ckpt-resume")
    t.ranks(2, "train-dp2.kiln", "toy10.npz", 3, *flags, "--checkpoint-dir",
            directory, metrics="resume-split.jsonl")
    sidecar = os.path.join(directory, "step-3.json")
    if not os.path.exists(sidecar):
        t.check(False, "no checkpoint at step 3")
        return
    with open(sidecar) as f:
        recorded = json.load(f)["data"]
    # 3 steps of 2 samples in a shard of 5: epoch 1, position 1.
    t.check((recorded["world_size"], recorded["epoch"], recorded["position"])
            == (2, 1, 1), f"sidecar data {recorded}")
    refused = t.single("train-dp2.kiln", "toy10.npz", 6, *flags,
                       "--checkpoint-dir", directory, "--resume",
                       expect_ok=False)
    t.check(refused.returncode == 1 and
            f"checkpoint {sidecar} was written by a run of 2 ranks" in
            refused.stderr and "resume it with 2 ranks" in refused.stderr,
            f"1-rank resume of a 2-rank checkpoint: {refused.returncode} "
            f"{refused.stderr!r}")
    t.ranks(2, "train-dp2.kiln", "toy10.npz", 6, *flags, "--checkpoint-dir",
            directory, "--resume", "--save-params",
            t.path("resume-split.safetensors"), metrics="resume-split.jsonl")
    t.check(strip(read_metrics(t.path("resume-straight.jsonl"))) ==
            strip(read_metrics(t.path("resume-split.jsonl"))),
            "resumed metrics differ from the straight run's")
    t.check(read_bytes(t.path("resume-straight.safetensors")) ==
            read_bytes(t.path("resume-split.safetensors")),
            "resumed parameters differ from the straight run's")
    one = t.path("ckpt-one-rank")
    t.single("train-dp2.kiln", "toy10.npz", 2, "--checkpoint-dir", one)
    refused = t.ranks(2, "train-dp2.kiln", "toy10.npz", 4,
                      "--checkpoint-dir", one, "--resume", expect_ok=False)
    t.check(refused.returncode != 0 and
            "was written by a run of 1 rank, whose data shards this run of 2 "
            "cannot continue" in refused.stderr,
            f"2-rank resume of a 1-rank checkpoint: {refused.returncode} "
            f"{refused.stderr!r}")


def test_refusals(t):
    """A bundle without training.data_parallel on 2 ranks, and a run of
    several ranks that does not train, fail on every rank, clearly."""
    result = t.ranks(2, "train.kiln", "toy8.npz", 2, expect_ok=False)
    t.check(result.returncode != 0 and
            "was not compiled for data parallelism" in result.stderr and
            "recompile it with kilnc --data-parallel" in result.stderr,
            f"non-data-parallel bundle: {result.returncode} {result.stderr!r}")
    command = t.mpirun + ["-np", "2", t.kiln_run, t.path("train-dp2.kiln"),
                          "--info"]
    result = t.launch(command)
    t.check(result.returncode != 0 and
            "kiln-run trains (--data TRAIN.npz --steps N)" in result.stderr,
            f"--info on 2 ranks: {result.returncode} {result.stderr!r}")
    result = t.ranks(2, "train-dp2.kiln", "toy3.npz", 2, expect_ok=False)
    t.check(result.returncode != 0 and
            "3 samples over 2 ranks (1 each) do not fill one batch of 2" in
            result.stderr, f"too few samples: {result.stderr!r}")


def test_a_failing_rank_ends_the_job(t):
    """Rank 1 fails while setting up (its data file is missing) and rank 0
    waits for it in the first step's all-reduce: the job ends non-zero
    within seconds, with rank 1's message."""
    command = (t.mpirun + ["-np", "1"] +
               t.kiln_args("train-dp2.kiln", "toy8.npz", 1000) +
               [":", "-np", "1"] +
               t.kiln_args("train-dp2.kiln", "missing.npz", 1000))
    result = t.launch(command, timeout=120)
    t.check(result.returncode != 0, "the job with a failing rank exited 0")
    t.check(result.seconds < 30,
            f"the job with a failing rank took {result.seconds:.1f} s")
    t.check(f"kiln-run: error: rank 1: {t.path('missing.npz')}" in
            result.stderr, f"rank 1's message missing: {result.stderr!r}")


def test_a_waiting_rank_times_out(t):
    """Rank 1 stops after 2 steps, rank 0 goes on to a third: its
    all-reduce never completes, and after --collective-timeout 2 it ends the
    job naming itself and what it waited for."""
    command = (t.mpirun + ["-np", "1"] +
               t.kiln_args("train-dp2.kiln", "toy8.npz", 6,
                           "--collective-timeout", "2") +
               [":", "-np", "1"] +
               t.kiln_args("train-dp2.kiln", "toy8.npz", 2,
                           "--collective-timeout", "2"))
    result = t.launch(command, timeout=120)
    t.check(result.returncode != 0, "the job with a waiting rank exited 0")
    t.check(result.seconds < 30,
            f"the job with a waiting rank took {result.seconds:.1f} s")
    t.check("kiln: error: rank 0 of 2: timed out after 2 s waiting for the "
            "all-reduce of" in result.stderr,
            f"the timeout message is missing: {result.stderr!r}")


def test_a_killed_rank_is_named(t):
    """Rank 1 is killed (SIGKILL) mid-run; the launcher ends rank 0, which
    says so and names rank 1 and its process, instead of stopping without
    a word of its own. The ranks differ only in --log-every, which tells
    their processes apart here."""
    command = (t.mpirun + ["-np", "1"] +
               t.kiln_args("train-dp2.kiln", "toy8.npz", 10**9,
                           "--log-every", "1000000000",
                           "--collective-timeout", "0") +
               [":", "-np", "1"] +
               t.kiln_args("train-dp2.kiln", "toy8.npz", 10**9,
                           "--log-every", "999999999",
                           "--collective-timeout", "0"))
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    victim = None
    for _ in range(400):
        # Rank 1's kiln-run, not mpirun, whose command line holds it too.
        pattern = "^" + re.escape(t.kiln_run) + " .*log-every 999999999"
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                               text=True).stdout.split()
        if found:
            victim = int(found[0])
            break
        time.sleep(0.05)
    try:
        t.check(victim is not None, "rank 1 never started")
        if victim is None:
            return
        time.sleep(1.0)  # past the start, into the steps
        os.kill(victim, signal.SIGKILL)
        _, stderr = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        t.check(False, "the job went on after rank 1 was killed")
        return
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    t.check(job.returncode != 0, "the job with a killed rank exited 0")
    t.check(f"kiln-run: error: rank 0: the launcher ended this rank (SIGTERM): "
            f"rank 1 (process {victim} on " in stderr,
            f"rank 0 does not name rank 1 (process {victim}): {stderr!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--bundle-tool", required=True)
    parser.add_argument("--cc", required=True)
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--mpirun", default="mpirun")
    args = parser.parse_args()

    mpirun = shutil.which(args.mpirun)
    if not mpirun:
        print(f"SKIP: {args.mpirun} not found; install openmpi-bin "
              "(scripts/install-deps.sh)")
        return SKIP

    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    kernels = os.path.join(args.work_dir, "kernels.so")
    subprocess.run([args.cc, "-shared", "-fPIC", "-O2", "-o", kernels,
                    args.kernels], check=True)
    subprocess.run([args.bundle_tool, "--code", kernels, "--out",
                    args.work_dir], check=True)

    t = Tester(args, mpirun)
    for n in [3, 8, 9, 10]:
        save_npz(t.path(f"toy{n}.npz"),
                 dict(x=(2.0 ** np.arange(n)).astype(np.float32)))
    tests = [test_two_ranks_equal_one_rank_at_twice_the_batch,
             test_shards_match_distributed_sampler,
             test_rank_zero_alone_reports, test_resume_at_the_same_world_size,
             test_refusals, test_a_failing_rank_ends_the_job,
             test_a_waiting_rank_times_out, test_a_killed_rank_is_named]
    return run_tests(t, tests, "kiln-run MPI tests")


if __name__ == "__main__":
    sys.exit(main())
