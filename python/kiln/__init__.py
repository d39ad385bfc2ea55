"""Kiln from Python: open a bundle, run its entry points on NumPy arrays (or
PyTorch tensors), train from any iterable of batches, and compile a PyTorch
module with kilnc.

    import kiln
    trainer = kiln.Trainer("mlp_train.kiln")
    for metrics in trainer.train(batches, steps=100):
        print(metrics["step"], metrics["loss"])

The bindings call libkilnrt's C API (kiln/runtime.h) through ctypes: no
compiled extension, so the package needs only the runtime library, found as
$KILN_LIBRARY, next to $KILN_PREFIX/lib, or on the loader's path.
"""
from ._runtime import Bundle, KilnError, Session, TensorInfo, library_path
from ._train import Trainer
from ._compile import compile

__all__ = ["Bundle", "KilnError", "Session", "TensorInfo", "Trainer",
           "compile", "library_path"]
__version__ = "0.1.0"
