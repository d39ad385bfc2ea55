#!/usr/bin/env python3
"""A batch whose every label is ignore_index, as PyTorch treats it.

torch.nn.functional.cross_entropy(..., ignore_index=-100) of a batch with
no counted label is NaN (the mean over no elements), and its gradients are
zero: an optimizer step leaves SGD's parameters as they were. Here logits =
x @ W + b, kilnc --loss=cross_entropy --optimizer=sgd, 4 steps of batch 4
unshuffled; the second batch's labels are all -100. Checked against the same
steps in NumPy (float64): the losses (NaN at step 2, and kiln-run's warning
naming it), the parameters after every step (finite, unchanged by step 2),
with the loss kept through kiln-autodiff (its own gradient rule) and, with
--label-smoothing, too. The target: the one given on the command line.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from kiln_test_harness import Checks, report  # noqa: E402
from kiln_test_io import read_safetensors, save_npz  # noqa: E402

BATCH, IN, CLASSES, STEPS, LR = 4, 6, 5, 4, 0.5


def initial_values():
    g = np.random.default_rng(11)
    return {"W": g.standard_normal((IN, CLASSES)).astype(np.float32),
            "b": g.standard_normal((CLASSES,)).astype(np.float32)}


def build():
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="xw"),
             helper.make_node("Add", ["xw", "b"], ["logits"], name="logits")]
    graph = helper.make_graph(
        nodes, "ignored", [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, ["batch", IN])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       ["batch", CLASSES])],
        initializer=[numpy_helper.from_array(v, k)
                     for k, v in initial_values().items()])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def reference(data, smoothing):
    """PyTorch's cross_entropy and its gradient, SGD, in float64."""
    p = {k: v.astype(np.float64) for k, v in initial_values().items()}
    losses, after = [], []
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        x, y = data["x"][rows].astype(np.float64), data["labels"][rows]
        z = x @ p["W"] + p["b"]
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        counted = y != -100
        safe = np.where(counted, y, 0)
        target = (1 - smoothing) * np.eye(CLASSES)[safe] + smoothing / CLASSES
        per_row = -(target * logp).sum(axis=1) * counted
        total = counted.sum()
        losses.append(per_row.sum() / total if total else float("nan"))
        if total:
            dz = (np.exp(logp) - target) * counted[:, None] / total
            p["W"] -= LR * x.T @ dz
            p["b"] -= LR * dz.sum(axis=0)
        after.append({k: v.copy() for k, v in p.items()})
    return losses, after


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--target", default="--target=cpu")
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    t = Checks(args.work_dir)
    g = np.random.default_rng(2)
    labels = g.integers(0, CLASSES, STEPS * BATCH)
    labels[BATCH:2 * BATCH] = -100
    labels[2 * BATCH + 1] = -100
    data = {"x": g.standard_normal((STEPS * BATCH, IN)).astype(np.float32),
            "labels": labels.astype(np.int64)}
    save_npz(t.path("train.npz"), data)
    onnx.save(build(), t.path("linear.onnx"))

    for smoothing in (0.0, 0.2):
        name = f"smoothing-{smoothing}"
        bundle = t.path(f"{name}.kiln")
        compiled = subprocess.run(
            [args.kilnc, t.path("linear.onnx"), f"--batch-size={BATCH}",
             "--loss=cross_entropy", "--loss-on=logits", "--optimizer=sgd",
             f"--lr={LR}", f"--label-smoothing={smoothing}", args.target,
             "-o", bundle], capture_output=True, text=True)
        t.check(compiled.returncode == 0, f"kilnc {name}: {compiled.stderr}")
        want_losses, want_params = reference(data, smoothing)
        for steps in range(1, STEPS + 1):
            metrics = t.path(f"{name}-{steps}.jsonl")
            params = t.path(f"{name}-{steps}.safetensors")
            for path in (metrics, params):
                if os.path.exists(path):
                    os.remove(path)
            run = subprocess.run(
                [args.kiln_run, bundle, "--data", t.path("train.npz"),
                 "--steps", str(steps), "--no-shuffle", "--metrics", metrics,
                 "--save-params", params], capture_output=True, text=True)
            t.check(run.returncode == 0, f"kiln-run {name}: {run.stderr}")
            if run.returncode:
                continue
            got = read_safetensors(params)
            for key, value in want_params[steps - 1].items():
                t.check(np.all(np.isfinite(got[key])) and
                        np.allclose(got[key], value, rtol=1e-5, atol=1e-6),
                        f"{name}: {key} after step {steps}: {got[key]}, "
                        f"expected {value}")
            if steps < STEPS:
                continue
            with open(metrics) as f:
                losses = [json.loads(line)["loss"] for line in f]
            t.check(losses[1] is None,
                    f"{name}: step 2's loss is {losses[1]}, expected NaN")
            finite = [np.nan if losses[i] is None else losses[i]
                      for i in (0, 2, 3)]
            expected = [want_losses[i] for i in (0, 2, 3)]
            t.check(np.allclose(finite, expected, rtol=1e-6),
                    f"{name}: losses {finite}, expected {expected}")
            t.check("kiln-run: warning: step 2: the loss is nan" in run.stderr,
                    f"{name}: no warning for step 2: {run.stderr!r}")
    return report(t, "a batch of ignored labels trains as in PyTorch")


if __name__ == "__main__":
    sys.exit(main())
