"""kiln.compile: a PyTorch module to a Trainer, through today's exporter
and kilnc."""
import inspect
import os
import shutil
import subprocess
import tempfile
import warnings

from ._runtime import KilnError
from ._train import Trainer


def _kilnc(kilnc):
    for candidate in (kilnc, os.environ.get("KILN_KILNC"),
                      os.path.join(os.environ["KILN_PREFIX"], "bin", "kilnc")
                      if os.environ.get("KILN_PREFIX") else None,
                      shutil.which("kilnc")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise KilnError("not found",
                    "kilnc not found: put it on PATH, or set KILN_KILNC or "
                    "KILN_PREFIX")


def compile(module, example_inputs, optimizer="adamw", target="cpu",
            workdir=None, kilnc=None, input_names=None, flags=(),
            **options):
    """Exports `module` (whose forward takes `example_inputs` and returns
    the loss) with torch.onnx.export (the dynamo exporter, optimize=False:
    what training needs), compiles its training step with kilnc, and returns
    a Trainer of the bundle. `options` become kilnc flags (lr=1e-3 ->
    --lr=1e-3, weight_decay=0.01 -> --weight-decay=0.01); `flags` are passed
    as they are. The files go to `workdir` (a new temporary directory by
    default): model.onnx and model.kiln. A failed compile raises KilnError
    with kilnc's message."""
    import torch

    workdir = workdir or tempfile.mkdtemp(prefix="kiln-")
    os.makedirs(workdir, exist_ok=True)
    onnx_path = os.path.join(workdir, "model.onnx")
    bundle_path = os.path.join(workdir, "model.kiln")
    example_inputs = tuple(example_inputs)
    if input_names is None:
        parameters = list(inspect.signature(module.forward).parameters)
        input_names = parameters[:len(example_inputs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example_inputs, onnx_path, dynamo=True,
                          optimize=False, input_names=list(input_names),
                          output_names=["loss"], verbose=False)
    command = [_kilnc(kilnc), onnx_path, "--optimizer=" + optimizer,
               "--loss-output=loss", "--target=" + target, "-o", bundle_path]
    command += ["--%s=%s" % (key.replace("_", "-"), value)
                for key, value in options.items()]
    command += list(flags)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise KilnError("invalid argument",
                        result.stderr.strip() or "kilnc failed")
    trainer = Trainer(bundle_path)
    trainer.onnx_path = onnx_path
    return trainer
