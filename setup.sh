#!/usr/bin/env bash
# FlashDesk in one command on Debian 12: installs the missing packages, builds, then either starts
# the app with the bundled demo model (`./setup.sh run`) or runs the whole test suite
# (`./setup.sh test`, exits non-zero on any failure): every ctest test (C++ unit, golden,
# integration, storage, UI and API server tests, the last with curl and the openai npm client, which
# `npm ci` fetches into the build tree) and the three Python suites (tests/tools, the oracle's
# tools/flashdesk_ref/tests and the trainer's tools/train/tests, the last two on Debian's torch),
# then the .deb package test (tests/packaging/package_test.sh: installs it with apt, hence root).
# Idempotent: a second run skips what is done.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

mode="${1:-run}"
shift || true
case "$mode" in run|test|build) ;; *) echo "usage: $0 run|test|build" >&2; exit 2 ;; esac

# Every Debian package the build, the app and the tests need (CI starts from a clean machine).
PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  nlohmann-json3-dev libcxxopts-dev libgtest-dev libgmock-dev
  qt6-base-dev libsqlite3-dev libsqlitecpp-dev libxxhash-dev liburing-dev
  libturbojpeg0-dev libwebp-dev libstb-dev libicu-dev libcpp-httplib-dev curl
  xvfb xauth fonts-wqy-microhei
  lintian desktop-file-utils
  python3 python3-numpy python3-torch
  libjpeg-turbo-progs  # djpeg: tests/tools checks the demo's JPEG round trip against libjpeg-turbo
)

install_missing_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # The server's client test runs the openai npm package on node. Asked for by command, not by
  # package: a machine with NodeSource's nodejs (npm inside, conflicting with Debian's npm) is
  # already served.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && { echo "setup: all Debian packages present"; return; }
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  local jobs
  jobs="$(nproc)"
  [ -f build/release/CMakeCache.txt ] || cmake --preset release
  cmake --build build/release -j "$jobs"
}

run_tests() {
  export QT_QPA_PLATFORM=offscreen
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d /tmp/flashdesk-xdg.XXXXXX)}"
  chmod 700 "$XDG_RUNTIME_DIR"
  ctest --test-dir build/release --output-on-failure -j "$(nproc)" --timeout 900
  # Debian's python3 (with python3-numpy and python3-torch); a python3 earlier on PATH may lack
  # them. The trainer's tests also compile the engine's quantiser with g++.
  /usr/bin/python3 -m unittest discover -s tests/tools -p '*_test.py' -v
  /usr/bin/python3 -m unittest discover -s tools/flashdesk_ref/tests -p '*_test.py' -t tools
  /usr/bin/python3 -m unittest discover -s tools/train/tests -p 'test_*.py'
  # The .deb: built, installed with apt, run from /usr/bin, checked by lintian (docs/packaging.md).
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo tests/packaging/package_test.sh build/release
}

start_app() {
  local model=assets/models/flash-tiny
  local missing=()
  [ -f "$model/config.json" ] && ls "$model"/*.safetensors >/dev/null 2>&1 ||
    missing+=("the demo model's weights ($model)")
  [ -x build/release/bin/flashdesk ] || missing+=("the desktop app (build/release/bin/flashdesk)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: not found after the build: $(IFS=';'; echo "${missing[*]}")."
  fi
  if [ -x build/release/bin/flashdesk ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    exec build/release/bin/flashdesk --model "$model" "$@"
  fi
  [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && echo "No display found: starting the terminal chat."
  # The help text is read whole first: `--help | grep -q` under pipefail fails at random when grep
  # exits before the writer is done (SIGPIPE), which once sent this branch to the "not built" text.
  local commands
  commands="$(build/release/bin/flashdesk-cli --help 2>&1 || true)"
  if grep -q "^  chat " <<<"$commands"; then
    if [ -f "$model/config.json" ]; then
      exec build/release/bin/flashdesk-cli chat --model "$model" "$@"
    fi
    echo "The terminal chat needs a model: flashdesk-cli chat --model DIR"
  else
    echo "The terminal chat was not built; available commands:"
    build/release/bin/flashdesk-cli --help || true
  fi
}

install_missing_packages
build
case "$mode" in
  run) start_app "$@" ;;
  test) run_tests ;;
  build) ;;
esac
