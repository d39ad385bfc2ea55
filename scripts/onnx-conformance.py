#!/usr/bin/python3
"""Runs ONNX backend test models end to end: kilnc --inference, then kiln-run.

For every test directory (model.onnx + test_data_set_*/{input,output}_*.pb)
the model is compiled for the CPU, every data set is run, and the outputs
are compared with the expected ones (floats: rtol 1e-3, atol 1e-4; other
types exactly). Graph inputs that Kiln needs as constants (a Reshape's shape,
a Slice's starts...) are bound to the data set's values with --bind-input,
exactly when kilnc asks for them.

Prints `passed N of M`, the failures grouped by reason, and with
--allowlist FILE fails when any test the allowlist names does not pass (a
regression). --write-allowlist FILE records the tests that pass.
"""
import argparse
import collections
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

NEEDS_CONSTANT = re.compile(r"input '([^']+)' \([^)]*\) must be a constant")
NODE_ERROR = re.compile(r"\(([A-Za-z0-9_]+), (?:opset \d+|domain '[^']*')\): (.*)")


def load_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def graph_io(model_dir):
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    integer_inputs = [i.name for i in model.graph.input if i.name not in initializers
                      and i.type.tensor_type.elem_type in (onnx.TensorProto.INT64,
                                                           onnx.TensorProto.INT32)]
    return inputs, outputs, integer_inputs


def compile_model(args, model_dir, work, inputs, integer_inputs, data_set):
    """Compiles, binding inputs kilnc needs constant. Returns (bundle, bound
    names) or raises Failure."""
    bindings = {}
    bundle = os.path.join(work, "model.kiln")
    for _ in range(8):
        cmd = [args.kilnc, os.path.join(model_dir, "model.onnx"), "--inference",
               "-o", bundle]
        cmd += ["--bind-input=%s=%s" % kv for kv in bindings.items()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode == 0:
            return bundle, set(bindings)
        message = proc.stderr.strip()
        if proc.returncode != 1:
            raise Failure("crash", "kilnc exit %d: %s" % (proc.returncode, message[-300:]))
        match = NEEDS_CONSTANT.search(message)
        wanted = []
        if match and match.group(1) in inputs and match.group(1) not in bindings:
            wanted = [match.group(1)]
        elif match:
            wanted = [i for i in integer_inputs if i not in bindings]
        if not wanted:
            node = NODE_ERROR.search(message)
            reason = ("%s: %s" % (node.group(1), node.group(2)[:60])) if node else message.split(": ", 2)[-1][:80]
            raise Failure("compile", reason)
        for name in wanted:
            bindings[name] = os.path.join(data_set, "input_%d.pb" % inputs.index(name))
    raise Failure("compile", "too many inputs to bind")


class Failure(Exception):
    def __init__(self, kind, reason):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def save_npz(path, arrays):
    """np.savez, minus its keyword handling (an input named 'like' or 'file'
    would be swallowed)."""
    import zipfile
    with zipfile.ZipFile(path, "w") as archive:
        for key, value in arrays.items():
            with archive.open(key + ".npy", "w") as member:
                np.lib.format.write_array(member, np.array(value, order="C", copy=True))


def compare(name, got, want):
    if got.shape != want.shape:
        raise Failure("mismatch", "%s: shape %s, expected %s" % (name, got.shape, want.shape))
    # bf16 (ml_dtypes' bfloat16, which onnx's numpy_helper gives) has no
    # NumPy dtype: .npy files hold it as the 2-byte void type.
    bf16 = want.dtype.name == "bfloat16"
    if bf16 and got.dtype.kind == "V" and got.dtype.itemsize == 2:
        got = got.view(want.dtype)
    # So do ml_dtypes' one-byte types (float8, float4, int4, int2), as V1;
    # their values are compared exactly, NaNs alike whatever their sign.
    if want.dtype.itemsize == 1 and want.dtype.type.__module__.startswith("ml_dtypes"):
        if got.dtype.kind != "V" or got.dtype.itemsize != 1:
            raise Failure("mismatch", "%s: dtype %s, expected %s" % (name, got.dtype, want.dtype))
        wide = np.float64 if "float" in want.dtype.name else np.int64
        if not np.array_equal(got.view(want.dtype).astype(wide), want.astype(wide),
                              equal_nan=wide is np.float64):
            raise Failure("mismatch", "%s: values differ" % name)
        return
    if want.dtype.kind == "f" or bf16:
        if got.dtype != want.dtype:
            raise Failure("mismatch", "%s: dtype %s, expected %s" % (name, got.dtype, want.dtype))
        # bf16 keeps 8 significant bits: the reference's roundings and
        # Kiln's (f32 inside, rounded once) differ by a few of its ulps.
        rtol, atol = (2 ** -6, 1e-3) if bf16 else (1e-3, 1e-4)
        if not np.allclose(got.astype(np.float64), want.astype(np.float64),
                           rtol=rtol, atol=atol, equal_nan=True):
            diff = np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64)))
            raise Failure("mismatch", "%s: values differ (max abs diff %.3g)" % (name, diff))
    elif not np.array_equal(got.astype(want.dtype), want):
        raise Failure("mismatch", "%s: values differ" % name)


def run_test(args, model_dir):
    name = os.path.basename(model_dir)
    work = tempfile.mkdtemp(prefix="kiln-conf-")
    try:
        data_sets = sorted(glob.glob(os.path.join(model_dir, "test_data_set_*")))
        if not data_sets:
            return name, "skip", "no data sets"
        inputs, outputs, integer_inputs = graph_io(model_dir)
        bundle, bound = compile_model(args, model_dir, work, inputs, integer_inputs,
                                      data_sets[0])
        for data_set in data_sets:
            feeds = {}
            for i, input_name in enumerate(inputs):
                path = os.path.join(data_set, "input_%d.pb" % i)
                if input_name not in bound and os.path.exists(path):
                    feeds[input_name] = load_tensor(path)
            in_npz = os.path.join(work, "in.npz")
            out_npz = os.path.join(work, "out.npz")
            save_npz(in_npz, feeds)
            proc = subprocess.run([args.kiln_run, bundle, "--entry", "forward",
                                   "--inputs", in_npz, "--outputs", out_npz],
                                  capture_output=True, text=True, timeout=args.timeout)
            if proc.returncode != 0:
                kind = "crash" if proc.returncode not in (0, 1) else "run"
                raise Failure(kind, proc.stderr.strip()[-200:])
            got = np.load(out_npz)
            for i, output_name in enumerate(outputs):
                path = os.path.join(data_set, "output_%d.pb" % i)
                if os.path.exists(path):
                    compare(output_name, got[output_name], load_tensor(path))
        return name, "pass", ""
    except Failure as failure:
        return name, failure.kind, failure.reason
    except subprocess.TimeoutExpired:
        return name, "hang", "timed out"
    except Exception as error:  # a malformed test directory, not a Kiln bug
        return name, "harness", "%s: %s" % (type(error).__name__, error)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--kiln-run", required=True)
    parser.add_argument("--dir", action="append", required=True,
                        help="a directory of test directories (repeatable)")
    parser.add_argument("--allowlist", help="fail if a test listed here fails")
    parser.add_argument("--write-allowlist", help="write the passing tests here")
    parser.add_argument("--min-passed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--filter", default="", help="only tests whose name contains this")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    dirs = []
    for root in args.dir:
        dirs += sorted(os.path.join(root, d) for d in os.listdir(root)
                       if args.filter in d and
                       os.path.exists(os.path.join(root, d, "model.onnx")))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda d: run_test(args, d), dirs))

    passed = sorted(n for n, status, _ in results if status == "pass")
    groups = collections.defaultdict(list)
    for name, status, reason in results:
        if status != "pass":
            groups["%s: %s" % (status, reason if status != "mismatch" else "outputs differ")].append(name)
    print("passed %d of %d" % (len(passed), len(results)))
    for key, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print("  %4d  %s" % (len(names), key))
        if args.verbose:
            for n in names:
                print("          %s" % n)
    if args.verbose:
        for name, status, reason in results:
            if status == "mismatch":
                print("mismatch %s: %s" % (name, reason))
    status = 0
    crashes = [n for n, s, _ in results if s in ("crash", "hang")]
    if crashes:
        print("FAIL: crashed or hung: %s" % " ".join(crashes))
        status = 1
    if args.write_allowlist:
        with open(args.write_allowlist, "w") as f:
            f.write("# ONNX backend tests that pass end to end; kept by\n"
                    "# scripts/onnx-conformance.py --write-allowlist.\n")
            for name in passed:
                f.write(name + "\n")
    if args.allowlist:
        with open(args.allowlist) as f:
            allowed = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        known = {n for n, _, _ in results}
        regressed = sorted(allowed & known - set(passed))
        if regressed:
            print("FAIL: %d allowlisted tests no longer pass: %s" % (len(regressed), " ".join(regressed)))
            status = 1
    if len(passed) < args.min_passed:
        print("FAIL: %d passed, at least %d required" % (len(passed), args.min_passed))
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
