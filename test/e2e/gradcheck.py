"""Checks every differentiation rule against central finite differences in
float64: for each case a one-op ONNX graph whose inputs are parameters (float
initializers) is compiled with `kilnc --inference --gradients`; the loss is
sum(op(params) * R) with a fixed random R, so every output element matters.
The gradient forward_grad returns must match (L(p + h) - L(p - h)) / 2h,
evaluated with `kiln-run --params`, element by element.

Where the loss has no derivative (max pooling over windows with tied
maxima), a case names a PyTorch function instead, and the gradient must
match what torch.autograd computes for it in float64.

    gradcheck.py KILNC KILN_RUN WORKDIR [--only NAME]
"""
import argparse
import os
import subprocess
import sys

import numpy as np

from kiln_test_io import save_npz
import onnx
from onnx import TensorProto, helper, numpy_helper

STEP = 1e-6
# Central differences in float64 with this step are good to ~1e-9 here; a
# wrong rule is off by O(1).
TOLERANCE = 1e-6
DOUBLE = TensorProto.DOUBLE


def case(name, op, params, out_shape, attrs=None, extra_inputs=(), nodes=(),
         torch_reference=None):
    """torch_reference(torch, *params) computes the op in PyTorch: the
    gradient is then checked against torch.autograd, not finite differences.
    With op None, nodes compute the output y from the parameters instead."""
    return dict(name=name, op=op, params=params, out_shape=out_shape,
                attrs=attrs or {}, extra_inputs=list(extra_inputs),
                nodes=list(nodes), torch_reference=torch_reference)


def output_weights(shape):
    """R, the fixed weights of the op's output in the loss."""
    return np.random.default_rng(3).standard_normal(shape)


def attention_nodes(scale_op=None, mask=None):
    """softmax(q kᵀ [scale_op c] [+ mask]) v over the last two dimensions of
    the parameters q, k and v, as torch.onnx exports it; kilnc forms one
    kiln.attention of it. mask is "add" (the parameter m added) or "causal"
    (masked_fill of the scores above the diagonal with -inf, a Where)."""
    make = helper.make_node
    scalar = lambda name, value: make("Constant", [], [name], value=helper.make_tensor(
        name, DOUBLE, [], [value]))
    nodes = [make("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             make("MatMul", ["q", "kt"], ["scores"])]
    if scale_op:
        nodes += [scalar("c", 0.5 if scale_op == "Mul" else 2.0),
                  make(scale_op, ["scores", "c"], ["scaled"])]
    if mask == "add":
        nodes.append(make("Add", [nodes[-1].output[0], "m"], ["masked"]))
    elif mask == "causal":
        above = np.triu(np.ones((3, 4), dtype=bool), 1)
        nodes += [make("Constant", [], ["above"],
                       value=numpy_helper.from_array(above, "above")),
                  scalar("ninf", -np.inf),
                  make("Where", ["above", "ninf", nodes[-1].output[0]], ["masked"])]
    return nodes + [make("Softmax", [nodes[-1].output[0]], ["p"], axis=-1),
                    make("MatMul", ["p", "v"], ["y"])]


def cross_entropy_nodes(labels, weight=None, as_nll=False, **attrs):
    """SoftmaxCrossEntropyLoss of the parameter x against constant labels
    (and constant class weights): kilnc differentiates it with
    kiln.cross_entropy's own rule. With as_nll, the same loss written as
    NegativeLogLikelihoodLoss of LogSoftmax over the classes, which
    canonicalization makes kiln.cross_entropy."""
    make = helper.make_node
    constant = lambda name, array: make("Constant", [], [name],
                                        value=numpy_helper.from_array(array, name))
    nodes = [constant("labels", np.array(labels, dtype=np.int64))]
    inputs = ["x", "labels"]
    if weight is not None:
        nodes.append(constant("w", np.array(weight, dtype=np.float64)))
        inputs.append("w")
    if as_nll:
        nodes.append(make("LogSoftmax", ["x"], ["logp"], axis=1))
        inputs[0] = "logp"
        return nodes + [make("NegativeLogLikelihoodLoss", inputs, ["y"],
                             **attrs)]
    return nodes + [make("SoftmaxCrossEntropyLoss", inputs, ["y"], **attrs)]


def cases():
    rng = np.random.default_rng(7)
    r = lambda *s: rng.standard_normal(s)
    pos = lambda *s: rng.uniform(0.5, 2.0, s)
    ints = lambda values: numpy_helper.from_array(np.array(values, dtype=np.int64))
    # Values at least 0.05 apart, so a finite-difference step never changes
    # which one is the maximum.
    distinct = lambda *s: rng.permutation(np.prod(s)).reshape(s) * 0.05 - 1.0
    ties = lambda *s: rng.integers(0, 3, s).astype(np.float64)
    return [
        case("add_broadcast", "Add", {"a": r(2, 3), "b": r(3)}, (2, 3)),
        case("sub", "Sub", {"a": r(2, 3), "b": r(2, 3)}, (2, 3)),
        case("mul_broadcast", "Mul", {"a": r(2, 3), "b": r(2, 1)}, (2, 3)),
        case("div", "Div", {"a": r(2, 3), "b": pos(2, 3)}, (2, 3)),
        case("pow", "Pow", {"a": pos(2, 3), "b": r(2, 3)}, (2, 3)),
        case("max", "Max", {"a": r(2, 3), "b": r(2, 3)}, (2, 3)),
        case("min", "Min", {"a": r(2, 3), "b": r(2, 3)}, (2, 3)),
        case("neg", "Neg", {"a": r(2, 3)}, (2, 3)),
        case("exp", "Exp", {"a": r(2, 3)}, (2, 3)),
        case("log", "Log", {"a": pos(2, 3)}, (2, 3)),
        case("sqrt", "Sqrt", {"a": pos(2, 3)}, (2, 3)),
        case("reciprocal", "Reciprocal", {"a": pos(2, 3)}, (2, 3)),
        case("tanh", "Tanh", {"a": r(2, 3)}, (2, 3)),
        case("sigmoid", "Sigmoid", {"a": r(2, 3)}, (2, 3)),
        case("softplus", "Softplus", {"a": r(2, 3)}, (2, 3)),
        case("erf", "Erf", {"a": r(2, 3)}, (2, 3)),
        case("sin", "Sin", {"a": r(2, 3)}, (2, 3)),
        case("cos", "Cos", {"a": r(2, 3)}, (2, 3)),
        case("relu", "Relu", {"a": r(2, 3) + 0.05}, (2, 3)),
        case("abs", "Abs", {"a": r(2, 3) + 0.05}, (2, 3)),
        case("leaky_relu", "LeakyRelu", {"a": r(2, 3) + 0.05}, (2, 3), {"alpha": 0.2}),
        case("gelu", "Gelu", {"a": r(2, 3)}, (2, 3)),
        case("gelu_tanh", "Gelu", {"a": r(2, 3)}, (2, 3), {"approximate": "tanh"}),
        case("matmul", "MatMul", {"a": r(2, 3), "b": r(3, 4)}, (2, 4)),
        case("matmul_batched", "MatMul", {"a": r(2, 2, 3), "b": r(2, 3, 2)}, (2, 2, 2)),
        case("gemm_transposed", "Gemm", {"a": r(3, 2), "b": r(4, 3), "c": r(4)}, (2, 4),
             {"transA": 1, "transB": 1}),
        case("transpose", "Transpose", {"a": r(2, 3, 2)}, (2, 2, 3), {"perm": [2, 0, 1]}),
        case("reshape", "Reshape", {"a": r(2, 3)}, (3, 2), extra_inputs=[ints([3, 2])]),
        case("slice", "Slice", {"a": r(3, 4)}, (2, 2),
             extra_inputs=[ints([1, 1]), ints([3, 3])]),
        case("concat", "Concat", {"a": r(2, 3), "b": r(1, 3)}, (3, 3), {"axis": 0}),
        case("expand", "Expand", {"a": r(3, 1)}, (2, 3, 4), extra_inputs=[ints([2, 3, 4])]),
        case("reduce_sum", "ReduceSum", {"a": r(2, 3, 2)}, (2, 1, 2), {"keepdims": 1},
             extra_inputs=[ints([1])]),
        case("reduce_mean", "ReduceMean", {"a": r(2, 3)}, (2,), {"axes": [1], "keepdims": 0}),
        case("reduce_max", "ReduceMax", {"a": r(2, 3)}, (3,), {"axes": [0], "keepdims": 0}),
        case("softmax", "Softmax", {"a": r(2, 4)}, (2, 4), {"axis": -1}),
        case("log_softmax", "LogSoftmax", {"a": r(2, 4)}, (2, 4), {"axis": 1}),
        case("layer_norm", "LayerNormalization", {"a": r(2, 4), "g": r(4), "b": r(4)},
             (2, 4), {"axis": -1}),
        case("gather", "Gather", {"a": r(5, 3)}, (2, 2, 3), {"axis": 0},
             extra_inputs=[ints([[0, 3], [3, -1]])]),
        case("gather_elements", "GatherElements", {"a": r(3, 3)}, (2, 3), {"axis": 0},
             extra_inputs=[ints([[0, 2, 1], [2, 2, 0]])]),
        case("slice_strided", "Slice", {"a": r(5, 7)}, (2, 2),
             extra_inputs=[ints([1, 0]), ints([5, 6]), ints([0, 1]), ints([2, 3])]),
        case("cumsum", "CumSum", {"a": r(2, 4)}, (2, 4), extra_inputs=[ints(1)]),
        case("cumsum_exclusive_reverse", "CumSum", {"a": r(3, 2)}, (3, 2),
             {"exclusive": 1, "reverse": 1}, extra_inputs=[ints(0)]),
        # Convolutions: the bias is an add after the conv.
        case("conv", "Conv", {"x": r(1, 2, 4, 4), "w": r(2, 2, 3, 3), "b": r(2)},
             (1, 2, 4, 4), {"pads": [1, 1, 1, 1]}),
        # Stride 2 over 8 rows with one pad leaves the last row unread; the
        # dilated columns pad asymmetrically.
        case("conv_strided_dilated", "Conv", {"x": r(1, 1, 8, 5), "w": r(2, 1, 2, 2)},
             (1, 2, 4, 4), {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 1]}),
        case("conv_groups", "Conv", {"x": r(1, 4, 4, 4), "w": r(6, 2, 2, 2)},
             (1, 6, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        case("conv_1d", "Conv", {"x": r(2, 2, 8), "w": r(3, 2, 3)}, (2, 3, 2),
             {"strides": [3]}),
        case("conv_transpose", "ConvTranspose", {"x": r(1, 2, 3, 3), "w": r(2, 2, 3, 3)},
             (1, 2, 6, 6), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                            "output_padding": [1, 1]}),
        case("conv_transpose_groups", "ConvTranspose", {"x": r(1, 4, 3), "w": r(4, 1, 2)},
             (1, 2, 7), {"group": 2, "strides": [2], "dilations": [2]}),
        # Max pooling: overlapping windows (3 every 2) with padding; distinct
        # values, so every maximum is unique.
        case("max_pool_overlapping", "MaxPool", {"x": distinct(1, 2, 5, 5)}, (1, 2, 3, 3),
             {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        case("max_pool_ceil_dilated", "MaxPool", {"x": distinct(1, 1, 7, 6)}, (1, 1, 3, 3),
             {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 2],
              "ceil_mode": 1}),
        # Ties (values from {0, 1, 2}, overlapping windows): PyTorch gives
        # the gradient to the first maximum in the window.
        case("max_pool_ties", "MaxPool", {"x": ties(2, 2, 5, 5)}, (2, 2, 3, 3),
             {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
             torch_reference=lambda torch, x: torch.nn.functional.max_pool2d(
                 x, 3, 2, padding=1)),
        case("max_pool_ties_ceil", "MaxPool", {"x": ties(1, 2, 6, 6)}, (1, 2, 3, 3),
             {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
             torch_reference=lambda torch, x: torch.nn.functional.max_pool2d(
                 x, 3, 2, ceil_mode=True)),
        case("avg_pool", "AveragePool", {"x": r(1, 2, 4, 4)}, (1, 2, 2, 2),
             {"kernel_shape": [2, 2], "strides": [2, 2]}),
        case("avg_pool_pads_excluded", "AveragePool", {"x": r(1, 1, 5, 5)}, (1, 1, 3, 3),
             {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        case("avg_pool_pads_included_ceil", "AveragePool", {"x": r(1, 1, 6, 5)},
             (1, 1, 4, 3), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1],
                            "ceil_mode": 1, "count_include_pad": 1}),
        case("avg_pool_1d", "AveragePool", {"x": r(2, 2, 7)}, (2, 2, 3),
             {"kernel_shape": [3], "strides": [2]}),
        case("avg_pool_dilated_pads", "AveragePool", {"x": r(1, 1, 7, 7)},
             (1, 1, 5, 5), {"kernel_shape": [3, 3], "dilations": [2, 2],
                            "pads": [1, 1, 1, 1]}),
        # Recurrent ops, unrolled: every weight and the input through three
        # steps; the sequence output Y.
        case("rnn_bidirectional", "RNN",
             {"x": r(3, 2, 4), "w": r(2, 3, 4), "r": r(2, 3, 3), "b": r(2, 6)},
             (3, 2, 2, 3), {"hidden_size": 3, "direction": "bidirectional"}),
        case("gru_linear_before_reset", "GRU",
             {"x": r(3, 2, 4), "w": r(1, 9, 4), "r": r(1, 9, 3), "b": r(1, 18)},
             (3, 1, 2, 3), {"hidden_size": 3, "linear_before_reset": 1}),
        case("gru_reset_first", "GRU",
             {"x": r(3, 2, 4), "w": r(1, 9, 4), "r": r(1, 9, 3), "b": r(1, 18)},
             (3, 1, 2, 3), {"hidden_size": 3}),
        case("lstm_reverse", "LSTM",
             {"x": r(3, 2, 4), "w": r(1, 12, 4), "r": r(1, 12, 3), "b": r(1, 24)},
             (3, 1, 2, 3), {"hidden_size": 3, "direction": "reverse"}),
        # Training-mode batch normalization (batch statistics), differentiated
        # through its decomposition; the running statistics it does not read
        # are constants here.
        case("batch_norm_train", "BatchNormalization",
             {"x": r(3, 2, 2, 2), "s": r(2), "b": r(2)}, (3, 2, 2, 2), {"training_mode": 1},
             extra_inputs=[numpy_helper.from_array(r(2)), numpy_helper.from_array(pos(2))]),
        # Attention, batched over two dimensions, recognised as one
        # kiln.attention and differentiated with its own rule.
        case("attention", None,
             {"q": r(2, 2, 3, 2), "k": r(2, 2, 4, 2), "v": r(2, 2, 4, 2)},
             (2, 2, 3, 2), nodes=attention_nodes("Div")),
        case("attention_mask", None,
             {"q": r(1, 2, 3, 2), "k": r(1, 2, 4, 2), "v": r(1, 2, 4, 3),
              "m": r(3, 4)}, (1, 2, 3, 3), nodes=attention_nodes("Mul", "add")),
        # Cross-entropy: the mean over the labels, class weights with an
        # ignored label, and per-element losses over [N, C, D] scores.
        case("cross_entropy", None, {"x": r(3, 4)}, (), nodes=cross_entropy_nodes([0, 3, 1])),
        case("cross_entropy_weighted_ignore", None, {"x": r(4, 3)}, (),
             nodes=cross_entropy_nodes([1, 0, 2, 2], [0.5, 2.0, 1.5], ignore_index=1)),
        case("cross_entropy_sum", None, {"x": r(3, 4)}, (),
             nodes=cross_entropy_nodes([2, 2, 0], reduction="sum")),
        case("cross_entropy_none_spatial", None, {"x": r(2, 3, 2)}, (2, 2),
             nodes=cross_entropy_nodes([[0, 2], [1, 1]], [1.0, 0.25, 3.0],
                                       reduction="none")),
        case("attention_causal", None,
             {"q": r(2, 1, 3, 2), "k": r(2, 1, 4, 2), "v": r(2, 1, 4, 2)},
             (2, 1, 3, 2), nodes=attention_nodes("Mul", "causal")),
        # NegativeLogLikelihoodLoss of LogSoftmax, which kilnc differentiates
        # as kiln.cross_entropy.
        case("nll_of_log_softmax", None, {"x": r(4, 3)}, (),
             nodes=cross_entropy_nodes([2, 0, 1, 0], [1.5, 0.5, 2.0],
                                       as_nll=True, ignore_index=1)),
    ]


def build_model(spec, path):
    params = spec["params"]
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.float64), name)
             for name, v in params.items()]
    op_inputs = list(params)
    for i, tensor in enumerate(spec["extra_inputs"]):
        tensor.name = "const%d" % i
        inits.append(tensor)
        op_inputs.append(tensor.name)
    weights = output_weights(spec["out_shape"])
    inits.append(numpy_helper.from_array(weights.astype(np.float64), "R"))
    # R is a float initializer too; freeze it so it gets no gradient.
    nodes = spec["nodes"] or [
        helper.make_node(spec["op"], op_inputs, ["y"], **spec["attrs"])]
    nodes = nodes + [helper.make_node("Mul", ["y", "R"], ["weighted"]),
             helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0)]
    graph = helper.make_graph(nodes, spec["name"], [],
                              [helper.make_tensor_value_info("loss", DOUBLE, [])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def run(kiln_run, bundle, entry, params_npz, out_npz):
    cmd = [kiln_run, bundle, "--entry", entry, "--outputs", out_npz]
    if params_npz:
        cmd += ["--params", params_npz]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with np.load(out_npz) as archive:
        return {k: archive[k] for k in archive.files}


def check(spec, kilnc, kiln_run, work):
    base = os.path.join(work, spec["name"])
    build_model(spec, base + ".onnx")
    proc = subprocess.run([kilnc, base + ".onnx", "--inference", "--gradients",
                           "--freeze=^R$", "-o", base + ".kiln"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return "kilnc failed: " + proc.stderr.strip()
    analytic = run(kiln_run, base + ".kiln", "forward_grad", None, base + "-grad.npz")
    values = {k: np.asarray(v, dtype=np.float64) for k, v in spec["params"].items()}
    if spec["torch_reference"]:
        return check_against_torch(spec, values, analytic)
    worst = 0.0
    for name, value in values.items():
        got = analytic[name + ".grad"]
        for index in np.ndindex(value.shape):
            losses = []
            for sign in (1, -1):
                shifted = dict(values)
                shifted[name] = value.copy()
                shifted[name][index] += sign * STEP
                save_npz(base + "-p.npz", shifted)
                losses.append(float(run(kiln_run, base + ".kiln", "forward",
                                        base + "-p.npz", base + "-l.npz")["loss"]))
            numeric = (losses[0] - losses[1]) / (2 * STEP)
            error = abs(got[index] - numeric)
            worst = max(worst, error)
            if error > TOLERANCE * max(1.0, abs(numeric)):
                return "%s.grad%s = %.9g, finite differences give %.9g" % (
                    name, list(index), got[index], numeric)
    return "ok (max abs diff %.2g)" % worst


def check_against_torch(spec, values, analytic):
    import torch
    params = {k: torch.tensor(v, requires_grad=True) for k, v in values.items()}
    output = spec["torch_reference"](torch, *params.values())
    weights = torch.tensor(output_weights(spec["out_shape"]))
    (output * weights).sum().backward()
    worst = 0.0
    for name, param in params.items():
        want = param.grad.numpy()
        got = analytic[name + ".grad"]
        error = np.abs(got - want)
        worst = max(worst, float(error.max()))
        if not np.allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE):
            index = np.unravel_index(np.argmax(error), error.shape)
            return "%s.grad%s = %.9g, torch.autograd gives %.9g" % (
                name, list(index), got[index], want[index])
    return "ok (torch.autograd, max abs diff %.2g)" % worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kilnc")
    parser.add_argument("kiln_run")
    parser.add_argument("work")
    parser.add_argument("--only")
    args = parser.parse_args()
    failures = checked = 0
    for spec in cases():
        if args.only and spec["name"] != args.only:
            continue
        result = check(spec, args.kilnc, args.kiln_run, args.work)
        print("%-28s %s" % (spec["name"], result))
        failures += not result.startswith("ok")
        checked += 1
    print("%d cases checked, %d failed" % (checked, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
