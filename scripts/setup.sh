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

need_python_packages() {  # pip specs; installs only those whose import name is missing
  local missing=()
  for spec in "$@"; do
    local module="${spec%%[<>=]*}"
    module="${module//-/_}"
    "$PY" -c "import ${module}" 2>/dev/null || missing+=("$spec")
  done
  ((${#missing[@]})) || return 0
  say "installing into .venv: ${missing[*]}"
  "$PY" -m pip install -q --disable-pip-version-check "${missing[@]}" 2>&1 | grep -v "^WARNING: Location" || true
  for spec in "${missing[@]}"; do  # pip's exit status is lost in the filter above: check
    local module="${spec%%[<>=]*}"
    "$PY" -c "import ${module//-/_}" || { echo "could not install $spec" >&2; exit 1; }
  done
}

setup_environment() {
  need_debian_packages g++ cmake ninja-build catch2 libspdlog-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
  if ! python3 -c "import venv, ensurepip" 2>/dev/null; then need_debian_packages python3-venv python3-dev; fi
  if [ ! -x "$PY" ]; then
    say "creating .venv"
    python3 -m venv .venv
  fi
  need_python_packages "pybind11>=2.12" "scikit-build-core>=0.10" "pytest>=7" prometheus-client
}

# The PyTorch side: torch pinned to 2.13.0 (the CPU build on this kind of machine; an unpinned
# torch would pull the CUDA packages), plus what the integration tests drive.
setup_torch() {
  need_python_packages "torch==2.13.0" numpy
  if [ "${1:-}" = "--integrations" ]; then
    need_python_packages "torch==2.13.0" lightning transformers accelerate
  fi
}

install_steptrace() {  # incremental: the CMake build under build/py is reused
  say "building and installing steptrace into .venv"
  "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps . 2>&1 |
    grep -v "^WARNING: Location" || true
  "$PY" -c "import steptrace" || { echo "steptrace did not install" >&2; exit 1; }
}

# CUDA 12 CUPTI headers (from the nvidia-cuda-cupti-cu12 wheel, headers only) in .venv/cupti-VERSION,
# so the device layer is also built against CUDA 12. Prints the include directory.
cupti12_headers() {  # cupti12_headers VERSION
  local version="$1" dir="$ROOT/.venv/cupti-$1"
  if [ ! -f "$dir/include/cupti_activity.h" ]; then
    local tmp
    tmp="$(mktemp -d)"
    "$PY" -m pip download -q --disable-pip-version-check --no-deps "nvidia-cuda-cupti-cu12==$version" -d "$tmp" >&2
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

cmake_build() {  # cmake_build DIR [cmake args...]
  local dir="$1"
  shift
  mkdir -p "$dir"
  if ! { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" &&
         cmake --build "$dir" -- -j"$(nproc)"; } >"$dir/build.log" 2>&1; then
    cat "$dir/build.log"
    echo "build in $dir failed" >&2
    exit 1
  fi
}
