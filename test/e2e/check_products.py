"""Checks kiln-run's outputs of the large-products model (kiln_onnx_models)
against NumPy in float64.

    check_products.py IN.npz OUT.npz...

For each output file prints 'OUT.npz: rows columns batched within 1e-05'
when every element is within 1e-5 of the sum of the absolute values of its
dot product's terms (an f32 dot product's rounding bound at these lengths),
and the worst element otherwise."""
import sys

import numpy as np

TOLERANCE = 1e-5


def main(argv):
    inputs = np.load(argv[1])
    x = {k: inputs[k].astype(np.float64) for k in inputs.files}
    want = {
        "rows": (x["a"] @ x["b"], np.abs(x["a"]) @ np.abs(x["b"])),
        "columns": (x["ct"].T @ x["dt"].T,
                    np.abs(x["ct"].T) @ np.abs(x["dt"].T)),
        "batched": (x["e"] @ x["f"], np.abs(x["e"]) @ np.abs(x["f"])),
    }
    failed = False
    for path in argv[2:]:
        outputs = np.load(path)
        report = []
        for name, (product, bound) in want.items():
            got = outputs[name].astype(np.float64)
            error = np.abs(got - product) / bound
            if got.shape != product.shape or not error.max() <= TOLERANCE:
                failed = True
                report.append("%s off by %.3g of the bound" % (
                    name, error.max() if got.shape == product.shape else
                    float("inf")))
            else:
                report.append(name)
        print("%s: %s within %g" % (path, " ".join(report), TOLERANCE))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
