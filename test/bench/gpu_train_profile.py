"""Runs bench/gpu_train.py's profile parser on profile-sample.txt (see
gpu-train-profile.test) and prints what it read; with a third argument,
kilnc's cost report (cost-sample.txt), what it read of that and the lines
that set the prediction beside the measurement."""
import json
import sys

sys.path.insert(0, sys.argv[1])
from gpu_train import (cost_gpu, model_line, model_lines,  # noqa: E402
                       parse_cost_report, parse_profile, profile_line,
                       profile_lines)

with open(sys.argv[2]) as f:
    entries = parse_profile(f.read())
for entry in entries:
    print(json.dumps(entry, sort_keys=True))
for entry in entries:
    print("line: " + profile_line("gpt2-bf16", entry))
rows = [dict(model="gpt2", precision="bf16", profile=dict(entries=entries)),
        dict(model="bert128", precision="bf16",
             profile=dict(error="kiln-run failed (exit 1): no GPU")),
        dict(model="bert512", precision="bf16")]
for line in profile_lines(rows):
    print("profile_lines: " + line)

if len(sys.argv) > 3:
    with open(sys.argv[3]) as f:
        reports = parse_cost_report(f.read())
    for gpu, report in sorted(reports.items()):
        for name, prediction in sorted(report.items()):
            print("cost %s %s: %s" % (gpu, name,
                                      json.dumps(prediction, sort_keys=True)))
    for device in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "Tesla V100-SXM2"):
        print("gpu %s: %s" % (device, cost_gpu(device)))
    rows[0]["profile"]["cost"] = dict(gpu="H200", entries=reports["H200"])
    rows[1]["profile"]["cost"] = dict(gpu=None, entries={})
    for line in model_lines(rows):
        print("model_lines: " + line)
