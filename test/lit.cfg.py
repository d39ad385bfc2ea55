# lit configuration of Kiln's FileCheck tests.
import os
import lit.formats

config.name = "Kiln"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".test", ".py"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "models", "CMakeLists.txt", "unit", "lib", "onnx", "cuda"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

# Tools first from the build, then LLVM's FileCheck, not, count.
config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%kiln_src", config.kiln_src_root))

import platform
if platform.machine() in ("x86_64", "AMD64"):
    config.available_features.add("x86_64")
config.substitutions.append(("%onnx_testdata", config.onnx_testdata_dir))

# Python test helpers (ONNX model builders) live next to the tests.
config.environment["PYTHONPATH"] = os.path.join(config.kiln_src_root, "test", "lib")

# Today's PyTorch from PyPI, in the virtual environment scripts/pypi-venv.sh
# makes (the README's test command makes it): the tests that export with it
# need it, and say they are unsupported where it is missing.
pypi_venv = os.environ.get("KILN_PYPI_VENV") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
    "kiln", "pypi-venv")
pypi_python = os.path.join(pypi_venv, "bin", "python")
if os.path.exists(os.path.join(pypi_venv, ".kiln-packages")) and \
        os.access(pypi_python, os.X_OK):
    config.available_features.add("pypi-torch")
    config.substitutions.append(("%pypi_python", pypi_python))
else:
    lit_config.note("no PyPI PyTorch environment at %s (scripts/pypi-venv.sh "
                    "makes it): the tests that need it are unsupported" % pypi_venv)

if config.kiln_fuzzers:
    config.available_features.add("fuzzer")
if os.path.isdir(config.onnx_testdata_dir):
    config.available_features.add("onnx-testdata")
# Kiln was built with the CUDA toolkit: kilnc can assemble cubins (no GPU
# needed).
if config.kiln_cuda:
    config.available_features.add("cuda-toolkit")
# OpenMPI's launcher, for the multi-rank tests: two ranks on any machine
# (--oversubscribe), unpinned, and as root where the tests run as root.
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    mpirun = "mpirun --oversubscribe --bind-to none"
    if os.geteuid() == 0:
        mpirun += " --allow-run-as-root"
    config.substitutions.append(("%mpirun", mpirun))
