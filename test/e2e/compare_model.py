"""Runs the end-to-end tests' PyTorch side: exports a model, writes its inputs
and PyTorch's outputs, and compares Kiln's outputs with them.

    compare_model.py prepare MODEL DIR [--batch N] [--seed S]
        writes DIR/MODEL.onnx (eval mode, opset 17, dynamic batch axis),
        DIR/MODEL-inputs.npz (seeded random inputs, keyed by graph input
        name) and DIR/MODEL-expected.npz (the torch module's own outputs)
    compare_model.py check EXPECTED.npz ACTUAL.npz [--rtol R] [--atol A]
        exits 1, saying which array and where, unless every array of
        EXPECTED is in ACTUAL with its shape and dtype and, elementwise,
        |actual - expected| <= atol + rtol * |expected| (NaN never matches)
    compare_model.py perturb SRC.npz DST.npz [--rtol R] [--atol A]
        copies SRC with one element of each float array moved by ten times
        the tolerance, to show that check catches a single wrong number

MODEL is one of mlp, cnn, gpt2, bert; the definitions and sizes are in
test/lib/kiln_onnx_models.py (on PYTHONPATH).
"""
import argparse
import sys

import numpy as np

from kiln_test_io import load_npz, save_npz  # noqa: F401 (re-exported)

RTOL, ATOL = 1e-4, 1e-5


def prepare(args):
    import kiln_onnx_models as models
    module, inputs, dynamic_axes = models.eval_model(args.model, args.batch,
                                                     args.seed)
    expected = models.run_eval(module, inputs)
    prefix = "%s/%s" % (args.dir, args.model)
    models.export_eval(module, inputs, dynamic_axes, prefix + ".onnx")
    save_npz(prefix + "-inputs.npz", inputs)
    save_npz(prefix + "-expected.npz", expected)
    return 0


def mismatch(name, actual, expected, rtol, atol):
    """Why actual is not expected, or None when it is."""
    if actual.shape != expected.shape:
        return "%s: shape %s, expected %s" % (name, actual.shape,
                                             expected.shape)
    if actual.dtype != expected.dtype:
        return "%s: dtype %s, expected %s" % (name, actual.dtype,
                                             expected.dtype)
    if expected.dtype.kind != "f":
        wrong = actual != expected
        if not wrong.any():
            return None
        where = np.unravel_index(np.argmax(wrong), wrong.shape)
        return "%s: %d of %d elements differ; at %s: %s, expected %s" % (
            name, wrong.sum(), wrong.size, where, actual[where],
            expected[where])
    got, want = actual.astype(np.float64), expected.astype(np.float64)
    error = np.abs(got - want)
    bound = atol + rtol * np.abs(want)
    # NaN in either makes the comparison false, so it counts as wrong.
    wrong = ~(error <= bound)
    if not wrong.any():
        return None
    excess = np.where(np.isnan(error), np.inf, error - bound)
    where = np.unravel_index(np.argmax(excess), excess.shape)
    return ("%s: %d of %d elements differ beyond rtol %g, atol %g; the "
            "worst at %s: %.9g, expected %.9g (abs diff %.3g, max abs diff "
            "%.3g)" % (name, wrong.sum(), wrong.size, rtol, atol, where,
                       got[where], want[where], error[where],
                       np.nanmax(error) if not np.isnan(error).all()
                       else np.nan))


def check(args):
    expected, actual = load_npz(args.expected), load_npz(args.actual)
    problems = []
    for name in sorted(set(expected) - set(actual)):
        problems.append("%s: missing from %s" % (name, args.actual))
    for name in sorted(set(expected) & set(actual)):
        problem = mismatch(name, actual[name], expected[name], args.rtol,
                           args.atol)
        if problem:
            problems.append(problem)
    for problem in problems:
        print("error: " + problem, file=sys.stderr)
    if problems:
        print("FAIL: %s does not match %s" % (args.actual, args.expected),
              file=sys.stderr)
        return 1
    worst = max((np.max(np.abs(actual[name].astype(np.float64) -
                               expected[name].astype(np.float64)))
                 for name in expected if expected[name].size), default=0.0)
    print("ok: %d arrays match (max abs diff %.3g)" % (len(expected), worst))
    return 0


def perturb(args):
    arrays = load_npz(args.src)
    for name, array in arrays.items():
        if array.dtype.kind == "f" and array.size:
            flat = array.reshape(-1)
            flat[0] += 10 * (args.atol + args.rtol * abs(flat[0]))
    save_npz(args.dst, arrays)
    return 0


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("prepare")
    command.add_argument("model", choices=["mlp", "cnn", "gpt2", "bert"])
    command.add_argument("dir")
    command.add_argument("--batch", type=int, default=8)
    command.add_argument("--seed", type=int, default=0)
    command.set_defaults(run=prepare)
    command = commands.add_parser("check")
    command.add_argument("expected")
    command.add_argument("actual")
    command.set_defaults(run=check)
    command = commands.add_parser("perturb")
    command.add_argument("src")
    command.add_argument("dst")
    command.set_defaults(run=perturb)
    for command in (commands.choices["check"], commands.choices["perturb"]):
        command.add_argument("--rtol", type=float, default=RTOL)
        command.add_argument("--atol", type=float, default=ATOL)
    args = parser.parse_args(argv[1:])
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
