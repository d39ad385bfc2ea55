"""Prints the OpenBLAS kernels the CPU benchmarks give each side
(bench/common.py), under the environment this process has."""
import argparse
import os
import sys

sys.path.insert(0, sys.argv[1])
import common  # noqa: E402

parser = argparse.ArgumentParser()
common.add_common_arguments(parser)
args = parser.parse_args(sys.argv[2:])
print("default:", common.default_coretype())
environment = common.thread_environment(args)
print("OPENBLAS_CORETYPE:", environment.get("OPENBLAS_CORETYPE", "(unset)"))
print("KILN_OPENBLAS_CORETYPE:",
      environment.get("KILN_OPENBLAS_CORETYPE", "(unset)"))
