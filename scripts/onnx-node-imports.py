#!/usr/bin/python3
"""Imports every ONNX backend node test model with `kilnc --emit=kiln`.

Prints how many import and which op types block the rest, by count. A model
whose shape arguments are graph inputs (the node tests feed Reshape's shape,
Slice's starts... as inputs) gets those inputs bound to the test's own data
with --bind-input, exactly when kilnc reports that it needs them constant.

Exits non-zero when kilnc crashes on any model, or when fewer than
--min-imported models import.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys

NEEDS_CONSTANT = re.compile(r"input '([^']+)' \([^)]*\) must be a constant")
NODE_ERROR = re.compile(r"node '[^']*' \(([A-Za-z0-9_]+), (?:opset \d+|domain '[^']*')\): (.*)")


def graph_inputs(model_dir):
    """Names of the graph inputs in test-data order, read from model.onnx."""
    import onnx
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def integer_inputs(model_dir):
    import onnx
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    integer = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
    return [i.name for i in model.graph.input
            if i.name not in initializers and i.type.tensor_type.elem_type in integer]


def import_one(kilnc, model_dir, timeout):
    name = os.path.basename(model_dir)
    bindings = {}
    inputs = None
    for _ in range(8):
        cmd = [kilnc, os.path.join(model_dir, "model.onnx"), "--emit=kiln", "-o", os.devnull]
        for key, path in bindings.items():
            cmd.append("--bind-input=%s=%s" % (key, path))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return name, "hang", "timed out after %ss" % timeout
        if proc.returncode == 0:
            return name, "ok", ""
        message = proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else ""
        if proc.returncode < 0 or proc.returncode > 1:
            return name, "crash", "exit %d: %s" % (proc.returncode, proc.stderr.strip()[-400:])
        match = NEEDS_CONSTANT.search(message)
        if not match or match.group(1) in bindings:
            return name, "error", message
        if inputs is None:
            inputs = graph_inputs(model_dir)
        wanted = [match.group(1)]
        if wanted[0] not in inputs:
            # Computed from graph inputs: bind the integer ones it may use.
            wanted = [i for i in integer_inputs(model_dir) if i not in bindings]
            if not wanted:
                return name, "error", message
        for w in wanted:
            data = os.path.join(model_dir, "test_data_set_0", "input_%d.pb" % inputs.index(w))
            if not os.path.exists(data):
                return name, "error", message
            bindings[w] = data
    return name, "error", message


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilnc", required=True)
    parser.add_argument("--node-dir", default="/usr/share/libonnx-testdata/data/node")
    parser.add_argument("--min-imported", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--verbose", action="store_true", help="print every failure")
    args = parser.parse_args()

    dirs = sorted(os.path.join(args.node_dir, d) for d in os.listdir(args.node_dir)
                  if os.path.exists(os.path.join(args.node_dir, d, "model.onnx")))
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for result in pool.map(lambda d: import_one(args.kilnc, d, args.timeout), dirs):
            results.append(result)

    imported = sum(1 for _, status, _ in results if status == "ok")
    crashes = [(n, m) for n, s, m in results if s in ("crash", "hang")]
    by_op = collections.Counter()
    reasons = collections.defaultdict(list)
    for name, status, message in results:
        if status != "error":
            continue
        match = NODE_ERROR.search(message)
        key = match.group(1) if match else "(model) " + message.split("model.onnx: ", 1)[-1][:70]
        by_op[key] += 1
        reasons[key].append((name, message))

    print("imported %d of %d node test models" % (imported, len(results)))
    if by_op:
        print("blocked by (op type or model-level reason: count):")
        for key, count in by_op.most_common():
            print("  %-40s %d" % (key, count))
    if args.verbose:
        for key, items in sorted(reasons.items()):
            for name, message in items:
                print("%s: %s" % (name, message))
    for name, message in crashes:
        print("CRASH %s: %s" % (name, message))
    if crashes:
        print("FAIL: kilnc crashed or hung on %d models" % len(crashes))
        return 1
    if imported < args.min_imported:
        print("FAIL: %d imported, at least %d required" % (imported, args.min_imported))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
