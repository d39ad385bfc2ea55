"""Reads a kiln-run --tensorboard directory back with TensorBoard's own
reader and checks it against the run's --metrics records: every record's
framing (length and data CRCs, checked here as well), the scalar tags, the
steps and the values (f32, as the event file stores them).

    check_tensorboard.py DIR METRICS.jsonl
"""
import glob
import json
import struct
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c


def check_framing(path):
    data = open(path, "rb").read()
    at, records = 0, 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        assert length_crc == masked_crc32c(data[at:at + 8]), "length CRC"
        payload = data[at + 12:at + 12 + length]
        (payload_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        assert payload_crc == masked_crc32c(payload), "data CRC"
        at += 16 + length
        records += 1
    return records


def main(directory, metrics_path):
    files = glob.glob(directory + "/events.out.tfevents.*")
    assert len(files) == 1, files
    print("records", check_framing(files[0]))
    accumulator = EventAccumulator(directory)
    accumulator.Reload()
    tags = sorted(accumulator.Tags()["scalars"])
    print("tags", " ".join(tags))
    metrics = [json.loads(line) for line in open(metrics_path)]
    print("steps", " ".join(str(e.step) for e in accumulator.Scalars("loss")))
    for tag in tags:
        got = [e.value for e in accumulator.Scalars(tag)]
        want = [np.float32(m[tag]) for m in metrics]
        if tag == "samples_per_s":
            # Timed separately for each file: positive, and as many.
            assert len(got) == len(want) and min(got) > 0, tag
            continue
        assert got == want, (tag, got, want)
    print("values equal the metrics")


if __name__ == "__main__":
    main(*sys.argv[1:])
