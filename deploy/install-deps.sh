#!/usr/bin/env bash
# Installs every Debian package leap's build and tests need. Idempotent, non-interactive.
# Usage: deploy/install-deps.sh    (needs root or sudo)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libzmq3-dev cppzmq-dev capnproto libcapnp-dev
  libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libdlpack-dev
  libsodium-dev libseccomp-dev
  # leap serve's HTTP server; its Python client (requests) and the client's tests (pytest)
  libcpp-httplib-dev python3-requests python3-pytest
  # the language-model engine's tokenizer: Unicode regexes (PCRE2) and NFC (utf8proc)
  libpcre2-dev libutf8proc-dev
  # the experience graph memory's storage
  libsqlite3-dev
  # the sandbox of candidate runners and compilers (namespaces, read-only binds)
  bubblewrap
  libtorch-dev
  # LibTorch's CPU matrix products through OpenBLAS (OpenMP, like LibTorch) instead of the
  # reference BLAS libblas3 provides: the language model on the CPU is 4x faster
  libopenblas0-openmp
  libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin
  python3
  # the Python client's package is built as pip builds it (PEP 517 backend), in a test
  python3-setuptools python3-wheel
  # `leap tasks import kernelbench`: the PyTorch that matches libtorch-dev (1.13 both); also the
  # Python runner's, and what KernelBench-format answers' load_inline extensions build against
  # (pybind11 and Python's headers)
  python3-torch pybind11-dev python3-dev
  # deploy/python-env.sh's virtual environment (Triton from PyPI beside Debian's PyTorch)
  python3-venv
  # leap report's test: the page loaded in headless Chromium
  chromium
  # the layout test's formatter and script checks (.clang-format on the judge, shellcheck)
  clang-format shellcheck
  # the local single-node Slurm of slurm/local-slurm.sh (tests; a workstation's own queue)
  slurmctld slurmd slurm-client munge
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
