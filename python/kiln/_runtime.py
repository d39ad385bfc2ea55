"""ctypes bindings of libkilnrt's C API: bundles, sessions, runs."""
import ctypes
import ctypes.util
import os
from dataclasses import dataclass

import numpy as np


class KilnError(RuntimeError):
    """A failed C API call: `status` is kiln_status_name of its status ("io
    error", "invalid argument", "not found", ...), the message
    the runtime's (kiln_status_message)."""

    def __init__(self, status, message):
        super().__init__("%s: %s" % (status, message))
        self.status = status
        self.message = message


# kiln_element_type_t <-> NumPy. The narrow types and bf16 have no NumPy
# dtype: they travel as raw bytes (np.void), as kiln-run's .npz files do.
_DTYPES = {1: np.float32, 2: np.float16, 4: np.float64, 5: np.int64,
           6: np.int32, 7: np.int8, 8: np.bool_, 9: np.uint8, 10: np.uint16,
           11: np.uint32, 12: np.uint64, 13: np.int16}
_RAW = {3: "V2", **{t: "V1" for t in range(14, 24)}}


def _dtype(element_type):
    if element_type in _DTYPES:
        return np.dtype(_DTYPES[element_type])
    return np.dtype(_RAW[element_type])


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("element_type", ctypes.c_int),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("data", ctypes.c_void_p), ("byte_size", ctypes.c_size_t)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("element_type", ctypes.c_int),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("byte_size", ctypes.c_size_t)]


class _BundleInfo(ctypes.Structure):
    _fields_ = [("producer", ctypes.c_char_p), ("model_name", ctypes.c_char_p),
                ("entry_point_count", ctypes.c_size_t),
                ("target_count", ctypes.c_size_t),
                ("parameter_count", ctypes.c_size_t),
                ("parameter_bytes", ctypes.c_uint64),
                ("metadata_count", ctypes.c_size_t)]


class _EntryInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("input_count", ctypes.c_size_t),
                ("output_count", ctypes.c_size_t),
                ("command_count", ctypes.c_size_t),
                ("arena_bytes", ctypes.c_uint64)]


class _ParameterInfo(ctypes.Structure):
    _fields_ = [("tensor", _TensorInfo), ("trainable", ctypes.c_int),
                ("shard_ranks", ctypes.c_int), ("fixed", ctypes.c_int)]


def library_path():
    """Where libkilnrt is looked for: $KILN_LIBRARY, $KILN_PREFIX/lib, the
    loader's search path."""
    if os.environ.get("KILN_LIBRARY"):
        return os.environ["KILN_LIBRARY"]
    if os.environ.get("KILN_PREFIX"):
        return os.path.join(os.environ["KILN_PREFIX"], "lib", "libkilnrt.so")
    return ctypes.util.find_library("kilnrt") or "libkilnrt.so"


_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as error:
        raise KilnError("not found",
                        "cannot load the Kiln runtime %s (%s); set KILN_LIBRARY "
                        "to libkilnrt.so or KILN_PREFIX to Kiln's install "
                        "prefix" % (path, error)) from None
    p = ctypes.POINTER
    sigs = {
        "kiln_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "kiln_status_message": (ctypes.c_char_p, []),
        "kiln_bundle_open": (ctypes.c_int, [ctypes.c_char_p, p(ctypes.c_void_p)]),
        "kiln_bundle_release": (None, [ctypes.c_void_p]),
        "kiln_bundle_get_info": (ctypes.c_int, [ctypes.c_void_p, p(_BundleInfo)]),
        "kiln_bundle_get_entry_point": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, p(_EntryInfo)]),
        "kiln_bundle_get_entry_point_input": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                           p(_TensorInfo)]),
        "kiln_bundle_get_entry_point_output": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                           p(_TensorInfo)]),
        "kiln_bundle_get_parameter": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, p(_ParameterInfo)]),
        "kiln_bundle_get_fingerprint": (
            ctypes.c_int, [ctypes.c_void_p, p(ctypes.c_uint64)]),
        "kiln_bundle_get_metadata": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p,
                           p(ctypes.c_char_p)]),
        "kiln_session_create": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, p(ctypes.c_void_p)]),
        "kiln_session_release": (None, [ctypes.c_void_p]),
        "kiln_session_run": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, p(_Tensor),
                           ctypes.c_size_t, p(_Tensor), ctypes.c_size_t]),
        "kiln_session_get_parameter": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                           ctypes.c_size_t]),
        "kiln_session_set_parameter": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                           ctypes.c_size_t]),
    }
    for name, (restype, argtypes) in sigs.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    _lib = lib
    return lib


# kiln_status_t KILN_STATUS_NOT_FOUND (kiln/runtime.h).
_NOT_FOUND = 4


def _check(status):
    if status != 0:
        lib = _library()
        raise KilnError(lib.kiln_status_name(status).decode(),
                        lib.kiln_status_message().decode())


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    shape: tuple
    element_type: int


def _info(raw):
    shape = tuple(raw.shape[i] for i in range(raw.rank))
    return TensorInfo(raw.name.decode(), _dtype(raw.element_type), shape,
                      raw.element_type)


class Bundle:
    """An opened .kiln bundle: its entry points and parameters."""

    def __init__(self, path):
        lib = _library()
        handle = ctypes.c_void_p()
        _check(lib.kiln_bundle_open(os.fsencode(path), ctypes.byref(handle)))
        self._handle = handle
        self.path = os.fspath(path)
        info = _BundleInfo()
        _check(lib.kiln_bundle_get_info(handle, ctypes.byref(info)))
        self.producer = info.producer.decode()
        self.entry_points = {}
        for index in range(info.entry_point_count):
            entry = _EntryInfo()
            _check(lib.kiln_bundle_get_entry_point(handle, index,
                                                   ctypes.byref(entry)))
            inputs, outputs = [], []
            for i in range(entry.input_count):
                raw = _TensorInfo()
                _check(lib.kiln_bundle_get_entry_point_input(
                    handle, index, i, ctypes.byref(raw)))
                inputs.append(_info(raw))
            for i in range(entry.output_count):
                raw = _TensorInfo()
                _check(lib.kiln_bundle_get_entry_point_output(
                    handle, index, i, ctypes.byref(raw)))
                outputs.append(_info(raw))
            self.entry_points[entry.name.decode()] = (inputs, outputs)
        self.parameters = []
        for index in range(info.parameter_count):
            raw = _ParameterInfo()
            _check(lib.kiln_bundle_get_parameter(handle, index,
                                                 ctypes.byref(raw)))
            self.parameters.append(_info(raw.tensor))
        fingerprint = ctypes.c_uint64()
        _check(lib.kiln_bundle_get_fingerprint(handle,
                                               ctypes.byref(fingerprint)))
        # Equal for byte-identical bundles: checkpoints record it.
        self.fingerprint = fingerprint.value

    def metadata(self, key):
        """The bundle's metadata entry `key` (e.g. "training.grad_accum"),
        or None where the bundle has none (the key's default)."""
        value = ctypes.c_char_p()
        status = _library().kiln_bundle_get_metadata(
            self._handle, key.encode(), ctypes.byref(value))
        if status == _NOT_FOUND:
            return None
        _check(status)
        return value.value.decode()

    def inputs(self, entry):
        return self._entry(entry)[0]

    def outputs(self, entry):
        return self._entry(entry)[1]

    def _entry(self, entry):
        if entry not in self.entry_points:
            raise KilnError("not found",
                            "bundle %s has no entry point '%s' (it has %s)"
                            % (self.path, entry, ", ".join(self.entry_points)))
        return self.entry_points[entry]

    def __del__(self):
        if getattr(self, "_handle", None) and _lib is not None:
            _lib.kiln_bundle_release(self._handle)
            self._handle = None


def _as_array(value, info):
    """A C-contiguous NumPy array of `value` (a NumPy array, a CPU PyTorch
    tensor: without a copy when it already is one), as `info` wants it."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        value = value.numpy()
    array = np.ascontiguousarray(value)
    if info.dtype.kind == "V" and array.dtype.itemsize == info.dtype.itemsize:
        array = array.view(info.dtype)
    return array


class Session:
    """A bundle ready to run on one target ("cpu" by default, or "cuda")."""

    def __init__(self, bundle, target=None):
        if not isinstance(bundle, Bundle):
            bundle = Bundle(bundle)
        self.bundle = bundle
        lib = _library()
        handle = ctypes.c_void_p()
        _check(lib.kiln_session_create(
            bundle._handle, target.encode() if target else None,
            ctypes.byref(handle)))
        self._handle = handle

    def run(self, entry, inputs=None, **named):
        """Runs `entry` on the inputs (a dict, or keywords) and returns its
        outputs as a dict of NumPy arrays (the index checks left out)."""
        values = dict(inputs or {}, **named)
        input_infos, output_infos = self.bundle._entry(entry)
        arrays, tensors = [], []
        shapes = []
        for info in input_infos:
            if info.name not in values:
                raise KilnError("invalid argument",
                                "entry point '%s' needs input '%s'"
                                % (entry, info.name))
            array = _as_array(values.pop(info.name), info)
            arrays.append(array)
            shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            shapes.append(shape)
            tensors.append(_Tensor(info.name.encode(), _element_type(array, info),
                                   array.ndim, shape,
                                   array.ctypes.data_as(ctypes.c_void_p),
                                   array.nbytes))
        if values:
            raise KilnError("invalid argument",
                            "entry point '%s' has no input %s"
                            % (entry, ", ".join("'%s'" % k for k in values)))
        outputs, out_tensors = {}, []
        for info in output_infos:
            array = np.empty(info.shape, info.dtype)
            outputs[info.name] = array
            shape = (ctypes.c_int64 * max(len(info.shape), 1))(*info.shape)
            shapes.append(shape)
            out_tensors.append(_Tensor(info.name.encode(), info.element_type,
                                       len(info.shape), shape,
                                       array.ctypes.data_as(ctypes.c_void_p),
                                       array.nbytes))
        lib = _library()
        _check(lib.kiln_session_run(
            self._handle, entry.encode(),
            (_Tensor * max(len(tensors), 1))(*tensors), len(tensors),
            (_Tensor * max(len(out_tensors), 1))(*out_tensors),
            len(out_tensors)))
        return {name: value for name, value in outputs.items()
                if not name.startswith("kiln.index_check")}

    def _parameter(self, name):
        info = next((p for p in self.bundle.parameters if p.name == name), None)
        if info is None:
            raise KilnError("not found", "no parameter '%s'" % name)
        return info

    def get_parameter(self, name):
        info = self._parameter(name)
        array = np.empty(info.shape, info.dtype)
        _check(_library().kiln_session_get_parameter(
            self._handle, name.encode(), array.ctypes.data_as(ctypes.c_void_p),
            array.nbytes))
        return array

    def set_parameter(self, name, value):
        info = self._parameter(name)
        array = _as_array(value, info)
        _check(_library().kiln_session_set_parameter(
            self._handle, name.encode(), array.ctypes.data_as(ctypes.c_void_p),
            array.nbytes))

    def __del__(self):
        if getattr(self, "_handle", None) and _lib is not None:
            _lib.kiln_session_release(self._handle)
            self._handle = None


def _element_type(array, info):
    """The element type of `array`, which the runtime checks against the
    input's (a mismatch is its error, naming both)."""
    if array.dtype.kind == "V":
        return info.element_type
    for element_type, dtype in _DTYPES.items():
        if array.dtype == np.dtype(dtype):
            return element_type
    raise KilnError("invalid argument",
                    "input '%s' has dtype %s, which Kiln does not take"
                    % (info.name, array.dtype))
