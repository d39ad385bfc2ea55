"""kilnc --memory-budget and --max-batch-for on one model.

    check_memory_budget.py MODEL.onnx BATCH OUT.kiln [kilnc flags...]

kilnc (from PATH) with the given training flags:
- --memory-budget=1 fails, naming the step's memory as compiled (P) and with
  cheap activations recomputed (R < P), and R as the smallest budget;
- --memory-budget=R compiles, and --report=memory shows a session total of
  R; R - 1 fails; --memory-budget=P compiles without recomputing (total P);
- --max-batch-for=P: the batch it names fits in P (its line says so, and
  compiling that batch reports the same total), the next batch does not,
  and the batch is at least BATCH (which needs P).
OUT.kiln is the bundle compiled with --memory-budget=R, for a parity test.
"""
import re
import subprocess
import sys


def kilnc(*args):
    return subprocess.run(["kilnc", *args], capture_output=True, text=True)


def session_total(report):
    return int(re.search(r"^  session total +(\d+)", report, re.M).group(1))


def main(onnx, batch, out, *flags):
    base = [onnx, *flags]
    at_batch = base + ["--batch-size=" + batch]

    small = kilnc(*at_batch, "--memory-budget=1", "-o", out)
    assert small.returncode == 1, small
    found = re.search(r"the step needs (\d+) bytes, (\d+) with cheap "
                      r"activations recomputed; --memory-budget=1 is below "
                      r"the smallest budget reachable, (\d+) bytes",
                      small.stderr)
    assert found, small.stderr
    plain, recomputed, smallest = map(int, found.groups())
    assert recomputed < plain and smallest == recomputed, found.groups()

    fitted = kilnc(*at_batch, "--memory-budget=%d" % recomputed,
                   "--report=memory", "-o", out)
    assert fitted.returncode == 0, fitted.stderr
    assert session_total(fitted.stdout) == recomputed, fitted.stdout

    below = kilnc(*at_batch, "--memory-budget=%d" % (recomputed - 1),
                  "-o", out + ".below")
    assert below.returncode == 1 and "smallest budget reachable, %d bytes" \
        % recomputed in below.stderr, below

    roomy = kilnc(*at_batch, "--memory-budget=%d" % plain, "--report=memory",
                  "-o", out + ".roomy")
    assert roomy.returncode == 0, roomy.stderr
    assert session_total(roomy.stdout) == plain, roomy.stdout

    search = kilnc(*base, "--max-batch-for=%d" % plain)
    assert search.returncode == 0, search.stderr
    lines = re.findall(r"^  batch (\d+): (\d+) bytes(?:, (\d+) with cheap "
                       r"activations recomputed)?", search.stdout, re.M)
    best = int(re.search(r"fits in %d bytes: (\d+)" % plain,
                         search.stdout).group(1))
    assert len(lines) == 2 and int(lines[0][0]) == best \
        and int(lines[1][0]) == best + 1, search.stdout
    fits = [min(int(b) for b in line[1:] if b) for line in lines]
    assert fits[0] <= plain < fits[1], search.stdout
    assert best >= int(batch), search.stdout
    check = kilnc(*base, "--batch-size=%d" % best, "--report=memory",
                  "--memory-budget=%d" % plain, "-o", out + ".best")
    assert check.returncode == 0, check.stderr
    assert session_total(check.stdout) == fits[0], (check.stdout, fits)
    print("plain %d, recomputed %d, largest batch for %d: %d"
          % (plain, recomputed, plain, best))


if __name__ == "__main__":
    main(*sys.argv[1:])
