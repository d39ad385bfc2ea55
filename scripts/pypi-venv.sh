#!/usr/bin/env bash
# Creates (once) and caches the virtual environment with today's PyTorch,
# onnx and onnxscript from PyPI (and TensorBoard, whose reader checks
# kiln-run's event files; pytest and setuptools, for the Python package), which the tests and benchmarks that compare
# Kiln with the current release of each peer use. Prints the environment's
# python on stdout; everything else goes to stderr.
#
# Idempotent: a second call with the same package list only prints the path.
# The environment lives outside the checkout, so clean clones share it.
#
# Environment:
#   KILN_PYPI_VENV  where the environment lives
#                   (default: ${XDG_CACHE_HOME:-~/.cache}/kiln/pypi-venv)
#   KILN_PYPI_OFFLINE=1  do not install: fail if the environment is not there
set -euo pipefail

venv=${KILN_PYPI_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/pypi-venv}
# The packages, and the newest releases they were checked with. Versions are
# lower bounds: the point is today's release, not a pinned old one.
packages=(
  "torch>=2.9"
  "onnx>=1.19"
  "onnxscript>=0.5"
  "numpy>=2.0"
  "ml_dtypes>=0.5"
  "tensorboard>=2.18"
  "pytest>=8"
  "setuptools>=61"
)
stamp="$venv/.kiln-packages"
wanted=$(printf '%s\n' "${packages[@]}")

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
if [[ "${KILN_PYPI_OFFLINE:-0}" == 1 ]]; then
  echo "pypi-venv: error: no environment at $venv and KILN_PYPI_OFFLINE=1" >&2
  exit 1
fi

# The system python (Debian's), whose venv module is known to be there.
python=/usr/bin/python3
if ! "$python" -m venv --help >/dev/null 2>&1; then
  echo "pypi-venv: error: $python has no venv module (apt-get install python3-venv)" >&2
  exit 1
fi
echo "pypi-venv: creating $venv (PyTorch, onnx, onnxscript from PyPI)" >&2
mkdir -p "$(dirname "$venv")"
rm -f "$stamp"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet "${packages[@]}" >&2
"$venv/bin/python" - >&2 <<'EOF'
import onnx, onnxscript, torch
print(f"pypi-venv: torch {torch.__version__}, onnx {onnx.__version__}, "
      f"onnxscript {onnxscript.__version__}")
EOF
echo "$wanted" > "$stamp"
echo "$venv/bin/python"
