"""ONNX models with ai.onnx.preview.training operators and TrainingInfoProto,
for the importer's lit tests, and the end-to-end training check.

    training_models.py model NAME OUTPUT.onnx
        writes the model NAME (--list prints the names)
    training_models.py prepare OPTIMIZER DIR
        writes DIR/model.onnx (a linear model, an MSE loss, Gradient and
        OPTIMIZER in training_info), DIR/train.npz (3 batches of 4) and the
        reference: DIR/expected-losses.txt and DIR/expected.npz, the losses
        and the final parameters and state after 3 steps, computed with
        NumPy and the update rules of ONNX's own backend test generators
    training_models.py check DIR KILN_RUN_OUTPUT.txt SAVED.safetensors
        compares the losses kiln-run printed and the parameters it saved
    training_models.py scalar float|bool VALUE OUTPUT.npy
        writes a rank-0 array (for --bind-input)
"""
import os
import sys

import numpy as np

from kiln_test_io import read_safetensors, save_npz
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
TRAINING = "ai.onnx.preview.training"
BATCH, FEATURES, OUTPUTS, STEPS = 4, 3, 2, 3

MODELS = {}


def artefact(name):
    def register(builder):
        MODELS[name] = builder
        return builder
    return register


def value(name, shape, elem_type=FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def node(op_type, inputs, outputs, name=None, training=False, **attrs):
    return helper.make_node(op_type, inputs, outputs, name=name or outputs[0],
                            domain=TRAINING if training else "", **attrs)


def model(graph, training_opset=1, default_opset=17, infos=()):
    opsets = []
    if default_opset:
        opsets.append(helper.make_opsetid("", default_opset))
    if training_opset:
        opsets.append(helper.make_opsetid(TRAINING, training_opset))
    result = helper.make_model(graph, opset_imports=opsets,
                               producer_name="kiln-tests")
    result.ir_version = 8
    for info in infos:
        result.training_info.add().CopyFrom(info)
    return result


def graph(nodes, inputs, outputs, initializers=(), name="kiln_test"):
    return helper.make_graph(nodes, name, inputs, outputs,
                             initializer=list(initializers))


#===-----------------------------------------------------------------------===#
# Optimizer and Gradient nodes.
#===-----------------------------------------------------------------------===#

def optimizer_model(op_type, groups, **attrs):
    """One optimizer node over two tensors X1 [2], X2 [2, 3]; `groups` names
    the input groups after X (G, V, H)."""
    shapes = {"1": [2], "2": [2, 3]}
    names = ["X"] + groups
    inputs = ["R", "T"] + [g + i for g in names for i in "12"]
    out_groups = ["X"] + groups[1:]
    outputs = [g + i + "_new" for g in out_groups for i in "12"]
    infos = [value("R", []), value("T", [], INT64)]
    infos += [value(g + i, shapes[i]) for g in names for i in "12"]
    return model(graph(
        [node(op_type, inputs, outputs, name="step", training=True, **attrs)],
        infos, [value(o, shapes[o[-5]]) for o in outputs]),
        default_opset=0)


@artefact("adam")
def adam():
    return optimizer_model("Adam", ["G", "V", "H"], alpha=0.8, beta=0.95,
                           epsilon=1e-4, norm_coefficient=0.01,
                           norm_coefficient_post=0.1)


@artefact("adam-defaults")
def adam_defaults():
    return optimizer_model("Adam", ["G", "V", "H"])


@artefact("adagrad")
def adagrad():
    return optimizer_model("Adagrad", ["G", "H"], decay_factor=0.5,
                           epsilon=1e-3, norm_coefficient=0.01)


@artefact("momentum")
def momentum():
    return optimizer_model("Momentum", ["G", "V"], alpha=0.9, beta=0.5,
                           mode="standard", norm_coefficient=0.0)


@artefact("nesterov")
def nesterov():
    return optimizer_model("Momentum", ["G", "V"], alpha=0.9, beta=1.0,
                           mode="nesterov", norm_coefficient=0.01)


@artefact("gradient")
def gradient():
    # y = sum(tanh(x @ w) * z); dy/dx and dy/dw, z held constant. The
    # Gradient node also asks for x2, which y does not depend on.
    return model(graph(
        [node("MatMul", ["x", "w"], ["h"]),
         node("Tanh", ["h"], ["t"]),
         node("Mul", ["t", "z"], ["p"]),
         node("ReduceSum", ["p"], ["y"], keepdims=0),
         node("Gradient", ["x", "w", "x2", "z"], ["dx", "dw", "dx2"],
              name="grad", training=True, xs=["x", "w", "x2"], zs=["z"],
              y="y")],
        [value("x", [2, 3]), value("z", [2, 4]), value("x2", [5])],
        [value("y", []), value("dx", [2, 3]), value("dw", [3, 4]),
         value("dx2", [5])],
        [tensor("w", np.arange(12, dtype=np.float32).reshape(3, 4) / 10)]))


@artefact("dropout-training-inputs")
def dropout_training_inputs():
    # As the ONNX backend tests have it: ratio and training_mode are graph
    # inputs, which kilnc needs bound (--bind-input).
    return model(graph(
        [node("Dropout", ["x", "r", "t"], ["y", "mask"], name="drop", seed=0)],
        [value("x", [3, 4]), value("r", []), value("t", [], TensorProto.BOOL)],
        [value("y", [3, 4]), value("mask", [3, 4], TensorProto.BOOL)]),
        training_opset=0, default_opset=13)


def save_scalar(path, array):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.asarray(array))


#===-----------------------------------------------------------------------===#
# Errors.
#===-----------------------------------------------------------------------===#

def single(op_type, inputs, outputs, input_infos, output_infos, **attrs):
    return model(graph([node(op_type, inputs, outputs, name="bad",
                             training=True, **attrs)],
                       input_infos, output_infos), default_opset=0)


@artefact("adam-odd-inputs")
def adam_odd_inputs():
    return single("Adam", ["R", "T", "X", "G", "V"], ["X_new", "V_new"],
                  [value("R", []), value("T", [], INT64)] +
                  [value(n, [2]) for n in "XGV"],
                  [value("X_new", [2]), value("V_new", [2])])


@artefact("adagrad-float-count")
def adagrad_float_count():
    return single("Adagrad", ["R", "T", "X", "G", "H"], ["X_new", "H_new"],
                  [value("R", []), value("T", [])] +
                  [value(n, [2]) for n in "XGH"],
                  [value("X_new", [2]), value("H_new", [2])])


@artefact("momentum-bad-mode")
def momentum_bad_mode():
    return single("Momentum", ["R", "T", "X", "G", "V"], ["X_new", "V_new"],
                  [value("R", []), value("T", [], INT64)] +
                  [value(n, [2]) for n in "XGV"],
                  [value("X_new", [2]), value("V_new", [2])],
                  alpha=0.9, beta=1.0, mode="heavy-ball", norm_coefficient=0.0)


@artefact("momentum-no-alpha")
def momentum_no_alpha():
    return single("Momentum", ["R", "T", "X", "G", "V"], ["X_new", "V_new"],
                  [value("R", []), value("T", [], INT64)] +
                  [value(n, [2]) for n in "XGV"],
                  [value("X_new", [2]), value("V_new", [2])],
                  beta=1.0, mode="standard", norm_coefficient=0.0)


@artefact("momentum-shape-mismatch")
def momentum_shape_mismatch():
    return single("Momentum", ["R", "T", "X", "G", "V"], ["X_new", "V_new"],
                  [value("R", []), value("T", [], INT64), value("X", [2]),
                   value("G", [3]), value("V", [2])],
                  [value("X_new", [2]), value("V_new", [2])],
                  alpha=0.9, beta=1.0, mode="standard", norm_coefficient=0.0)


@artefact("training-domain-missing")
def training_domain_missing():
    result = momentum()
    del result.opset_import[:]
    result.opset_import.append(helper.make_opsetid("", 17))
    return result


@artefact("gradient-no-rule")
def gradient_no_rule():
    # Floor has no derivative rule in Kiln.
    return model(graph(
        [node("Floor", ["x"], ["f"], name="floor"),
         node("Mul", ["f", "x"], ["y"]),
         node("Gradient", ["x"], ["dx"], name="grad", training=True,
              xs=["x"], y="y")],
        [value("x", [3])], [value("dx", [3])]))


@artefact("gradient-other-input")
def gradient_other_input():
    return model(graph(
        [node("Mul", ["x", "x"], ["y"]),
         node("Gradient", ["x1"], ["dx"], name="grad", training=True,
              xs=["x"], y="y")],
        [value("x", [3]), value("x1", [3])], [value("dx", [3])]))


@artefact("gradient-unknown-y")
def gradient_unknown_y():
    return model(graph(
        [node("Gradient", ["x"], ["dx"], name="grad", training=True,
              xs=["x"], y="later"),
         node("Mul", ["x", "x"], ["later"])],
        [value("x", [3])], [value("dx", [3])]))


#===-----------------------------------------------------------------------===#
# TrainingInfoProto.
#===-----------------------------------------------------------------------===#

def initial_parameters():
    generator = np.random.default_rng(3)
    return {
        "W": generator.standard_normal((FEATURES, OUTPUTS)).astype(np.float32),
        "B": generator.standard_normal(OUTPUTS).astype(np.float32),
        # The initialization graph replaces W's initializer with this.
        "W0": (generator.standard_normal((FEATURES, OUTPUTS)) / 2
               ).astype(np.float32),
    }


OPTIMIZERS = {
    # name: (op_type, state groups, attributes, learning rate)
    "momentum": ("Momentum", ["V"], dict(alpha=0.9, beta=0.5, mode="standard",
                                         norm_coefficient=0.01), 0.1),
    "nesterov": ("Momentum", ["V"], dict(alpha=0.8, beta=1.0, mode="nesterov",
                                         norm_coefficient=0.0), 0.1),
    "adam": ("Adam", ["V", "H"], dict(alpha=0.9, beta=0.99, epsilon=1e-3,
                                      norm_coefficient=0.01,
                                      norm_coefficient_post=0.02), 0.05),
    "adagrad": ("Adagrad", ["H"], dict(decay_factor=0.1, epsilon=1e-5,
                                       norm_coefficient=0.0), 0.2),
}


def linear_training_model(optimizer="momentum", initialization=True):
    """A linear model (forward: Yp = X @ W + B) whose training_info
    algorithm computes an MSE loss against Y, its Gradient with respect to W
    and B, one `optimizer` step, and T + 1; update_binding assigns the new
    W, B, optimizer state and T."""
    op_type, groups, attrs, rate = OPTIMIZERS[optimizer]
    params = initial_parameters()
    forward = graph(
        [node("MatMul", ["X", "W"], ["XW"]), node("Add", ["XW", "B"], ["Yp"])],
        [value("X", [BATCH, FEATURES])], [value("Yp", [BATCH, OUTPUTS])],
        [tensor("W", params["W"]), tensor("B", params["B"])], name="linear")
    state = [tensor(g + p, np.zeros_like(params[p]) if g == "V" else
                    np.full_like(params[p], 0.1))
             for g in groups for p in "WB"]
    new_state = [g + p + "_new" for g in groups for p in "WB"]
    algorithm = graph(
        [node("Sub", ["Yp", "Y"], ["D"]), node("Mul", ["D", "D"], ["D2"]),
         node("ReduceMean", ["D2"], ["loss"], keepdims=0),
         node("Gradient", ["W", "B"], ["dW", "dB"], name="grad",
              training=True, xs=["W", "B"], y="loss"),
         node(op_type, ["R", "T", "W", "B", "dW", "dB"] +
              [g + p for g in groups for p in "WB"],
              ["W_new", "B_new"] + new_state, name="update", training=True,
              **attrs),
         node("Constant", [], ["one"], value=tensor("one", np.int64(1))),
         node("Add", ["T", "one"], ["T_new"])],
        [value("Y", [BATCH, OUTPUTS])],
        [value("loss", []), value("W_new", [FEATURES, OUTPUTS]),
         value("B_new", [OUTPUTS])] +
        [value(n, [FEATURES, OUTPUTS] if n[1] == "W" else [OUTPUTS])
         for n in new_state] + [value("T_new", [], INT64)],
        [tensor("R", np.float32(rate)), tensor("T", np.int64(0))] + state,
        name="algorithm")
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algorithm)
    for key in ["W", "B"] + [g + p for g in groups for p in "WB"] + ["T"]:
        binding = info.update_binding.add()
        binding.key, binding.value = key, key + "_new"
    if initialization:
        info.initialization.CopyFrom(graph(
            [node("Constant", [], ["W_init"],
                  value=tensor("W_init", params["W0"]))],
            [], [value("W_init", [FEATURES, OUTPUTS])], name="initialization"))
        binding = info.initialization_binding.add()
        binding.key, binding.value = "W", "W_init"
    return model(forward, infos=[info])


@artefact("training-info")
def training_info():
    return linear_training_model("momentum")


@artefact("training-info-shared-values")
def training_info_shared_values():
    # update_binding may name an inference graph output (W <- halfW) and
    # one value for two initializers (B and VB <- B_new).
    result = linear_training_model("momentum", initialization=False)
    forward = result.graph
    forward.node.extend([
        node("Constant", [], ["half"], value=tensor("half", np.float32(0.5))),
        node("Mul", ["W", "half"], ["halfW"])])
    forward.output.append(value("halfW", [FEATURES, OUTPUTS]))
    for binding in result.training_info[0].update_binding:
        binding.value = {"W": "halfW", "VB": "B_new"}.get(binding.key,
                                                          binding.value)
    return result


@artefact("training-info-two")
def training_info_two():
    result = linear_training_model("momentum", initialization=False)
    result.training_info.add().CopyFrom(result.training_info[0])
    return result


@artefact("training-info-empty")
def training_info_empty():
    result = linear_training_model("momentum", initialization=False)
    result.training_info[0].Clear()
    return result


@artefact("training-info-random-init")
def training_info_random_init():
    result = linear_training_model("momentum", initialization=False)
    info = result.training_info[0]
    info.initialization.CopyFrom(graph(
        [node("RandomNormal", [], ["W_init"], name="random",
              shape=[FEATURES, OUTPUTS])],
        [], [value("W_init", [FEATURES, OUTPUTS])], name="initialization"))
    binding = info.initialization_binding.add()
    binding.key, binding.value = "W", "W_init"
    return result


@artefact("training-info-computed-init")
def training_info_computed_init():
    # A product of two constants: Kiln does not evaluate it at import.
    result = linear_training_model("momentum", initialization=False)
    info = result.training_info[0]
    info.initialization.CopyFrom(graph(
        [node("MatMul", ["a", "b"], ["W_init"], name="product")],
        [], [value("W_init", [FEATURES, OUTPUTS])],
        [tensor("a", np.ones((FEATURES, 1), np.float32)),
         tensor("b", np.ones((1, OUTPUTS), np.float32))],
        name="initialization"))
    binding = info.initialization_binding.add()
    binding.key, binding.value = "W", "W_init"
    return result


@artefact("training-info-init-input")
def training_info_init_input():
    result = training_info_computed_init()
    result.training_info[0].initialization.input.append(
        value("seed", [FEATURES, OUTPUTS]))
    return result


@artefact("training-info-not-initializer")
def training_info_not_initializer():
    result = linear_training_model("momentum", initialization=False)
    binding = result.training_info[0].update_binding.add()
    binding.key, binding.value = "X", "W_new"
    return result


@artefact("training-info-not-output")
def training_info_not_output():
    result = linear_training_model("momentum", initialization=False)
    result.training_info[0].update_binding[0].value = "dW"
    return result


@artefact("training-info-wrong-type")
def training_info_wrong_type():
    result = linear_training_model("momentum", initialization=False)
    result.training_info[0].update_binding[0].value = "B_new"
    return result


#===-----------------------------------------------------------------------===#
# End-to-end: the NumPy reference of the training algorithm.
#===-----------------------------------------------------------------------===#

def reference_step(optimizer, r, t, params, state, grads):
    """One update with the rules of ONNX's backend test generators."""
    from onnx.backend.test.case.node.adagrad import apply_adagrad
    from onnx.backend.test.case.node.adam import apply_adam
    from onnx.backend.test.case.node.momentum import (apply_momentum,
                                                      apply_nesterov)
    op_type, groups, attrs, _ = OPTIMIZERS[optimizer]
    norm = attrs["norm_coefficient"]
    for p in "WB":
        x, g = params[p], grads[p]
        if optimizer in ("momentum", "nesterov"):
            rule = apply_momentum if optimizer == "momentum" else apply_nesterov
            params[p], state["V" + p] = rule(r, t, x, g, state["V" + p], norm,
                                             attrs["alpha"], attrs["beta"])
        elif optimizer == "adam":
            params[p], state["V" + p], state["H" + p] = apply_adam(
                r, t, x, g, state["V" + p], state["H" + p], norm,
                attrs["norm_coefficient_post"], attrs["alpha"], attrs["beta"],
                attrs["epsilon"])
        else:
            params[p], state["H" + p] = apply_adagrad(
                r, t, x, g, state["H" + p], norm, attrs["epsilon"],
                attrs["decay_factor"])


def prepare(optimizer, directory):
    onnx.save(linear_training_model(optimizer),
              os.path.join(directory, "model.onnx"))
    generator = np.random.default_rng(5)
    samples = BATCH * STEPS
    x = generator.standard_normal((samples, FEATURES)).astype(np.float32)
    y = generator.standard_normal((samples, OUTPUTS)).astype(np.float32)
    save_npz(os.path.join(directory, "train.npz"), {"X": x, "Y": y})

    _, groups, _, rate = OPTIMIZERS[optimizer]
    initial = initial_parameters()
    params = {"W": initial["W0"].astype(np.float64),
              "B": initial["B"].astype(np.float64)}
    state = {g + p: (np.zeros_like(params[p]) if g == "V" else
                     np.full_like(params[p], 0.1))
             for g in groups for p in "WB"}
    losses = []
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        xb, yb = x[rows].astype(np.float64), y[rows].astype(np.float64)
        diff = xb @ params["W"] + params["B"] - yb
        losses.append(np.mean(diff * diff))
        upstream = 2 * diff / diff.size
        grads = {"W": xb.T @ upstream, "B": upstream.sum(axis=0)}
        reference_step(optimizer, np.float64(rate), np.int64(step), params,
                       state, grads)
    with open(os.path.join(directory, "expected-losses.txt"), "w") as f:
        f.write("\n".join("%.9g" % l for l in losses) + "\n")
    expected = dict(params, **state)
    expected["T"] = np.int64(STEPS)
    save_npz(os.path.join(directory, "expected.npz"), expected)


def check(directory, run_output, saved):
    import re
    with open(os.path.join(directory, "expected-losses.txt")) as f:
        expected_losses = [float(l) for l in f if l.strip()]
    with open(run_output) as f:
        losses = [float(m.group(1)) for m in
                  re.finditer(r"loss (\S+)", f.read())]
    failures = []
    if len(losses) != len(expected_losses):
        failures.append("%d losses printed, expected %d" %
                        (len(losses), len(expected_losses)))
    elif not np.allclose(losses, expected_losses, rtol=1e-4, atol=1e-6):
        failures.append("losses %s, expected %s" % (losses, expected_losses))
    actual = read_safetensors(saved)
    with np.load(os.path.join(directory, "expected.npz")) as archive:
        for name in archive.files:
            want = archive[name]
            got = actual.get(name)
            if got is None:
                failures.append("%s: not saved" % name)
            elif got.shape != want.shape:
                failures.append("%s: shape %s, expected %s" %
                                (name, got.shape, want.shape))
            elif not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                failures.append("%s: %s, expected %s" % (name, got, want))
    for failure in failures:
        print("FAIL: " + failure)
    if not failures:
        print("OK: %d losses, %d tensors" % (len(losses), len(archive.files)))
    return 1 if failures else 0


def main(argv):
    if argv[1:2] == ["--list"]:
        print("\n".join(sorted(MODELS)))
        return 0
    if len(argv) == 4 and argv[1] == "model" and argv[2] in MODELS:
        onnx.save(MODELS[argv[2]](), argv[3])
        return 0
    if len(argv) == 5 and argv[1] == "scalar":
        dtype = {"float": np.float32, "bool": np.bool_}[argv[2]]
        save_scalar(argv[4], dtype(float(argv[3])))
        return 0
    if len(argv) == 4 and argv[1] == "prepare" and argv[2] in OPTIMIZERS:
        prepare(argv[2], argv[3])
        return 0
    if len(argv) == 5 and argv[1] == "check":
        return check(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
