#!/usr/bin/env bash
# Installs what Schedule Explorer needs into ./.venv (idempotent, quick when up to date).
# Usage: scripts/setup.sh [--browser]   (--browser also installs Debian's Chromium for e2e tests)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PY" -m venv --system-site-packages .venv
fi
STAMP=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$STAMP" ]; then
    echo "setup: installing the package, its test dependencies and the CUDA 12 compilers"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,gpu]'
    touch "$STAMP"
fi
if ! command -v clang >/dev/null 2>&1; then
    # tvm.contrib.clang.create_llvm: the course's C kernels compiled to LLVM IR
    echo "setup: installing Debian's clang"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang >/dev/null
fi
if [ "${1:-}" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then
    echo "setup: installing Debian's chromium for the browser tests"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if [ "${1:-}" = "--browser" ] && { ! command -v qemu-aarch64 >/dev/null 2>&1 \
        || ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
        || ! command -v ld.lld >/dev/null 2>&1 || ! command -v wasm-ld >/dev/null 2>&1 \
        || [ ! -d /usr/aarch64-linux-gnu/lib ]; }; then
    # the deployment tests: aarch64 libraries cross-linked and run under qemu-user,
    # wasm32 linked with wasm-ld
    echo "setup: installing Debian's qemu-user, lld and the aarch64 cross toolchain"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user lld \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
fi
