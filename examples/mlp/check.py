#!/usr/bin/python3
"""Runs the compiled MLP bundle on a seeded batch and checks its logits
against PyTorch computing the same network from the ONNX weights."""
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper


def main(kiln_run, bundle, model, batch):
    weights = {t.name: torch.tensor(numpy_helper.to_array(t))
               for t in onnx.load(model).graph.initializer}
    x = np.random.RandomState(0).randn(batch, 32).astype(np.float32)
    with tempfile.TemporaryDirectory() as work:
        inputs, outputs = work + "/in.npz", work + "/out.npz"
        with zipfile.ZipFile(inputs, "w") as archive, archive.open("input.npy", "w") as f:
            np.lib.format.write_array(f, x)
        subprocess.run([kiln_run, bundle, "--inputs", inputs, "--outputs", outputs],
                       check=True)
        logits = np.load(outputs)["logits"]
    hidden = torch.nn.functional.gelu(torch.tensor(x) @ weights["fc1.weight"].T
                                      + weights["fc1.bias"])
    reference = (hidden @ weights["fc2.weight"].T + weights["fc2.bias"]).numpy()
    difference = float(np.abs(logits - reference).max())
    print("kiln logits[0]:    ", np.array2string(logits[0], precision=4))
    print("pytorch logits[0]: ", np.array2string(reference[0], precision=4))
    print("max |kiln - pytorch| over the batch: %.3g" % difference)
    if not np.allclose(logits, reference, rtol=1e-4, atol=1e-5):
        print("MISMATCH")
        return 1
    print("OK: Kiln matches PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
