"""Reading and writing the files Kiln's tools exchange, for the tests: .npz
archives written member by member, and safetensors files read without the
safetensors package."""
import json
import struct
import zipfile

import numpy as np


def save_npz(path, arrays):
    """Writes {name: array} as an .npz. Not np.savez: its keyword handling
    swallows entries named 'like' or 'file'; and np.ascontiguousarray would
    turn a 0-d array into a 1-d one."""
    with zipfile.ZipFile(path, "w") as archive:
        for key, value in arrays.items():
            with archive.open(key + ".npy", "w") as member:
                np.lib.format.write_array(
                    member, np.array(value, order="C", copy=True))


def load_npz(path):
    with np.load(path) as archive:
        return {key: archive[key] for key in archive.files}


SAFETENSORS_DTYPES = {
    "F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64,
    "I32": np.int32, "I16": np.int16, "I8": np.int8, "U64": np.uint64,
    "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}


def read_safetensors(path):
    """A safetensors file (kiln-run --save-params, checkpoints) as
    {name: array}."""
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    arrays = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if entry["dtype"] == "BF16":
            # NumPy has no bf16: its bits are the top half of an f32's.
            bits = np.frombuffer(data[begin:end], dtype=np.uint16)
            array = (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(
                data[begin:end], dtype=SAFETENSORS_DTYPES[entry["dtype"]])
        arrays[name] = array.reshape(entry["shape"])
    return arrays
