#!/usr/bin/env python3
"""Writes the ONNX backend node tests of the installed onnx package.

The onnx package on PyPI ships the generators of its node tests, not their
data; this script runs them and writes each test as the backend test data
is laid out (DIR/node/test_NAME/model.onnx and test_data_set_*/), with the
package's own writer, so that scripts/onnx-conformance.py can run them.
Run it with the python of scripts/pypi-venv.sh; the data is not committed.

    python scripts/onnx-newest-testdata.py -o DIR

Writes DIR/node and DIR/VERSION (the onnx version); a second run with the
same version does nothing.
"""
import argparse
import os
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", required=True, help="output directory")
    args = parser.parse_args()

    import onnx
    import onnx.backend.test.case.model as model_cases
    import onnx.backend.test.case.node as node_cases
    from onnx.backend.test import cmd_tools

    stamp = os.path.join(args.output, "VERSION")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__:
        print(os.path.join(args.output, "node"))
        return 0
    os.makedirs(args.output, exist_ok=True)
    # cmd_tools writes the test cases model_cases.collect_testcases gives:
    # hand it the node cases instead (their kind is "node").
    model_cases.collect_testcases = node_cases.collect_testcases
    cmd_tools.generate_data(argparse.Namespace(output=args.output))
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    count = len(os.listdir(os.path.join(args.output, "node")))
    print("onnx %s: %d node tests" % (onnx.__version__, count), file=sys.stderr)
    print(os.path.join(args.output, "node"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
