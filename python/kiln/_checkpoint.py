"""Checkpoint directories of the Python trainer: the layout, atomicity, lock
and pruning of kiln-run --checkpoint-dir (docs/runtime.md, Checkpoints), with
a data cursor that counts the batches taken from the iterable."""
import fcntl
import hashlib
import json
import os
import re
import socket

from ._runtime import KilnError

FORMAT = "kiln python checkpoint"
FORMAT_VERSION = 1
_NAME = re.compile(r"^step-(\d+)\.(json|safetensors)$")


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(directory, name, data):
    """Writes `data` to DIR/name through a temporary file, flushed to disk,
    renamed into place, the directory flushed."""
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(directory)


class CheckpointDir:
    """DIR as a run writes it: DIR/step-N.safetensors (every parameter and
    optimizer state), DIR/step-N.json (the sidecar), DIR/latest (the newest
    complete sidecar's name), DIR/kiln-run.lock held while a run uses it."""

    def __init__(self, path, keep=None):
        if keep is not None and keep < 1:
            raise KilnError("invalid argument",
                            "keep_checkpoints must be at least 1, not %r"
                            % (keep,))
        self.path = os.fspath(path)
        self.keep = keep
        self._lock = None

    def lock(self):
        """Creates DIR if needed and takes its lock, as kiln-run does: a
        second run (kiln-run's or a trainer's) on DIR is refused."""
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as error:
            raise KilnError("io error", "checkpoint_dir %s: cannot create: %s"
                            % (self.path, error.strerror)) from None
        if not os.path.isdir(self.path):
            raise KilnError("io error", "checkpoint_dir %s is not a directory"
                            % self.path)
        fd = os.open(os.path.join(self.path, "kiln-run.lock"),
                     os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip()
            os.close(fd)
            raise KilnError("io error",
                            "checkpoint_dir %s is in use by another run (%s)"
                            % (self.path, holder or "its lock is held")) \
                from None
        text = ("kiln python trainer process %d on %s\n"
                % (os.getpid(), socket.gethostname())).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        self._lock = fd

    def unlock(self):
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def steps(self):
        """The steps of the checkpoint files in DIR, oldest first."""
        found = set()
        for name in os.listdir(self.path):
            match = _NAME.match(name)
            if match:
                found.add(int(match.group(1)))
        return sorted(found)

    def has_checkpoints(self):
        return bool(self.steps()) or os.path.exists(
            os.path.join(self.path, "latest"))

    def write(self, trainer, batches):
        """Writes the checkpoint of `trainer` at its step, `batches` taken
        from the iterable so far; then prunes to the `keep` newest."""
        step = trainer.step
        parameters = "step-%d.safetensors" % step
        data = trainer.parameters_bytes()
        write_atomically(self.path, parameters, data)
        sidecar = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "step": step,
            "bundle": trainer.bundle.path,
            "bundle_fingerprint": "0x%016x" % trainer.bundle.fingerprint,
            "parameters": parameters,
            "parameters_bytes": len(data),
            "parameters_sha256": hashlib.sha256(data).hexdigest(),
            "data": {"batches": batches, "samples": trainer.samples},
        }
        name = "step-%d.json" % step
        write_atomically(self.path, name,
                          (json.dumps(sidecar, indent=2) + "\n").encode())
        write_atomically(self.path, "latest", (name + "\n").encode())
        if self.keep is not None:
            for old in self.steps()[:-self.keep]:
                if old == step:
                    continue
                for suffix in ("json", "safetensors"):
                    try:
                        os.remove(os.path.join(self.path,
                                               "step-%d.%s" % (old, suffix)))
                    except FileNotFoundError:
                        pass
            _fsync_dir(self.path)

    def read_latest(self, bundle):
        """The sidecar DIR/latest names and its parameters file's bytes,
        checked against the file and `bundle`."""
        latest = os.path.join(self.path, "latest")
        try:
            with open(latest) as f:
                name = f.read().strip()
        except OSError as error:
            raise KilnError("not found",
                            "cannot resume: %s: %s" % (latest, error.strerror)) \
                from None
        where = os.path.join(self.path, name)

        def refuse(status, why):
            raise KilnError(status, "checkpoint %s %s" % (where, why))

        if not _NAME.match(name) or not name.endswith(".json"):
            refuse("format error", "is not a step-N.json name (DIR/latest)")
        try:
            with open(where) as f:
                sidecar = json.load(f)
        except (OSError, ValueError) as error:
            refuse("format error", "cannot be read: %s" % error)
        if not isinstance(sidecar, dict):
            refuse("format error", "is not a JSON object")
        fmt = sidecar.get("format")
        if fmt == "kiln-run checkpoint":
            refuse("unsupported",
                   "was written by kiln-run, whose data cursor is a position in "
                   "its --data file: resume it with kiln-run --resume, or load "
                   "its parameters with Trainer.load('%s')"
                   % os.path.join(self.path, str(sidecar.get("parameters"))))
        if fmt != FORMAT or sidecar.get("format_version") != FORMAT_VERSION:
            refuse("format error", "is format %r version %r, expected %r "
                   "version %d" % (fmt, sidecar.get("format_version"), FORMAT,
                                   FORMAT_VERSION))
        try:
            step = int(sidecar["step"])
            fingerprint = int(sidecar["bundle_fingerprint"], 16)
            parameters = str(sidecar["parameters"])
            size = int(sidecar["parameters_bytes"])
            digest = str(sidecar["parameters_sha256"])
            taken = int(sidecar["data"]["batches"])
            samples = int(sidecar["data"]["samples"])
        except (KeyError, TypeError, ValueError) as error:
            refuse("format error", "lacks or has a malformed %s" % error)
        if fingerprint != bundle.fingerprint:
            refuse("invalid argument",
                   "was written for bundle %s, fingerprint 0x%016x; %s has "
                   "fingerprint 0x%016x" % (sidecar.get("bundle"), fingerprint,
                                            bundle.path, bundle.fingerprint))
        if os.path.basename(parameters) != parameters:
            refuse("format error", "names parameters outside its directory")
        try:
            with open(os.path.join(self.path, parameters), "rb") as f:
                data = f.read()
        except OSError as error:
            refuse("io error", "names %s, which cannot be read: %s"
                   % (parameters, error.strerror))
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            refuse("format error", "does not match its parameters file %s "
                   "(size or SHA-256 differ: the file is damaged)" % parameters)
        return {"step": step, "batches": taken, "samples": samples,
                "parameters": data}
