"""Training from Python: the loop kiln-run --data runs, on batches from any
iterable (a PyTorch DataLoader included)."""
import json
import os
import struct
import time

import numpy as np

from ._checkpoint import CheckpointDir, write_atomically
from ._runtime import KilnError, Session

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
        self.input_names = [i.name for i in self.bundle.inputs("train_step")]
        # kilnc --grad-accum=K: each step is K - 1 accumulate_steps, then
        # train_step, each on a micro-batch of its own (as kiln-run runs it).
        accum = self.bundle.metadata("training.grad_accum") or "1"
        if not accum.isdigit() or int(accum) < 1:
            raise KilnError("format error",
                            "%s: metadata training.grad_accum is '%s', not a "
                            "count" % (self.bundle.path, accum))
        self.grad_accum = int(accum)
        if self.grad_accum > 1:
            if "accumulate_step" not in self.bundle.entry_points:
                raise KilnError("format error",
                                "%s: metadata training.grad_accum is %d but "
                                "the bundle has no entry point "
                                "'accumulate_step'" % (self.bundle.path,
                                                        self.grad_accum))
            accumulate = [i.name for i in
                          self.bundle.inputs("accumulate_step")]
            if accumulate != self.input_names:
                raise KilnError("format error",
                                "%s: 'train_step' and 'accumulate_step' take "
                                "different inputs" % self.bundle.path)
        self.step = 0
        self.samples = 0

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

    def train(self, batches, steps=None, metrics=None, checkpoint_dir=None,
              checkpoint_every=None, keep_checkpoints=None, resume=False):
        """Runs one train_step per batch of `batches` until the trainer's
        step reaches `steps` (or the batches end), and yields each step's
        metrics: step, loss, lr, grad_norm and loss_scale (those the bundle
        has), samples, samples_per_s, elapsed_s. With `metrics`, also
        appends them to that file as JSON lines, as kiln-run --metrics
        writes them. A bundle of kilnc --grad-accum=K takes K batches (its
        micro-batches) a step: K - 1 accumulate_steps, then train_step; its
        loss is their mean, as kiln-run reports it, and a last group of
        fewer than K batches is not run.

        With `checkpoint_dir`, writes checkpoints there as kiln-run
        --checkpoint-dir does (step-N.safetensors, step-N.json, latest;
        each written atomically; the directory locked while training):
        every `checkpoint_every` steps and after the last step, keeping the
        `keep_checkpoints` newest (all by default). A directory that holds
        checkpoints is refused unless `resume`. With `resume`, the latest
        checkpoint's parameters, optimizer state and step are restored and
        the number of batches its run had taken from its iterable are
        skipped, so `batches` must yield what the first run's did, in the
        same order (a DataLoader with a seeded generator does); records of
        `metrics` after that step are dropped."""
        if checkpoint_every is not None and (not checkpoint_dir or
                                             checkpoint_every < 1):
            raise KilnError("invalid argument",
                            "checkpoint_every needs checkpoint_dir and a "
                            "count of at least 1")
        if resume and not checkpoint_dir:
            raise KilnError("invalid argument", "resume needs checkpoint_dir")
        directory = None
        if checkpoint_dir:
            directory = CheckpointDir(checkpoint_dir, keep_checkpoints)
            directory.lock()
        try:
            skip = 0
            if directory and resume:
                state = directory.read_latest(self.bundle)
                self.load_bytes(state["parameters"],
                                os.path.join(directory.path, "latest"))
                self.step, self.samples = state["step"], state["samples"]
                skip = state["batches"]
                if metrics and os.path.exists(metrics):
                    _truncate_metrics(metrics, self.step)
            elif directory and directory.has_checkpoints():
                raise KilnError("invalid argument",
                                "checkpoint_dir %s already holds checkpoints: "
                                "pass resume=True to continue from them, or "
                                "another directory" % directory.path)
            yield from self._train(batches, steps, metrics, directory,
                                   checkpoint_every, skip)
        finally:
            if directory:
                directory.unlock()

    def _train(self, batches, steps, metrics, directory, every, skip):
        out = open(metrics, "a") if metrics else None
        start = time.perf_counter()
        taken = skip
        written = None
        ran = False
        try:
            source = iter(batches)
            for _ in range(skip):
                if next(source, _END) is _END:
                    raise KilnError("invalid argument",
                                    "resuming needs the %d batches the first "
                                    "run took from its iterable skipped; this "
                                    "one ended before" % skip)
            while steps is None or self.step < steps:
                # A step's micro-batches, all of them before any runs: the
                # last, short of grad_accum micro-batches, is not run (the
                # accumulators would keep its gradients).
                micro = []
                for batch in source:
                    micro.append(self._feeds(batch))
                    if len(micro) == self.grad_accum:
                        break
                if len(micro) < self.grad_accum:
                    break
                taken += len(micro)
                begin = time.perf_counter()
                losses = []
                for i, feeds in enumerate(micro):
                    entry = ("train_step" if i + 1 == len(micro)
                             else "accumulate_step")
                    outputs = self.session.run(entry, feeds)
                    losses.append(float(outputs["loss"]))
                now = time.perf_counter()
                self.step += 1
                ran = True
                samples = sum(int(np.shape(next(iter(feeds.values())))[0])
                              for feeds in micro)
                self.samples += samples
                # The micro-batches' mean, as kiln-run reports it.
                loss = float(np.float32(sum(losses) / len(losses)))
                record = {"step": self.step, "loss": loss}
                for name in ("lr", "grad_norm", "loss_scale"):
                    if name in outputs:
                        record[name] = float(outputs[name])
                record.update(samples=samples,
                              samples_per_s=samples / max(now - begin, 1e-9),
                              elapsed_s=now - start)
                if out:
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                if directory and every and self.step % every == 0:
                    directory.write(self, taken)
                    written = self.step
                yield record
            # After the last step, unless it was just written (or none ran:
            # a run resumed at its last step).
            if directory and ran and written != self.step:
                directory.write(self, taken)
        finally:
            if out:
                out.close()

    def evaluate(self, batch):
        """eval_step's loss on one batch (no update)."""
        return float(self.session.run("eval_step", self._feeds(batch))["loss"])

    def parameters_bytes(self):
        """Every parameter and optimizer state tensor, as the bytes of a
        safetensors file (what kiln-run --save-params and its checkpoints
        write)."""
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
        return b"".join([struct.pack("<Q", len(text)), text] + blobs)

    def save(self, path):
        """parameters_bytes() written to `path` (through a temporary file
        renamed into place), as a checkpoint's parameters are."""
        path = os.fspath(path)
        write_atomically(os.path.dirname(path) or ".", os.path.basename(path),
                         self.parameters_bytes())

    def load(self, path):
        """Restores a file of save() (or kiln-run's checkpoints and
        --save-params): every tensor it holds replaces the parameter's."""
        with open(path, "rb") as f:
            self.load_bytes(f.read(), path)

    def load_bytes(self, data, what):
        """Restores the parameters from the bytes of a safetensors file;
        `what` names it in errors."""
        def bad(why):
            return KilnError("format error", "%s: %s" % (what, why))
        if len(data) < 8:
            raise bad("too short for a safetensors file")
        (length,) = struct.unpack_from("<Q", data)
        try:
            header = json.loads(data[8:8 + length])
        except ValueError:
            raise bad("the safetensors header is not JSON") from None
        base = 8 + length
        by_name = {p.name: p for p in self.bundle.parameters}
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            if name not in by_name:
                raise KilnError("not found",
                                "%s: the bundle has no parameter '%s'"
                                % (what, name))
            begin, end = entry["data_offsets"]
            info = by_name[name]
            if base + end > len(data):
                raise bad("tensor '%s' runs past the end of the file" % name)
            array = np.frombuffer(data[base + begin:base + end],
                                  info.dtype).reshape(info.shape)
            self.session.set_parameter(name, array)


_END = object()


def _truncate_metrics(path, step):
    """Drops the records of steps after `step` from a metrics file, as
    kiln-run --resume does."""
    kept = []
    with open(path) as f:
        for line in f:
            try:
                if json.loads(line).get("step", 0) > step:
                    continue
            except ValueError:
                pass
            kept.append(line)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(kept)
    os.replace(tmp, path)
