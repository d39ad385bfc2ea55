#!/usr/bin/env python3
"""Token ids and class labels out of range are errors, as in PyTorch.

The model embeds token ids (Gather of a [16, 4] table, as torch.nn.Embedding
exports), averages them and classifies into 5 classes; kilnc builds the
cross-entropy (ignore_index -100) and an SGD step. A step given an id outside
[0, 16) (16, 10**6 or -1) or a label outside [0, 5) that is not -100 (5 or
-5) fails, naming the step, the entry point, the input and the range, and
the checkpoints are those of the steps before; -100 labels train. The same
for single runs of forward and eval_step through --inputs. The count is made
in the step itself (kiln-check-indices): no host pass over the batch.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from kiln_test_harness import Checks, report  # noqa: E402
from kiln_test_io import save_npz  # noqa: E402

VOCAB, DIM, CLASSES, SEQ, BATCH, SAMPLES = 16, 4, 5, 3, 2, 8


def build():
    g = np.random.default_rng(7)
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
             helper.make_node("ReduceMean", ["e"], ["pooled"], name="pool",
                              axes=[1], keepdims=0),
             helper.make_node("MatMul", ["pooled", "W"], ["logits"],
                              name="classify")]
    graph = helper.make_graph(
        nodes, "ids", [helper.make_tensor_value_info(
            "ids", TensorProto.INT64, ["batch", SEQ])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       ["batch", CLASSES])],
        initializer=[
            numpy_helper.from_array(
                g.standard_normal((VOCAB, DIM)).astype(np.float32), "emb"),
            numpy_helper.from_array(
                g.standard_normal((DIM, CLASSES)).astype(np.float32), "W")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--target", default="--target=cpu")
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    t = Checks(args.work_dir)
    onnx.save(build(), t.path("ids.onnx"))
    bundle = t.path("ids.kiln")
    compiled = subprocess.run(
        [args.kilnc, t.path("ids.onnx"), f"--batch-size={BATCH}",
         "--loss=cross_entropy", "--loss-on=logits", "--optimizer=sgd",
         args.target, "-o", bundle], capture_output=True, text=True)
    t.check(compiled.returncode == 0, f"kilnc: {compiled.stderr}")

    g = np.random.default_rng(1)
    good = {"ids": g.integers(0, VOCAB, (SAMPLES, SEQ)).astype(np.int64),
            "labels": g.integers(0, CLASSES, SAMPLES).astype(np.int64)}
    good["labels"][0] = -100
    rows = f"the rows [0, {VOCAB}) of 'emb'"
    classes = f"the class indices [0, {CLASSES}) and ignore_index -100"

    def train(name, data, ok):
        save_npz(t.path(f"{name}.npz"), data)
        directory = t.path(f"ckpt-{name}")
        run = subprocess.run(
            [args.kiln_run, bundle, "--data", t.path(f"{name}.npz"),
             "--steps", "4", "--no-shuffle", "--checkpoint-dir", directory,
             "--checkpoint-every", "1"], capture_output=True, text=True)
        t.check((run.returncode == 0) == ok,
                f"{name}: exit {run.returncode}: {run.stderr!r}")
        return run, directory

    train("good", good, True)
    # Sample 2 is in the second batch (2 a batch, unshuffled).
    for name, key, value, what in [
            ("id-vocab", "ids", VOCAB, rows), ("id-huge", "ids", 10**6, rows),
            ("id-negative", "ids", -1, rows),
            ("label-classes", "labels", CLASSES, classes),
            ("label-negative", "labels", -5, classes)]:
        data = {k: v.copy() for k, v in good.items()}
        if key == "ids":
            data["ids"][2, 1] = value
        else:
            data["labels"][2] = value
        run, directory = train(name, data, False)
        message = (f"kiln-run: error: {t.path(name + '.npz')}: step 2: entry "
                   f"point 'train_step': input '{key}' holds 1 value outside "
                   f"{what}")
        t.check(run.stderr.startswith(message),
                f"{name}: stderr {run.stderr!r}, expected {message!r}")
        with open(os.path.join(directory, "latest")) as f:
            t.check(f.read() == "step-1.json\n",
                    f"{name}: the checkpoints are not step 1's")

    # Single runs: forward (ids only) and eval_step (ids and labels).
    for entry, inputs, key, what in [
            ("forward", {"ids": np.array([[0, 3, VOCAB + 2], [1, 2, 3]]),
                         "labels": np.array([1, 2])}, "ids", rows),
            ("eval_step", {"ids": np.zeros((BATCH, SEQ), np.int64),
                           "labels": np.array([7, 1])}, "labels", classes)]:
        path = t.path(f"{entry}-in.npz")
        save_npz(path, {k: v.astype(np.int64) for k, v in inputs.items()})
        run = subprocess.run([args.kiln_run, bundle, "--entry", entry,
                              "--inputs", path, "--outputs",
                              t.path(f"{entry}-out.npz")],
                             capture_output=True, text=True)
        message = (f"kiln-run: error: {path}: entry point '{entry}': input "
                   f"'{key}' holds 1 value outside {what}")
        t.check(run.returncode == 1 and run.stderr.startswith(message),
                f"{entry}: exit {run.returncode}, {run.stderr!r}")
        t.check(not os.path.exists(t.path(f"{entry}-out.npz")),
                f"{entry}: outputs written after the error")
    # A good run's outputs hold the model's outputs only.
    path = t.path("forward-good.npz")
    save_npz(path, {"ids": good["ids"][:BATCH],
                    "labels": good["labels"][:BATCH]})
    run = subprocess.run([args.kiln_run, bundle, "--entry", "forward",
                          "--inputs", path, "--outputs",
                          t.path("forward-good-out.npz")],
                         capture_output=True, text=True)
    t.check(run.returncode == 0, f"forward: {run.stderr!r}")
    if run.returncode == 0:
        with np.load(t.path("forward-good-out.npz")) as out:
            t.check(sorted(out.files) == ["logits", "loss"],
                    f"forward's outputs: {sorted(out.files)}")
    return report(t, "out-of-range indices are refused")


if __name__ == "__main__":
    sys.exit(main())
