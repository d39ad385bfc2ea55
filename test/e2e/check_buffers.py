#!/usr/bin/env python3
"""What trains is what PyTorch trains: kilnc leaves buffers alone.

The model, y = x @ W + mask, loss = mean((y - t)^2), has a float initializer
`mask` on the loss's differentiable path, as a float causal mask or RoPE
tables are: PyTorch never updates such a buffer. Its variants:

- `dynamo`: the initializers carry the roles PyTorch's dynamo exporter
  records (value_info metadata_props "pkg.torch.export.graph_signature.
  InputSpec.kind" = PARAMETER / BUFFER, ONNX IR version 10, a field the ONNX
  library Kiln builds against may not know);
- `dynamo-inputs`: the same tags on graph inputs, as the exporter writes
  them with keep_initializers_as_inputs=True;
- `plain`: no record, as the TorchScript exporter writes.

Each is compiled and trained with SGD through kilnc and kiln-run, and the
losses and final tensors are checked against the same SGD steps computed
here in NumPy (float64, so the tolerance is float32 rounding): W trains,
mask keeps its bytes. The plain model trains mask too unless --trainable
says otherwise, and kilnc says so.
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

BATCH, IN, OUT, SAMPLES, STEPS, LR = 4, 5, 3, 8, 3, 0.1
KIND = "pkg.torch.export.graph_signature.InputSpec.kind"


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tagged(info, kind):
    """`info` with metadata_props (ValueInfoProto field 4) {KIND: kind}."""
    entry = onnx.StringStringEntryProto(key=KIND, value=kind)
    payload = entry.SerializeToString()
    raw = info.SerializeToString() + b"\x22" + varint(len(payload)) + payload
    result = onnx.ValueInfoProto()
    result.ParseFromString(raw)
    return result


def initial_values():
    g = np.random.default_rng(3)
    return {"W": g.standard_normal((IN, OUT)).astype(np.float32),
            "mask": np.triu(np.full((1, OUT), -0.5, np.float32))}


def build(variant):
    values = initial_values()
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="xw"),
             helper.make_node("Add", ["xw", "mask"], ["y"], name="y"),
             helper.make_node("Sub", ["y", "t"], ["d"], name="d"),
             helper.make_node("Mul", ["d", "d"], ["d2"], name="d2"),
             helper.make_node("ReduceMean", ["d2"], ["loss"], name="loss",
                              keepdims=0)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                            ["batch", IN]),
              helper.make_tensor_value_info("t", TensorProto.FLOAT,
                                            ["batch", OUT])]
    graph = helper.make_graph(
        nodes, "buffers", inputs,
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=[numpy_helper.from_array(v, k) for k, v in values.items()])
    roles = {"W": "PARAMETER", "mask": "BUFFER"}
    for name, array in values.items():
        info = helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             list(array.shape))
        if variant == "dynamo":
            graph.value_info.append(tagged(info, roles[name]))
        elif variant == "dynamo-inputs":
            graph.input.append(tagged(info, roles[name]))
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-tests")
    model.ir_version = 8
    return model


def reference(data, train_mask):
    """SGD on the batches kiln-run --no-shuffle takes, in float64."""
    values = {k: v.astype(np.float64) for k, v in initial_values().items()}
    losses = []
    for step in range(STEPS):
        rows = [(step * BATCH + i) % SAMPLES for i in range(BATCH)]
        x, t = data["x"][rows].astype(np.float64), data["t"][rows]
        d = x @ values["W"] + values["mask"] - t
        losses.append(float(np.mean(d * d)))
        grad_y = 2 * d / d.size
        values["W"] -= LR * (x.T @ grad_y)
        if train_mask:
            values["mask"] -= LR * grad_y.sum(axis=0, keepdims=True)
    return losses, values


class Tester(Checks):
    def __init__(self, args):
        super().__init__(args.work_dir)
        self.args = args

    def run(self, tool, *arguments):
        return subprocess.run([tool, *arguments], capture_output=True,
                              text=True, timeout=300)

    def compile(self, variant, *flags, ok=True):
        bundle = self.path(f"{variant}{'-'.join(('',) + flags)}.kiln"
                           .replace("=", "_").replace("@", "").replace("/", "_"))
        result = self.run(self.args.kilnc, self.path(f"{variant}.onnx"),
                          f"--batch-size={BATCH}", "--optimizer=sgd",
                          f"--lr={LR}", *flags, "-o", bundle)
        if ok:
            self.check(result.returncode == 0,
                       f"kilnc {variant} {flags}: {result.stderr.strip()}")
        return bundle, result

    def train(self, bundle, name):
        metrics, params = self.path(f"{name}.jsonl"), self.path(
            f"{name}.safetensors")
        for path in (metrics, params):
            if os.path.exists(path):
                os.remove(path)
        result = self.run(self.args.kiln_run, bundle, "--data",
                          self.path("train.npz"), "--steps", str(STEPS),
                          "--no-shuffle", "--metrics", metrics,
                          "--save-params", params)
        self.check(result.returncode == 0,
                   f"kiln-run {name}: {result.stderr.strip()}")
        if result.returncode != 0:
            return [], {}
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        return losses, read_safetensors(params)

    def info(self, bundle):
        result = self.run(self.args.kiln_run, bundle, "--info")
        lines = [line for line in result.stdout.splitlines()
                 if line.startswith("trained parameters:")]
        return lines[0] if lines else ""

    def expect(self, name, bundle, train_mask, data):
        losses, values = self.train(bundle, name)
        want_losses, want = reference(data, train_mask)
        self.check(np.allclose(losses, want_losses, rtol=1e-6, atol=0),
                   f"{name}: losses {losses}, expected {want_losses}")
        for key in ("W", "mask"):
            got = values.get(key)
            self.check(got is not None and
                       np.allclose(got, want[key], rtol=1e-5, atol=1e-6),
                       f"{name}: {key} is {got}, expected {want[key]}")
        initial = initial_values()["mask"]
        if not train_mask and "mask" in values:
            self.check(values["mask"].tobytes() == initial.tobytes(),
                       f"{name}: the buffer mask changed")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--work-dir", required=True)
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    t = Tester(args)
    g = np.random.default_rng(5)
    data = {"x": g.standard_normal((SAMPLES, IN)).astype(np.float32),
            "t": g.standard_normal((SAMPLES, OUT)).astype(np.float32)}
    save_npz(t.path("train.npz"), data)
    for variant in ("dynamo", "dynamo-inputs", "plain"):
        onnx.save(build(variant), t.path(f"{variant}.onnx"))

    # The exporter's record: mask stays, as in PyTorch.
    for variant in ("dynamo", "dynamo-inputs"):
        bundle, result = t.compile(variant)
        t.check("training 1 tensor (15 values); 1 float initializer stays as "
                "given: mask (recorded as buffer)" in result.stderr,
                f"kilnc {variant}: note {result.stderr!r}")
        t.check("does not record" not in result.stderr,
                f"kilnc {variant}: {result.stderr!r}")
        t.check(t.info(bundle).endswith(": W"),
                f"kiln-run --info {variant}: {t.info(bundle)!r}")
        t.expect(variant, bundle, False, data)

    # No record: everything on the loss's path trains, and kilnc says how
    # to keep buffers fixed.
    bundle, result = t.compile("plain")
    t.check("training 2 tensors (18 values)" in result.stderr and
            "does not record which initializers are buffers" in result.stderr,
            f"kilnc plain: note {result.stderr!r}")
    t.check(t.info(bundle).endswith(": W, mask"),
            f"kiln-run --info plain: {t.info(bundle)!r}")
    t.expect("plain", bundle, True, data)

    # --trainable, as a list and as a file, decides.
    with open(t.path("trainable.txt"), "w") as f:
        f.write("# model.named_parameters()\nW\n")
    for flag in ("--trainable=W", f"--trainable=@{t.path('trainable.txt')}"):
        bundle, result = t.compile("plain", flag)
        t.check("mask (not in --trainable)" in result.stderr and
                "does not record" not in result.stderr,
                f"kilnc plain {flag}: note {result.stderr!r}")
        t.expect(f"plain{flag[11:13]}", bundle, False, data)
    # And overrides the record.
    bundle, _ = t.compile("dynamo", "--trainable=W,mask")
    t.expect("dynamo-both", bundle, True, data)

    for flag, message in [
            ("--trainable=V", "--trainable names 'V', which is not a float "
                              "initializer of the model"),
            ("--trainable=@" + t.path("missing.txt"), "--trainable=@"),
            ("--trainable=,", "names no tensor")]:
        _, result = t.compile("plain", flag, ok=False)
        t.check(result.returncode == 1 and message in result.stderr,
                f"kilnc {flag}: exit {result.returncode}, {result.stderr!r}")
    return report(t, "buffers stay as PyTorch keeps them")


if __name__ == "__main__":
    sys.exit(main())
