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
config.substitutions.append(("%onnx_testdata", config.onnx_testdata_dir))

# Python test helpers (ONNX model builders) live next to the tests.
config.environment["PYTHONPATH"] = os.path.join(config.kiln_src_root, "test", "lib")

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
