"""Builds the small ONNX models (and input files) of the importer's lit tests.

    %python -m kiln_onnx_models NAME OUTPUT

writes the artefact NAME to OUTPUT: an ONNX model made with onnx.helper or
exported from PyTorch, a broken file for the error tests, or a tensor file for
--bind-input. Everything is tiny and deterministic (fixed seeds), so a test
can check exact shapes, names and small values. `--list` prints the names.

The PyTorch models are also there in eval mode, with inputs, for the
end-to-end tests (test/e2e/compare_model.py) and the benchmark
(bench/forward_latency.py): eval_model, run_eval, export_eval.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64

# name -> (builder, whether it is a valid ONNX model onnx.checker accepts).
# A builder returns a ModelProto, or writes OUTPUT itself and returns None.
ARTEFACTS = {}


def artefact(name, valid=True):
    def register(builder):
        ARTEFACTS[name] = (builder, valid)
        return builder
    return register


def rng():
    return np.random.default_rng(0)


def value(name, shape, elem_type=FLOAT):
    """A graph input or output; strings in `shape` are symbolic dims, None
    an unnamed one."""
    return helper.make_tensor_value_info(name, elem_type, shape)


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def ints(name, values):
    return tensor(name, np.array(values, dtype=np.int64))


def floats(name, shape, generator=None):
    generator = generator or rng()
    return tensor(name, generator.standard_normal(shape).astype(np.float32))


def model(nodes, inputs, outputs, initializers=(), opset=17, domains=()):
    graph = helper.make_graph(nodes, "kiln_test", inputs, outputs,
                              initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(domain, 1) for domain in domains]
    result = helper.make_model(graph, opset_imports=opsets,
                               producer_name="kiln-tests")
    result.ir_version = 8
    return result


def node(op_type, inputs, outputs, name=None, **attrs):
    return helper.make_node(op_type, inputs, outputs,
                            name=name or outputs[0], **attrs)


#===-----------------------------------------------------------------------===#
# Elementwise ops, matmul, convolution, pooling.
#===-----------------------------------------------------------------------===#

@artefact("elementwise-broadcast")
def elementwise_broadcast():
    # a[2,1,4] + b[3,1] broadcasts both to [2,3,4]; * c[2,3,4] needs nothing;
    # - s[] broadcasts the rank-0 constant.
    return model(
        [node("Add", ["a", "b"], ["sum"]),
         node("Mul", ["sum", "c"], ["product"]),
         node("Constant", [], ["s"], value=tensor("s", np.float32(2.0))),
         node("Sub", ["product", "s"], ["y"])],
        [value("a", [2, 1, 4]), value("b", [3, 1]), value("c", [2, 3, 4])],
        [value("y", [2, 3, 4])])


@artefact("gemm")
def gemm():
    # Y = 0.5 * A^T B^T + 2 * C with A [K=3, M=2], B [N=4, K=3], C [N].
    return model(
        [node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5,
              beta=2.0)],
        [value("a", [3, 2]), value("b", [4, 3]), value("c", [4])],
        [value("y", [2, 4])])


@artefact("gemm-default")
def gemm_default():
    # alpha = beta = 1 and C already [M, N]: a matmul and an add, nothing else.
    return model(
        [node("Gemm", ["a", "b", "c"], ["y"])],
        [value("a", [2, 3]), value("b", [3, 4]), value("c", [2, 4])],
        [value("y", [2, 4])])


@artefact("matmul")
def matmul():
    return model(
        [node("MatMul", ["v3", "m34"], ["vec_mat"]),
         node("MatMul", ["m43", "v3"], ["mat_vec"]),
         node("MatMul", ["v3", "v3"], ["dot"]),
         node("MatMul", ["batched", "stacked"], ["broadcast"])],
        [value("v3", [3]), value("m34", [3, 4]), value("m43", [4, 3]),
         value("batched", [2, 1, 3, 4]), value("stacked", [5, 4, 6])],
        [value("vec_mat", [4]), value("mat_vec", [4]), value("dot", []),
         value("broadcast", [2, 5, 3, 6])])


@artefact("conv-same")
def conv_same():
    # 5x5 input, 2x2 kernel, stride 2: 3x3 output needs one row and column of
    # padding, at the end for SAME_UPPER and at the start for SAME_LOWER.
    generator = rng()
    return model(
        [node("Conv", ["x", "w", "b"], ["upper"], auto_pad="SAME_UPPER",
              strides=[2, 2]),
         node("Conv", ["x", "w"], ["lower"], auto_pad="SAME_LOWER",
              strides=[2, 2])],
        [value("x", [1, 2, 5, 5])],
        [value("upper", [1, 3, 3, 3]), value("lower", [1, 3, 3, 3])],
        [floats("w", [3, 2, 2, 2], generator), floats("b", [3], generator)])


@artefact("pool-ceil")
def pool_ceil():
    # 5x5 input, 2x2 windows every 2: 3x3 with ceil_mode (2x2 without).
    return model(
        [node("MaxPool", ["x"], ["max"], kernel_shape=[2, 2], strides=[2, 2],
              ceil_mode=1),
         node("MaxPool", ["x"], ["max_floor"], kernel_shape=[2, 2],
              strides=[2, 2]),
         node("AveragePool", ["x"], ["avg"], kernel_shape=[3, 3],
              strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
              count_include_pad=1)],
        [value("x", [1, 1, 5, 5])],
        [value("max", [1, 1, 3, 3]), value("max_floor", [1, 1, 2, 2]),
         value("avg", [1, 1, 3, 3])])


#===-----------------------------------------------------------------------===#
# Shape and data-movement ops.
#===-----------------------------------------------------------------------===#

@artefact("reshape")
def reshape():
    # [2,3,4] with [0,-1] is [2,12]; with [-1,0,2] it is [4,3,2].
    return model(
        [node("Reshape", ["x", "copy_infer"], ["flat"]),
         node("Reshape", ["x", "infer_copy"], ["folded"])],
        [value("x", [2, 3, 4])],
        [value("flat", [2, 12]), value("folded", [4, 3, 2])],
        [ints("copy_infer", [0, -1]), ints("infer_copy", [-1, 0, 2])])


@artefact("slice-negative-steps")
def slice_negative_steps():
    # numpy: x[::-1, 4:0:-2] of a [5,6] array takes rows 4,3,2,1,0 and
    # columns 4,2.
    int64_min = np.iinfo(np.int64).min
    return model(
        [node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
        [value("x", [5, 6])],
        [value("y", [5, 2])],
        [ints("starts", [-1, 4]), ints("ends", [int64_min, 0]),
         ints("axes", [0, 1]), ints("steps", [-1, -2])])


@artefact("split-opset11")
def split_opset11():
    return model(
        [node("Split", ["x"], ["a", "b"], axis=1, split=[2, 4])],
        [value("x", [3, 6])], [value("a", [3, 2]), value("b", [3, 4])],
        opset=11)


@artefact("split-opset13")
def split_opset13():
    return model(
        [node("Split", ["x", "sizes"], ["a", "b"], axis=1),
         node("Split", ["x"], ["c", "d", "e"], axis=-1, name="even")],
        [value("x", [3, 6])],
        [value("a", [3, 2]), value("b", [3, 4]), value("c", [3, 2]),
         value("d", [3, 2]), value("e", [3, 2])],
        [ints("sizes", [2, 4])])


def squeeze_unsqueeze(opset):
    # x [3,1,4,1]: squeeze axis 1 gives [3,4,1]; unsqueeze axes 0 and -1 of
    # that gives [1,3,4,1,1].
    if opset < 13:
        nodes = [node("Squeeze", ["x"], ["squeezed"], axes=[1]),
                 node("Unsqueeze", ["squeezed"], ["y"], axes=[0, -1])]
        initializers = []
    else:
        nodes = [node("Squeeze", ["x", "squeeze_axes"], ["squeezed"]),
                 node("Unsqueeze", ["squeezed", "unsqueeze_axes"], ["y"])]
        initializers = [ints("squeeze_axes", [1]),
                        ints("unsqueeze_axes", [0, -1])]
    return model(nodes, [value("x", [3, 1, 4, 1])],
                 [value("squeezed", [3, 4, 1]), value("y", [1, 3, 4, 1, 1])],
                 initializers, opset=opset)


@artefact("squeeze-opset11")
def squeeze_opset11():
    return squeeze_unsqueeze(11)


@artefact("squeeze-opset13")
def squeeze_opset13():
    return squeeze_unsqueeze(13)


@artefact("shape-folding")
def shape_folding():
    # What exporters with dynamic axes emit for x.view(x.size(0), -1), with
    # the second dim computed as size(1) * size(2) through Cast and Mul:
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    return model(
        [node("Shape", ["x"], ["shape"]),
         node("Gather", ["shape", "zero"], ["batch"], axis=0),
         node("Gather", ["shape", "one"], ["rows"], axis=0),
         node("Gather", ["shape", "two"], ["cols"], axis=0),
         node("Cast", ["rows"], ["rows_f"], to=FLOAT),
         node("Cast", ["rows_f"], ["rows_i"], to=INT64),
         node("Mul", ["rows_i", "cols"], ["features"]),
         node("Unsqueeze", ["batch", "axes"], ["batch_1"]),
         node("Unsqueeze", ["features", "axes"], ["features_1"]),
         node("Concat", ["batch_1", "features_1"], ["target"], axis=0),
         node("Reshape", ["x", "target"], ["y"])],
        [value("x", ["batch", 3, 4])], [value("y", ["batch", 12])],
        [ints("zero", 0), ints("one", 1), ints("two", 2), ints("axes", [0])])


@artefact("einsum")
def einsum():
    return model(
        [node("Einsum", ["a", "b"], ["bmm"], equation="bij,bjk->bik"),
         node("Einsum", ["m"], ["transposed"], equation="ij->ji")],
        [value("a", [2, 3, 4]), value("b", [2, 4, 5]), value("m", [3, 4])],
        [value("bmm", [2, 3, 5]), value("transposed", [4, 3])])


@artefact("einsum-implicit-uppercase")
def einsum_implicit_uppercase():
    # Implicit output: the letters used once, sorted: "Ik" (numpy.einsum
    # accepts upper case letters; ONNX documents lower case ones).
    return model([node("Einsum", ["a", "b"], ["y"], equation="Ij,jk")],
                 [value("a", [2, 3]), value("b", [3, 4])],
                 [value("y", [2, 4])])


#===-----------------------------------------------------------------------===#
# Reductions, normalisation, softmax, dropout and losses.
#===-----------------------------------------------------------------------===#

@artefact("reduce")
def reduce():
    # Opset 13: ReduceSum takes its axes as an input, ReduceMean still as an
    # attribute.
    return model(
        [node("ReduceSum", ["x", "axes"], ["sum"], keepdims=0),
         node("ReduceMean", ["x"], ["mean"], axes=[-1]),
         node("ReduceSum", ["x", "no_axes"], ["same"],
              noop_with_empty_axes=1)],
        [value("x", [2, 3, 4])],
        [value("sum", [2, 4]), value("mean", [2, 3, 1]),
         value("same", [2, 3, 4])],
        [ints("axes", [1]), ints("no_axes", np.zeros([0], np.int64))],
        opset=13)


@artefact("reduce-sum-opset11")
def reduce_sum_opset11():
    return model(
        [node("ReduceSum", ["x"], ["sum"], axes=[1], keepdims=0)],
        [value("x", [2, 3, 4])], [value("sum", [2, 4])], opset=11)


def softmax(opset):
    return model([node("Softmax", ["x"], ["y"], axis=1)],
                 [value("x", [2, 3, 4])], [value("y", [2, 3, 4])],
                 opset=opset)


@artefact("softmax-opset11")
def softmax_opset11():
    return softmax(11)


@artefact("softmax-opset13")
def softmax_opset13():
    return softmax(13)


@artefact("layer-norm")
def layer_norm():
    generator = rng()
    return model(
        [node("LayerNormalization", ["x", "gamma", "beta"], ["last"],
              epsilon=1e-3),
         node("LayerNormalization", ["x", "gamma2d"], ["trailing2"], axis=1)],
        [value("x", [2, 3, 4])],
        [value("last", [2, 3, 4]), value("trailing2", [2, 3, 4])],
        [floats("gamma", [4], generator), floats("beta", [4], generator),
         floats("gamma2d", [3, 4], generator)])


def dropout(training, seed=None):
    # ratio and training_mode as Constant nodes, as torch.onnx.export makes
    # them.
    attrs = {} if seed is None else {"seed": seed}
    return model(
        [node("Constant", [], ["ratio"],
              value=tensor("ratio", np.float32(0.25))),
         node("Constant", [], ["training_mode"],
              value=tensor("training_mode", np.bool_(training))),
         node("Dropout", ["x", "ratio", "training_mode"], ["y", "mask"],
              **attrs)],
        [value("x", [4, 8])],
        [value("y", [4, 8]), value("mask", [4, 8], TensorProto.BOOL)])


@artefact("dropout-training")
def dropout_training():
    return dropout(True, seed=7)


@artefact("dropout-inference")
def dropout_inference():
    return dropout(False)


@artefact("dropout-opset11")
def dropout_opset11():
    # Before opset 12 Dropout has no training mode: it is the identity.
    return model([node("Dropout", ["x"], ["y"], ratio=0.25)],
                 [value("x", [4, 8])], [value("y", [4, 8])], opset=11)


@artefact("dropout-unseeded")
def dropout_unseeded():
    # Two dropouts of one shape and no seed attribute: ONNX says a seed is
    # generated, so their masks must not be the same.
    return model(
        [node("Constant", [], ["ratio"],
              value=tensor("ratio", np.float32(0.5))),
         node("Constant", [], ["training_mode"],
              value=tensor("training_mode", np.bool_(True))),
         node("Dropout", ["x", "ratio", "training_mode"], ["h"]),
         node("Dropout", ["h", "ratio", "training_mode"], ["y"])],
        [value("x", [4, 8])], [value("y", [4, 8])])


@artefact("float-initializer-arguments")
def float_initializer_arguments():
    # Float scalars that must be constants (Dropout's ratio, Pad's value),
    # held in initializers as onnx-simplifier and ONNX Runtime's optimizer
    # store them.
    return model(
        [node("Dropout", ["x", "ratio", "training_mode"], ["y"]),
         node("Pad", ["x", "pads", "fill"], ["padded"])],
        [value("x", [4, 8])], [value("y", [4, 8]), value("padded", [6, 10])],
        [tensor("ratio", np.float32(0.25)),
         tensor("training_mode", np.bool_(True)),
         ints("pads", [1, 1, 1, 1]), tensor("fill", np.float32(1.5))])


@artefact("losses")
def losses():
    generator = rng()
    return model(
        [node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["ce"],
              ignore_index=-100),
         node("LogSoftmax", ["logits"], ["logp"], axis=1),
         node("NegativeLogLikelihoodLoss", ["logp", "labels", "class_weight"],
              ["nll"], reduction="sum")],
        [value("logits", [8, 10]), value("labels", [8], INT64)],
        [value("ce", []), value("nll", [])],
        [tensor("class_weight",
                generator.uniform(0.5, 1.5, [10]).astype(np.float32))])


#===-----------------------------------------------------------------------===#
# Initializers, external data, symbolic dims and bound inputs.
#===-----------------------------------------------------------------------===#

@artefact("initializers")
def initializers():
    # fc.weight (float) is used three times, fc.bias once; shape and rows
    # (int64) are constants, not parameters. big (20 floats) is there for
    # --elide-weights.
    weight = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
    return model(
        [node("MatMul", ["x", "fc.weight"], ["h"]),
         node("Add", ["h", "fc.bias"], ["z"]),
         node("Reshape", ["z", "shape"], ["y"]),
         node("MatMul", ["x", "fc.weight"], ["again"]),
         node("Gather", ["fc.weight", "rows"], ["picked"]),
         node("Mul", ["wide", "big"], ["scaled"])],
        [value("x", [4, 3]), value("wide", [20])],
        [value("y", [8]), value("again", [4, 2]), value("picked", [2, 2]),
         value("scaled", [20])],
        [tensor("fc.weight", weight),
         tensor("fc.bias", np.array([0.5, -0.5], np.float32)),
         ints("shape", [8]), ints("rows", [2, 0]),
         tensor("big", np.arange(20, dtype=np.float32))])


@artefact("external-data")
def external_data(path):
    # Every initializer in OUTPUT's directory, in weights.bin.
    weight = np.arange(12, dtype=np.float32).reshape(4, 3) / 8
    bias = np.array([1.0, 2.0, 3.0], np.float32)
    result = model(
        [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["y"])],
        [value("x", [2, 4])], [value("y", [2, 3])],
        [tensor("w", weight), tensor("b", bias)])
    onnx.checker.check_model(result)
    onnx.save_model(result, path, save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)


@artefact("external-data-large")
def external_data_large(path):
    # external-data's model with its weights past 2 GiB and 4 GiB into a
    # data file of over 4 GiB, as an export of a model over 2 GB places
    # them (64-bit offsets). The file is sparse: the gap takes no disk.
    weight = np.arange(12, dtype=np.float32).reshape(4, 3) / 8
    bias = np.array([1.0, 2.0, 3.0], np.float32)
    at = {"w": 2**31 + 64, "b": 2**32 + 128}
    with open(os.path.join(os.path.dirname(path), "weights.bin"), "wb") as f:
        for name, array in (("w", weight), ("b", bias)):
            f.seek(at[name])
            f.write(array.tobytes())
    initializers = []
    for name, array in (("w", weight), ("b", bias)):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT,
                        dims=array.shape)
        for key, entry in (("location", "weights.bin"),
                           ("offset", str(at[name])),
                           ("length", str(array.nbytes))):
            t.external_data.add(key=key, value=entry)
        t.data_location = TensorProto.EXTERNAL
        initializers.append(t)
    result = model(
        [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["y"])],
        [value("x", [2, 4])], [value("y", [2, 3])], initializers)
    onnx.save_model(result, path)


@artefact("symbolic-dims")
def symbolic_dims():
    # tokens [batch, seq] and mask [batch, seq]; scale [None, 4] has an
    # unnamed leading dim that only --batch-size binds.
    return model(
        [node("Mul", ["tokens", "mask"], ["masked"]),
         node("Relu", ["scale"], ["scale_out"])],
        [value("tokens", ["batch", "seq"]), value("mask", ["batch", "seq"]),
         value("scale", [None, 4])],
        [value("masked", ["batch", "seq"]), value("scale_out", [None, 4])])


@artefact("bind-input")
def bind_input():
    # The Reshape's shape is a graph input: only --bind-input makes it known.
    return model(
        [node("Reshape", ["x", "shape"], ["y"])],
        [value("x", [2, 6]), value("shape", [3], INT64)],
        [value("y", [3, 2, 2])])


@artefact("bind-input-npy", valid=False)
def bind_input_npy(path):
    with open(path, "wb") as f:
        np.save(f, np.array([3, 2, 2], np.int64))


@artefact("bind-input-pb", valid=False)
def bind_input_pb(path):
    with open(path, "wb") as f:
        f.write(ints("shape", [3, 2, 2]).SerializeToString())


#===-----------------------------------------------------------------------===#
# Models and files the importer must refuse.
#===-----------------------------------------------------------------------===#

@artefact("unsupported-op", valid=False)
def unsupported_op():
    return model([node("Relu", ["x"], ["h"]),
                  node("FrobnicateTensor", ["h"], ["y"], name="mystery")],
                 [value("x", [2, 3])], [value("y", [2, 3])])


@artefact("nonzero")
def nonzero():
    # NonZero's result shape depends on the data: not static.
    return model([node("NonZero", ["x"], ["y"], name="where_nonzero")],
                 [value("x", [2, 3])], [value("y", [2, None], INT64)])


@artefact("lstm-reverse-ragged")
def lstm_reverse_ragged():
    # Reverse-direction LSTM whose batch elements have different lengths:
    # not unrolled yet.
    r = rng()
    return model(
        [node("LSTM", ["x", "w", "r", "", "lengths"], ["y"], name="lstm",
              hidden_size=3, direction="reverse")],
        [value("x", [4, 2, 2])], [value("y", [4, 1, 2, 3])],
        [tensor("w", r.standard_normal((1, 12, 2)).astype(np.float32)),
         tensor("r", r.standard_normal((1, 12, 3)).astype(np.float32)),
         tensor("lengths", np.array([4, 2], np.int32))])


@artefact("compress-dynamic")
def compress_dynamic():
    # Compress whose condition is a graph input: the result's shape would
    # depend on its values.
    return model([node("Compress", ["x", "keep"], ["y"], name="select_rows",
                       axis=0)],
                 [value("x", [3, 2]), value("keep", [3], TensorProto.BOOL)],
                 [value("y", [None, 2])])


@artefact("matmul-mismatch")
def matmul_mismatch():
    # Inner dims 3 and 4 differ; the checker does not look at shapes.
    return model([node("MatMul", ["a", "b"], ["y"], name="bad_matmul")],
                 [value("a", [2, 3]), value("b", [4, 5])],
                 [value("y", [2, 5])])


@artefact("unnamed-node", valid=False)
def unnamed_node():
    # Without a node name, errors name the node by its first output.
    return model([helper.make_node("FrobnicateTensor", ["x"], ["frobbed"])],
                 [value("x", [2])], [value("frobbed", [2])])


def range_of(limit):
    # A Range whose start, limit and delta are constant initializers.
    return model([node("Range", ["start", "limit", "delta"], ["y"],
                       name="huge_range")],
                 [], [value("y", [None])],
                 [tensor("start", np.array(0.0, np.float32)),
                  tensor("limit", np.array(limit, np.float32)),
                  tensor("delta", np.array(1.0, np.float32))])


@artefact("range-too-long")
def range_too_long():
    return range_of(1e30)


@artefact("range-not-finite")
def range_not_finite():
    return range_of(np.inf)


@artefact("resize-too-large")
def resize_too_large():
    # Scales whose product with a dimension no dimension holds.
    return model([node("Resize", ["x", "", "scales"], ["y"],
                       name="huge_resize", mode="nearest")],
                 [value("x", [1, 1, 2, 2])],
                 [value("y", [1, 1, None, 2])],
                 [tensor("scales",
                         np.array([1.0, 1.0, 1e30, 1.0], np.float32))])


@artefact("custom-domain")
def custom_domain():
    return model([node("FusedGelu", ["x"], ["y"], name="fused",
                       domain="com.example")],
                 [value("x", [2])], [value("y", [2])],
                 domains=["com.example"])


@artefact("string-input")
def string_input():
    return model([node("Identity", ["x"], ["y"])],
                 [value("x", [4], TensorProto.STRING)],
                 [value("y", [4], TensorProto.STRING)])


@artefact("complex-initializer")
def complex_initializer():
    return model([node("Cast", ["lut"], ["y"], to=FLOAT)], [],
                 [value("y", [4])],
                 [tensor("lut", np.arange(4).astype(np.complex64))])


@artefact("unbound-dim")
def unbound_dim():
    return model([node("Relu", ["x"], ["y"])],
                 [value("x", [2, "seq"])], [value("y", [2, "seq"])])


@artefact("training-info")
def training_info():
    result = model([node("Relu", ["x"], ["y"])], [value("x", [2])],
                   [value("y", [2])], [tensor("w", np.ones(2, np.float32))])
    step = helper.make_graph(
        [node("Mul", ["w", "w"], ["w_next"])], "step", [],
        [value("w_next", [2])])
    info = result.training_info.add()
    info.algorithm.CopyFrom(step)
    binding = info.update_binding.add()
    binding.key, binding.value = "w", "w_next"
    return result


@artefact("concat-missing-input", valid=False)
def concat_missing_input():
    # Concat's inputs are not optional: an empty name is malformed.
    return model([node("Concat", ["", "x"], ["y"], name="join", axis=0)],
                 [value("x", [2])], [value("y", [2])])


@artefact("truncated", valid=False)
def truncated(path):
    data = initializers().SerializeToString()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


@artefact("random-bytes", valid=False)
def random_bytes(path):
    with open(path, "wb") as f:
        f.write(rng().integers(0, 256, 4096, dtype=np.uint8).tobytes())


#===-----------------------------------------------------------------------===#
# Models exported by torch.onnx.export in training mode.
#===-----------------------------------------------------------------------===#

D_MODEL, HEADS, VOCAB, SEQ = 32, 2, 100, 16


def export(module, args, path, input_names, dynamic_axes):
    import torch
    torch.onnx.export(module, args, path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=input_names,
                      output_names=["output"], dynamic_axes=dynamic_axes)


def torch_modules(d_model=D_MODEL, heads=HEADS, vocab=VOCAB, seq=SEQ,
                  layers=2, masking="add"):
    """The PyTorch models, defined on first use: importing torch is slow.
    The sizes are those of the GPT-2- and BERT-style models (the lit tests'
    by default); seq is the longest sequence they take. How BERT masks its
    padding keys: "add" adds -10000 to their scores (as Hugging
    Face's BERT once did); "lowest" adds the lowest float (as it does
    now); "inf" fills their scores' mask with -inf; "fill" divides
    the query by the scale's root before the product and fills the padding
    keys' scores with the lowest float (masked_fill, as Hugging Face's
    DistilBERT); "causal" also attends causally, as Hugging Face's GPT-2:
    where(causal buffer, scores, lowest float), then adds the lowest float
    to the padding keys' scores; "fill-add" fills the padding keys' scores
    as "fill" does and adds -10000 to them too (a form kiln-fuse-attention
    leaves expanded). GPT-2 fills the scores above the diagonal
    with -inf where a float buffer is 0, or with "fill" scales the query
    before the product (as DistilBERT), keeps the scores where a bool buffer
    holds and puts the lowest float elsewhere (Hugging Face's GPT-2 without
    an attention mask)."""
    import math

    import torch
    from torch import nn

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 32)
            self.drop = nn.Dropout(0.1)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            return self.fc2(self.drop(torch.relu(self.fc1(x))))

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            x = self.pool(torch.relu(self.bn(self.conv(x))))
            return self.fc(torch.flatten(x, 1))

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.attn_drop = nn.Dropout(0.1)
            self.resid_drop = nn.Dropout(0.1)
            mask = torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq)
            if masking == "fill":
                self.register_buffer("keep", mask.bool())
            else:
                self.register_buffer("mask", mask)

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.qkv(x).split(d_model, dim=2)
            q = q.view(b, t, heads, c // heads).transpose(1, 2)
            k = k.view(b, t, heads, c // heads).transpose(1, 2)
            v = v.view(b, t, heads, c // heads).transpose(1, 2)
            scale = 1.0 / math.sqrt(d_model // heads)
            if masking == "fill":
                att = (q * scale) @ k.transpose(-2, -1)
                lowest = torch.tensor(torch.finfo(att.dtype).min)
                att = torch.where(self.keep[:, :, :t, :t], att, lowest)
            else:
                att = (q @ k.transpose(-2, -1)) * scale
                att = att.masked_fill(self.mask[:, :, :t, :t] == 0,
                                      float("-inf"))
            att = self.attn_drop(torch.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.resid_drop(self.proj(y))

    class GptBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(
                nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                nn.Linear(4 * d_model, d_model), nn.Dropout(0.1))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d_model)
            self.wpe = nn.Embedding(seq, d_model)
            self.drop = nn.Dropout(0.1)
            self.blocks = nn.ModuleList(
                [GptBlock() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx):
            t = idx.size(1)
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    class BertSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(d_model, d_model)
            self.key = nn.Linear(d_model, d_model)
            self.value = nn.Linear(d_model, d_model)
            self.dropout = nn.Dropout(0.1)
            if masking == "causal":
                causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
                self.register_buffer("causal", causal.view(1, 1, seq, seq))

        def split_heads(self, x):
            b, t, _ = x.size()
            return x.view(b, t, heads, d_model // heads).permute(0, 2, 1, 3)

        def forward(self, x, extended_mask):
            q, k, v = (self.split_heads(self.query(x)),
                       self.split_heads(self.key(x)),
                       self.split_heads(self.value(x)))
            root = math.sqrt(d_model // heads)
            lowest = torch.finfo(q.dtype).min
            if masking in ("fill", "fill-add"):
                scores = torch.matmul(q / root, k.transpose(-1, -2))
                filled = scores.masked_fill(extended_mask, lowest)
                if masking == "fill-add":
                    filled = filled + extended_mask.to(q.dtype) * -10000.0
                return self.attend(filled, v, x)
            scores = torch.matmul(q, k.transpose(-1, -2)) / root
            if masking == "causal":
                t = x.size(1)
                scores = torch.where(self.causal[:, :, :t, :t], scores,
                                     torch.tensor(lowest, dtype=q.dtype))
            return self.attend(scores + extended_mask, v, x)

        def attend(self, scores, v, x):
            probs = self.dropout(torch.softmax(scores, dim=-1))
            context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
            return context.view(x.size(0), x.size(1), d_model)

    class BertLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = BertSelfAttention()
            self.attn_out = nn.Linear(d_model, d_model)
            self.attn_norm = nn.LayerNorm(d_model, eps=1e-12)
            self.intermediate = nn.Linear(d_model, 4 * d_model)
            self.output = nn.Linear(4 * d_model, d_model)
            self.out_norm = nn.LayerNorm(d_model, eps=1e-12)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x, extended_mask):
            a = self.dropout(self.attn_out(self.attention(x, extended_mask)))
            x = self.attn_norm(x + a)
            h = self.output(nn.functional.gelu(self.intermediate(x)))
            return self.out_norm(x + self.dropout(h))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, d_model)
            self.position_embeddings = nn.Embedding(seq, d_model)
            self.token_type_embeddings = nn.Embedding(2, d_model)
            self.emb_norm = nn.LayerNorm(d_model, eps=1e-12)
            self.dropout = nn.Dropout(0.1)
            self.register_buffer("position_ids", torch.arange(seq).view(1, -1))
            self.layers = nn.ModuleList(
                [BertLayer() for _ in range(layers)])
            self.pooler = nn.Linear(d_model, d_model)
            self.classifier = nn.Linear(d_model, 2)

        def forward(self, input_ids, attention_mask):
            t = input_ids.size(1)
            positions = self.position_ids[:, :t]
            types = torch.zeros_like(input_ids)
            x = (self.word_embeddings(input_ids) +
                 self.position_embeddings(positions) +
                 self.token_type_embeddings(types))
            x = self.dropout(self.emb_norm(x))
            if masking == "inf":
                padding = attention_mask[:, None, None, :] == 0
                extended = torch.zeros(padding.shape, dtype=x.dtype)
                extended = extended.masked_fill(padding, float("-inf"))
            elif masking in ("fill", "fill-add"):
                extended = attention_mask[:, None, None, :] == 0
            elif masking in ("lowest", "causal"):
                extended = (1.0 - attention_mask[:, None, None, :].to(x.dtype))
                extended = extended * torch.finfo(x.dtype).min
            else:
                extended = attention_mask[:, None, None, :].to(x.dtype)
                extended = (1.0 - extended) * -10000.0
            for layer in self.layers:
                x = layer(x, extended)
            pooled = torch.tanh(self.pooler(x[:, 0]))
            return self.classifier(self.dropout(pooled))

    return torch, Mlp, Cnn, Gpt, Bert


@artefact("torch-mlp", valid=False)
def torch_mlp(path):
    torch, Mlp, _, _, _ = torch_modules()
    torch.manual_seed(0)
    export(Mlp(), (torch.randn(4, 16),), path, ["x"], {"x": {0: "batch"}})


@artefact("torch-cnn", valid=False)
def torch_cnn(path):
    torch, _, Cnn, _, _ = torch_modules()
    torch.manual_seed(0)
    export(Cnn(), (torch.randn(2, 3, 8, 8),), path, ["x"],
           {"x": {0: "batch"}})


@artefact("torch-gpt2", valid=False)
def torch_gpt2(path):
    torch, _, _, Gpt, _ = torch_modules()
    torch.manual_seed(0)
    idx = torch.randint(0, VOCAB, (2, SEQ))
    export(Gpt(), (idx,), path, ["idx"], {"idx": {0: "batch"}})


@artefact("torch-bert", valid=False)
def torch_bert(path):
    torch, _, _, _, Bert = torch_modules()
    torch.manual_seed(0)
    input_ids = torch.randint(0, VOCAB, (2, SEQ))
    attention_mask = torch.ones(2, SEQ, dtype=torch.long)
    attention_mask[1, SEQ // 2:] = 0
    export(Bert(), (input_ids, attention_mask), path,
           ["input_ids", "attention_mask"],
           {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"}})


#===-----------------------------------------------------------------------===#
# The same models in eval mode, with inputs, for end-to-end tests and the
# benchmark (bench/forward_latency.py).
#===-----------------------------------------------------------------------===#

EVAL_MODELS = ("mlp", "cnn", "gpt2", "bert")


def eval_model(name, batch, seed=0, **sizes):
    """The model NAME (one of EVAL_MODELS) in eval mode, with weights drawn
    from torch seed SEED, and seeded random inputs of BATCH rows.

    Returns (module, inputs, dynamic_axes): inputs is a dict of numpy arrays
    keyed by graph input name, in argument order; dynamic_axes is what
    torch.onnx.export takes. sizes (d_model, heads, vocab, seq, layers) go to
    torch_modules; the GPT-2- and BERT-style inputs are seq tokens long.
    Dropout is inactive. Norm layers get random scales, shifts and (batch
    norm) running statistics: at their defaults they would be close to the
    identity, and a test would not see them applied wrongly."""
    torch, Mlp, Cnn, Gpt, Bert = torch_modules(**sizes)
    seq = sizes.get("seq", SEQ)
    vocab = sizes.get("vocab", VOCAB)
    torch.manual_seed(seed)
    generator = np.random.default_rng(seed)
    if name == "mlp":
        module = Mlp()
        inputs = {"x": generator.standard_normal((batch, 16))}
    elif name == "cnn":
        module = Cnn()
        inputs = {"x": generator.standard_normal((batch, 3, 8, 8))}
    elif name == "gpt2":
        module = Gpt()
        inputs = {"idx": generator.integers(0, vocab, (batch, seq))}
    elif name == "bert":
        module = Bert()
        input_ids = generator.integers(1, vocab, (batch, seq))
        attention_mask = np.ones((batch, seq), np.int64)
        # Row r keeps seq - r * seq / (2 * batch) tokens (row 0 all of them,
        # the last about half): the rest is padding, token 0, masked out.
        for row in range(batch):
            length = seq - row * seq // (2 * batch)
            input_ids[row, length:] = 0
            attention_mask[row, length:] = 0
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    else:
        raise ValueError("unknown model %r; expected one of %s"
                         % (name, ", ".join(EVAL_MODELS)))
    randomize_norms(torch, module, seed)
    module.eval()
    inputs = {key: value.astype(np.float32 if value.dtype.kind == "f"
                                else np.int64)
              for key, value in inputs.items()}
    dynamic_axes = {key: {0: "batch"} for key in inputs}
    if name == "bert":
        dynamic_axes = {key: {0: "batch", 1: "sequence"} for key in inputs}
    return module, inputs, dynamic_axes


def randomize_norms(torch, module, seed):
    generator = torch.Generator().manual_seed(seed + 1)
    norms = (torch.nn.LayerNorm, torch.nn.modules.batchnorm._BatchNorm)
    with torch.no_grad():
        for layer in module.modules():
            if not isinstance(layer, norms):
                continue
            shape = layer.weight.shape
            layer.weight.copy_(torch.rand(shape, generator=generator) + 0.5)
            layer.bias.copy_(torch.randn(shape, generator=generator) * 0.1)
            if isinstance(layer, torch.nn.modules.batchnorm._BatchNorm):
                layer.running_mean.copy_(
                    torch.randn(shape, generator=generator) * 0.5)
                layer.running_var.copy_(
                    torch.rand(shape, generator=generator) + 0.5)


def run_eval(module, inputs):
    """The module's outputs on inputs (numpy arrays), as {"output": array}."""
    import torch
    with torch.inference_mode():
        output = module(*(torch.from_numpy(value)
                          for value in inputs.values()))
    return {"output": output.numpy()}


def export_eval(module, inputs, dynamic_axes, path):
    """Exports the eval-mode module as the ONNX model PATH: opset 17, dropout
    inactive, batch norm with running statistics, inputs named after the keys
    of inputs, one output named "output".

    PRESERVE exports the module in the mode it is in, eval here; EVAL would
    also fold each BatchNormalization into the Conv before it, and Kiln would
    never see one."""
    import warnings

    import torch
    assert not module.training, "export_eval takes a module in eval mode"
    args = tuple(torch.from_numpy(value) for value in inputs.values())
    with warnings.catch_warnings():
        # PRESERVE warns against constant folding whatever the mode; in eval
        # mode folding changes no parameter.
        warnings.filterwarnings("ignore", "It is recommended that constant "
                                "folding be turned off")
        torch.onnx.export(module, args, path, opset_version=17,
                          training=torch.onnx.TrainingMode.PRESERVE,
                          input_names=list(inputs), output_names=["output"],
                          dynamic_axes=dynamic_axes)


#===-----------------------------------------------------------------------===#
# Opsets 18 to 28 (what today's exporters write). onnx 1.12's checker knows
# opsets up to 17, so these are not checked with it.
#===-----------------------------------------------------------------------===#

@artefact("opset18-shapes", valid=False)
def opset18_shapes():
    # Split's num_outputs (7 = 3 + 3 + 1), a reduction's axes as an input,
    # Pad's axes input and wrap mode (opset 19).
    return model(
        [node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
         node("ReduceMean", ["x", "axis1"], ["mean"], keepdims=0),
         node("Pad", ["x", "pads", "", "axis1"], ["padded"]),
         node("Pad", ["x", "wrap_pads", "", "axis1"], ["wrapped"], mode="wrap")],
        [value("x", [2, 7])],
        [value("a", [2, 3]), value("b", [2, 3]), value("c", [2, 1]),
         value("mean", [2]), value("padded", [2, 10]),
         value("wrapped", [2, 17])],
        [ints("axis1", [1]), ints("pads", [1, 2]), ints("wrap_pads", [8, 2])],
        opset=19)


@artefact("opset18-axes-attribute", valid=False)
def opset18_axes_attribute():
    # ReduceMean took its axes as an attribute until opset 17; at 18 such an
    # attribute would be ignored (and every axis reduced).
    return model([node("ReduceMean", ["x"], ["mean"], axes=[1])],
                 [value("x", [2, 3])], [value("mean", [2, 1])], opset=18)


@artefact("opset18-sequences", valid=False)
def opset18_sequences():
    # What the dynamo exporter writes for torch.split unoptimized: a
    # SplitToSequence read back with SequenceAt; also SequenceLength and
    # ConcatFromSequence stacking (new_axis) the pieces.
    return model(
        [node("SplitToSequence", ["x", "two"], ["seq"], axis=1),
         node("SequenceAt", ["seq", "one"], ["second"]),
         node("SequenceLength", ["seq"], ["length"]),
         node("ConcatFromSequence", ["seq"], ["stacked"], axis=0, new_axis=1)],
        [value("x", [3, 4])],
        [value("second", [3, 2]), value("length", [], INT64),
         value("stacked", [2, 3, 2])],
        [ints("two", 2), ints("one", 1)], opset=18)


@artefact("opset18-sequence-misused", valid=False)
def opset18_sequence_misused():
    return model(
        [node("SplitToSequence", ["x"], ["seq"], axis=1),
         node("Relu", ["seq"], ["y"])],
        [value("x", [3, 4])], [value("y", [3, 1])], opset=18)


@artefact("opset29", valid=False)
def opset29():
    return model([node("Relu", ["x"], ["y"])], [value("x", [2])],
                 [value("y", [2])], opset=29)


@artefact("opset23-llama-block", valid=False)
def opset23_llama_block():
    # What torch.onnx.export(..., opset_version=23) writes for nn.RMSNorm,
    # RoPE and F.scaled_dot_product_attention(is_causal=True) with grouped
    # key/value heads: RMSNormalization, RotaryEmbedding and Attention on
    # [batch, heads, sequence, head size].
    return model(
        [node("RMSNormalization", ["x", "gain"], ["normed"], axis=-1,
              epsilon=1e-6),
         node("RotaryEmbedding", ["q", "cos", "sin", "positions"], ["q_rot"]),
         node("Attention", ["q_rot", "k", "v"], ["y"], is_causal=1),
         node("Attention", ["q", "k", "v", "keep"], ["y_masked"])],
        [value("x", [2, 4, 8]), value("q", [2, 4, 4, 8]),
         value("k", [2, 2, 4, 8]), value("v", [2, 2, 4, 8]),
         value("positions", [2, 4], INT64),
         value("keep", [4, 4], TensorProto.BOOL)],
        [value("normed", [2, 4, 8]), value("y", [2, 4, 4, 8]),
         value("y_masked", [2, 4, 4, 8])],
        [floats("gain", [8]), floats("cos", [16, 4]), floats("sin", [16, 4])],
        opset=23)



@artefact("opset24-attention-cache", valid=False)
def opset24_attention_cache():
    # Attention's inference features: a causal step over a key/value cache
    # (past and present), softcap with the scores exposed
    # (qk_matmul_output), and a sliding window over a cache the caller
    # keeps, whose lengths nonpad_kv_seqlen gives.
    return model(
        [node("Attention", ["q", "k", "v", "", "past_k", "past_v"],
              ["y_cached", "present_k", "present_v"], is_causal=1),
         node("Attention", ["q", "k", "v"], ["y_capped", "", "", "scores"],
              softcap=30.0, qk_matmul_output_mode=0),
         node("Attention", ["q", "k", "v", "", "", "", "lengths"],
              ["y_window"], is_causal=1, left_window_size=1)],
        [value("q", [2, 4, 2, 8]), value("k", [2, 2, 2, 8]),
         value("v", [2, 2, 2, 8]), value("past_k", [2, 2, 3, 8]),
         value("past_v", [2, 2, 3, 8]), value("lengths", [2], INT64)],
        [value("y_cached", [2, 4, 2, 8]), value("present_k", [2, 2, 5, 8]),
         value("present_v", [2, 2, 5, 8]), value("y_capped", [2, 4, 2, 8]),
         value("scores", [2, 4, 2, 2]), value("y_window", [2, 4, 2, 8])],
        [], opset=24)


@artefact("attention-half-cache", valid=False)
def attention_half_cache():
    # A past_key without its past_value.
    return model(
        [node("Attention", ["q", "k", "v", "", "past_k"], ["y"],
              name="half_cache")],
        [value("q", [1, 2, 2, 4]), value("k", [1, 2, 2, 4]),
         value("v", [1, 2, 2, 4]), value("past_k", [1, 2, 3, 4])],
        [value("y", [1, 2, 2, 4])], opset=23)


@artefact("attention-cache-and-nonpad", valid=False)
def attention_cache_and_nonpad():
    # A key/value cache Attention keeps and one the caller keeps, together.
    return model(
        [node("Attention", ["q", "k", "v", "", "past_k", "past_v", "lengths"],
              ["y"], name="two_caches")],
        [value("q", [1, 2, 2, 4]), value("k", [1, 2, 2, 4]),
         value("v", [1, 2, 2, 4]), value("past_k", [1, 2, 3, 4]),
         value("past_v", [1, 2, 3, 4]), value("lengths", [1], INT64)],
        [value("y", [1, 2, 2, 4])], opset=24)


@artefact("bf16-io")
def bf16_io():
    # A bf16 input and output: y = bf16(2 * f32(x)).
    return model(
        [node("Cast", ["x"], ["wide"], to=TensorProto.FLOAT),
         node("Add", ["wide", "wide"], ["twice"]),
         node("Cast", ["twice"], ["y"], to=TensorProto.BFLOAT16)],
        [value("x", [3], TensorProto.BFLOAT16)],
        [value("y", [3], TensorProto.BFLOAT16)])


@artefact("unsigned-ops")
def unsigned_ops():
    # uint8 values above 127 and uint64 values above 2^63, where signed
    # arithmetic would give other results; int16 beside them.
    lut = np.array([3, 16, 2, 100], np.uint8)
    return model(
        [node("Div", ["x", "lut"], ["quotient"]),
         node("Max", ["x", "lut"], ["larger"]),
         node("Greater", ["x", "lut"], ["greater"]),
         node("Cast", ["x"], ["wide"], to=FLOAT),
         node("ReduceMax", ["x"], ["top"], keepdims=0),
         node("BitShift", ["x", "lut"], ["shifted"], direction="RIGHT"),
         node("Div", ["big", "two"], ["half"]),
         node("Neg", ["small"], ["negated"])],
        [value("x", [4], TensorProto.UINT8),
         value("big", [2], TensorProto.UINT64),
         value("small", [2], TensorProto.INT16)],
        [value("quotient", [4], TensorProto.UINT8),
         value("larger", [4], TensorProto.UINT8),
         value("greater", [4], TensorProto.BOOL),
         value("wide", [4]),
         value("top", [], TensorProto.UINT8),
         value("shifted", [4], TensorProto.UINT8),
         value("half", [2], TensorProto.UINT64),
         value("negated", [2], TensorProto.INT16)],
        [tensor("lut", lut),
         tensor("two", np.array([2, 2], np.uint64))])


@artefact("integer-pow")
def integer_pow():
    return model([node("Pow", ["x", "y"], ["z"])],
                 [value("x", [4], TensorProto.INT32),
                  value("y", [4], TensorProto.INT32)],
                 [value("z", [4], TensorProto.INT32)])


@artefact("narrow-types", valid=False)
def narrow_types():
    # float8, float4 and int4 (onnx.proto's 17, 18, 19, 22, 23, 24; ONNX
    # 1.12's helpers and checker predate them, and opset 24) converted from
    # f32, as bytes out and in;
    # `q` is an int4 initializer packed two to a byte ([-1, -8, 7]).
    f8e4m3fn, f8e4m3fnuz, f8e5m2, int4, f4e2m1, f8e8m0 = 17, 18, 19, 22, 23, 24
    q = TensorProto(name="q", data_type=int4, dims=[3],
                    raw_data=bytes([0x8F, 0x07]))
    return model(
        [node("Cast", ["x"], ["e4m3"], to=f8e4m3fn),
         node("Cast", ["x"], ["e5m2"], to=f8e5m2, saturate=0),
         node("Cast", ["x"], ["fnuz"], to=f8e4m3fnuz),
         node("Cast", ["x"], ["i4"], to=int4),
         node("Cast", ["x"], ["f4"], to=f4e2m1),
         node("Abs", ["x"], ["magnitude"]),
         node("Cast", ["magnitude"], ["e8m0"], to=f8e8m0,
              round_mode="nearest"),
         node("Cast", ["e4m3"], ["back"], to=FLOAT),
         node("Cast", ["n"], ["n_wide"], to=FLOAT),
         node("DequantizeLinear", ["q", "half"], ["dequantized"])],
        [value("x", [8]), value("n", [4], int4)],
        [value("e4m3", [8], f8e4m3fn), value("e5m2", [8], f8e5m2),
         value("fnuz", [8], f8e4m3fnuz), value("i4", [8], int4),
         value("f4", [8], f4e2m1), value("e8m0", [8], f8e8m0),
         value("back", [8]), value("n_wide", [4]),
         value("dequantized", [3])],
        [q, tensor("half", np.array(0.5, np.float32))], opset=24)


@artefact("zero-elements")
def zero_elements():
    # Tensors without elements: an input [2, 0, 4] summed over its empty
    # axis (zeros), multiplied (an empty output), and a slice starting past
    # the end of its axis (empty too).
    return model(
        [node("ReduceSum", ["x", "axes"], ["sum"], keepdims=1),
         node("ReduceMax", ["x"], ["max"], axes=[1], keepdims=0),
         node("Mul", ["x", "x"], ["square"]),
         node("Slice", ["y", "start", "end", "axes"], ["past_end"])],
        [value("x", [2, 0, 4]), value("y", [3, 10])],
        [value("sum", [2, 1, 4]), value("max", [2, 4]),
         value("square", [2, 0, 4]), value("past_end", [3, 0])],
        [tensor("axes", np.array([1], np.int64)),
         tensor("start", np.array([1000], np.int64)),
         tensor("end", np.array([1000], np.int64))])


@artefact("large-products")
def large_products():
    # Products big enough (over 2^20 multiply-adds) that the CPU target
    # shares each among its OpenMP threads (kiln-lower-gemm-to-blas): split
    # by rows (m >= n), by columns with both operands stored transposed
    # (Gemm transA, transB), and batched.
    return model(
        [node("MatMul", ["a", "b"], ["rows"]),
         node("Gemm", ["ct", "dt"], ["columns"], transA=1, transB=1),
         node("MatMul", ["e", "f"], ["batched"])],
        [value("a", [300, 200]), value("b", [200, 150]),
         value("ct", [200, 40]), value("dt", [1000, 200]),
         value("e", [6, 96, 64]), value("f", [6, 64, 80])],
        [value("rows", [300, 150]), value("columns", [40, 1000]),
         value("batched", [6, 96, 80])])


def main(argv):
    if argv[1:] == ["--list"]:
        print("\n".join(sorted(ARTEFACTS)))
        return 0
    if len(argv) != 3 or argv[1] not in ARTEFACTS:
        sys.stderr.write(__doc__)
        sys.stderr.write("\nunknown artefact; --list names them\n")
        return 2
    builder, valid = ARTEFACTS[argv[1]]
    path = argv[2]
    if builder.__code__.co_argcount:
        builder(path)
        return 0
    result = builder()
    if valid:
        onnx.checker.check_model(result)
    onnx.save_model(result, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
