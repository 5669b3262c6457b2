#!/usr/bin/env bash
# System packages the tests need, from Debian's archive, installed only when missing:
# cmake, pkg-config, valgrind (C ABI tests and packaging), golang-go (Go bindings), clang (Swift module check),
# binutils (strip, for the wheel: scripts/build-wheel.sh).
# Rust comes from the machine's rustup toolchain; everything else is fetched by the scripts that need it
# (PyPI, crates.io, npm), pinned and checksummed.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v strip >/dev/null 2>&1 || need+=(binutils)
if ((${#need[@]})); then
  echo "[deps] apt-get install ${need[*]}" >&2
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  apt=(-o DPkg::Lock::Timeout=600)
  $sudo apt-get "${apt[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "[deps] ok: cmake $(cmake --version | head -1 | awk '{print $3}'), go $(go version | awk '{print $3}'), $(clang --version | head -1)" >&2
