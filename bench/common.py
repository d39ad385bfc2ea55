"""Helpers the CPU benchmarks share (forward_latency.py, train_throughput.py):
thread and OpenBLAS set-up, the description of what each side runs on, and
the table printer."""
import ctypes
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The benchmark sizes of the GPT-2- and BERT-style models (issue 3, item 9).
SIZES = dict(d_model=256, heads=4, vocab=1000, layers=4)
LIBBLAS = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
LIBOPENBLAS = "libopenblas.so.0"


def resident_kib():
    """This process's resident set now, in KiB (VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def measure_models(args, measure):
    """measure(name, workdir) for each of args.models, in a scratch
    directory (args.keep instead, which is kept); returns their rows."""
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as scratch:
        workdir = args.keep or scratch
        os.makedirs(workdir, exist_ok=True)
        rows = []
        for name in args.models:
            print("measuring %s ..." % name, file=sys.stderr, flush=True)
            rows.append(measure(name, workdir))
        return rows


def add_common_arguments(parser):
    """The flags both benchmarks take: threads, OpenBLAS core type, trials,
    where the tools are and where to keep the files."""
    parser.add_argument("--threads", type=int,
                        default=len(os.sched_getaffinity(0)),
                        help="threads for each side (default: usable CPUs)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--openblas-coretype", metavar="NAME",
                        default=default_coretype(),
                        help="OpenBLAS kernels for both sides: "
                        "OPENBLAS_CORETYPE and KILN_OPENBLAS_CORETYPE "
                        "(default: the ones Kiln's runtime picks for this "
                        "CPU, so that PyTorch's OpenBLAS gets the same fast "
                        "kernels; 'none' sets neither: the environment's "
                        "OPENBLAS_CORETYPE, if any, for PyTorch, Kiln's "
                        "choice for Kiln)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where kilnc and kiln-run are")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the models, inputs and bundles to DIR "
                        "and keep them")


def default_coretype():
    """What Kiln's runtime picks for its code (runtime/src/cpu/CpuCode.cpp):
    KILN_OPENBLAS_CORETYPE, or the family the CPU's instruction set supports,
    whatever OPENBLAS_CORETYPE the environment sets. OpenBLAS 0.3.21 falls
    back to slow generic kernels on CPUs newer than itself, and a peer using
    OpenBLAS must not be left there."""
    if os.environ.get("KILN_OPENBLAS_CORETYPE"):
        return os.environ["KILN_OPENBLAS_CORETYPE"]
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f
                          if l.startswith("flags")), [])
    except OSError:
        return None
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
        return "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Haswell"
    return None


def thread_environment(args):
    """The variables both sides run under; set in this process before numpy
    or torch load OpenBLAS, and passed to kiln-run."""
    env = {"OMP_NUM_THREADS": str(args.threads),
           "OPENBLAS_NUM_THREADS": str(args.threads)}
    if args.openblas_coretype and args.openblas_coretype != "none":
        env["OPENBLAS_CORETYPE"] = args.openblas_coretype
        env["KILN_OPENBLAS_CORETYPE"] = args.openblas_coretype
    return env


#===-----------------------------------------------------------------------===#
# What each side runs on.
#===-----------------------------------------------------------------------===#

def openblas_config(library):
    """openblas_get_config() and openblas_get_num_threads() of library, as
    loaded here (it reads OPENBLAS_CORETYPE and the thread variables)."""
    try:
        blas = ctypes.CDLL(library)
        blas.openblas_get_config.restype = ctypes.c_char_p
        return "%s, %d threads" % (blas.openblas_get_config().decode(),
                                   blas.openblas_get_num_threads())
    except (OSError, AttributeError) as error:
        return "not OpenBLAS or not loadable (%s)" % error


def blas_alternative():
    """What Debian's libblas.so.3 alternative points to, by
    update-alternatives."""
    try:
        text = subprocess.run(
            ["update-alternatives", "--display",
             "libblas.so.3-x86_64-linux-gnu"], capture_output=True,
            text=True, check=True).stdout
        match = re.search(r"link currently points to (\S+)", text)
        return match.group(1) if match else text.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as error:
        return "update-alternatives failed (%s)" % error


def loaded_libraries(pattern):
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line}
    return sorted(path for path in paths
                  if re.search(pattern, os.path.basename(path)))


def cpu_name():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def print_setup(args, torch):
    """The host, the load, the threads, and the BLAS each side uses."""
    print("host: %s, %d usable CPUs (nproc), load average %.2f at start"
          % (cpu_name(), len(os.sched_getaffinity(0)), os.getloadavg()[0]))
    print("threads: %d each side; OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s "
          "OPENBLAS_CORETYPE=%s KILN_OPENBLAS_CORETYPE=%s" % (
              args.threads, os.environ["OMP_NUM_THREADS"],
              os.environ["OPENBLAS_NUM_THREADS"],
              os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
              os.environ.get("KILN_OPENBLAS_CORETYPE", "(unset)")))
    config = torch.__config__.show()
    blas_info = re.search(r"BLAS_INFO=([^,]+)", config)
    print("PyTorch %s: torch.get_num_threads() %d, interop %d, "
          "BLAS_INFO=%s, %s" % (
              torch.__version__, torch.get_num_threads(),
              torch.get_num_interop_threads(),
              blas_info.group(1) if blas_info else "?",
              "oneDNN (MKL-DNN) on" if torch.backends.mkldnn.is_available()
              else "oneDNN off"))
    print("  libblas.so.3 alternative: %s" % blas_alternative())
    loaded = [os.path.realpath(path)
              for path in loaded_libraries(r"blas|mkl")]
    print("  BLAS libraries loaded with torch: %s"
          % (", ".join(loaded) or "none"))
    print("  libblas.so.3: %s" % openblas_config(LIBBLAS))
    print("Kiln: kernels link %s -> %s" % (
        LIBOPENBLAS, os.path.realpath(
            "/usr/lib/x86_64-linux-gnu/" + LIBOPENBLAS)))
    print("  %s: %s" % (LIBOPENBLAS, openblas_config(LIBOPENBLAS)))


def print_columns(table):
    """Rows of strings, the first the header: the first column left-aligned,
    the others right-aligned."""
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        print("  ".join(cell.rjust(width) if i else cell.ljust(width)
                        for i, (cell, width) in enumerate(zip(line, widths))))


def ms(seconds):
    return "%.3f" % (seconds * 1e3) if seconds is not None else "-"
