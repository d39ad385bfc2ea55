"""Training from Python: the loop kiln-run --data runs, on batches from any
iterable (a PyTorch DataLoader included)."""
import json
import os
import struct
import time

import numpy as np

from ._runtime import Bundle, KilnError, Session

# safetensors dtype names, as kiln-run --save-params writes them.
_SAFETENSORS = {"float32": "F32", "float16": "F16", "float64": "F64",
                "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8",
                "uint64": "U64", "uint32": "U32", "uint16": "U16",
                "uint8": "U8", "bool": "BOOL"}


class Trainer:
    """Runs a bundle's train_step (compiled with kilnc --optimizer) on
    batches, as kiln-run --data does, and reports each step's metrics with
    kiln-run's --metrics fields."""

    def __init__(self, bundle, target=None):
        self.session = Session(bundle, target)
        self.bundle = self.session.bundle
        if "train_step" not in self.bundle.entry_points:
            raise KilnError("not found",
                            "%s has no train_step: compile it with kilnc "
                            "--optimizer=..." % self.bundle.path)
        if "accumulate_step" in self.bundle.entry_points:
            raise KilnError("unsupported",
                            "bundles of kilnc --grad-accum are not supported "
                            "by the Python trainer yet (kiln-run runs them)")
        self.input_names = [i.name for i in self.bundle.inputs("train_step")]
        self.step = 0

    def _feeds(self, batch):
        if isinstance(batch, dict):
            return batch
        if isinstance(batch, (list, tuple)):
            if len(batch) != len(self.input_names):
                raise KilnError("invalid argument",
                                "a batch of %d arrays for train_step's %d "
                                "inputs (%s)" % (len(batch),
                                                 len(self.input_names),
                                                 ", ".join(self.input_names)))
            return dict(zip(self.input_names, batch))
        raise KilnError("invalid argument",
                        "a batch is a dict of arrays keyed by input name, or "
                        "a tuple in the inputs' order (%s)"
                        % ", ".join(self.input_names))

    def train(self, batches, steps=None, metrics=None):
        """Runs one train_step per batch of `batches` (at most `steps`), and
        yields each step's metrics: step, loss, lr, grad_norm and
        loss_scale (those the bundle has), samples, samples_per_s,
        elapsed_s. With `metrics`, also appends them to that file as JSON
        lines, as kiln-run --metrics writes them."""
        out = open(metrics, "a") if metrics else None
        start = time.perf_counter()
        try:
            for batch in batches:
                if steps is not None and self.step >= steps:
                    break
                feeds = self._feeds(batch)
                begin = time.perf_counter()
                outputs = self.session.run("train_step", feeds)
                now = time.perf_counter()
                self.step += 1
                samples = int(np.shape(next(iter(feeds.values())))[0])
                record = {"step": self.step, "loss": float(outputs["loss"])}
                for name in ("lr", "grad_norm", "loss_scale"):
                    if name in outputs:
                        record[name] = float(outputs[name])
                record.update(samples=samples,
                              samples_per_s=samples / max(now - begin, 1e-9),
                              elapsed_s=now - start)
                if out:
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                yield record
        finally:
            if out:
                out.close()

    def evaluate(self, batch):
        """eval_step's loss on one batch (no update)."""
        return float(self.session.run("eval_step", self._feeds(batch))["loss"])

    def save(self, path):
        """Every parameter and optimizer state tensor, as a safetensors file
        (what kiln-run --save-params and its checkpoints write)."""
        header, blobs, offset = {}, [], 0
        for info in self.bundle.parameters:
            array = self.session.get_parameter(info.name)
            dtype = _SAFETENSORS.get(array.dtype.name)
            if dtype is None:
                raise KilnError("unsupported",
                                "parameter '%s' of dtype %s has no safetensors "
                                "name" % (info.name, array.dtype))
            data = array.tobytes()
            header[info.name] = {"dtype": dtype, "shape": list(array.shape),
                                 "data_offsets": [offset, offset + len(data)]}
            blobs.append(data)
            offset += len(data)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for data in blobs:
                f.write(data)
        os.replace(tmp, path)

    def load(self, path):
        """Restores a file of save() (or kiln-run's checkpoints and
        --save-params): every tensor it holds replaces the parameter's."""
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
            base = 8 + length
            by_name = {p.name: p for p in self.bundle.parameters}
            for name, entry in header.items():
                if name == "__metadata__":
                    continue
                if name not in by_name:
                    raise KilnError("not found",
                                    "%s: the bundle has no parameter '%s'"
                                    % (path, name))
                begin, end = entry["data_offsets"]
                f.seek(base + begin)
                data = f.read(end - begin)
                info = by_name[name]
                array = np.frombuffer(data, info.dtype).reshape(info.shape)
                self.session.set_parameter(name, array)
