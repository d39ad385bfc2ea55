"""Runs bench/gpu_train.py's profile parser on profile-sample.txt (see
gpu-train-profile.test) and prints what it read."""
import json
import sys

sys.path.insert(0, sys.argv[1])
from gpu_train import parse_profile, profile_line, profile_lines  # noqa: E402

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
