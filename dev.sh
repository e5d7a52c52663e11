#!/usr/bin/env bash
# The project's two entry points (see README.md):
#   ./dev.sh demo   install into .venv, then run the daemon's demo on the bundled sample session
#   ./dev.sh test   install into .venv (with the test tools), then lint, type-check and test everything
#   ./dev.sh test-ui  install code-server, chromium, tmux and Playwright, then drive the VS Code
#                     extension and the Neovim plugin in real editors (tests/ui, see tests/README.md)
# Only package registries are contacted (PyPI; npm for the TypeScript client's tests, pi,
# oh-my-pi and quicktype; Debian for Go, when run as root).
set -euo pipefail
cd "$(dirname "$0")"

VENV="${SESSIOND_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
  local log
  log="$(mktemp)"
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      -c constraints.txt -e ".$1" >"$log" 2>&1; then
    grep -v "is ignored" "$log" >&2 || true
    rm -f "$log"
    echo "dev.sh: installing sessiond into $VENV failed (see above)" >&2
    exit 1
  fi
  rm -f "$log"
  # An editable install leaves the daemon's own modules uncompiled, and where
  # PYTHONDONTWRITEBYTECODE is set they would be compiled again at every start
  # (the daemon then starts in 0.48 s instead of 0.30 s on the benchmark machine).
  "$VENV/bin/python" -m compileall -q daemon/sessiond clients/python/sessiond_client >/dev/null
}

# npm ci for a directory with a package-lock.json, unless node_modules is current.
ensure_node_modules() {
  local dir="$1"
  if ! command -v npm >/dev/null 2>&1; then
    echo "dev.sh: npm is needed for $dir (install Node.js 20 or newer)" >&2
    exit 1
  fi
  if [ ! -f "$dir/node_modules/.package-lock.json" ] \
      || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}

# Go, for the test that compiles the Go types quicktype generates from protocol/schema.json
# (tests/protocol/test_generated_types.py): Debian's golang-go, installed when run as root
# (as CI is). Without it that test is skipped and says why.
ensure_go() {
  command -v go >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "dev.sh: no Go toolchain; install Debian's golang-go (as root) to compile the generated Go types" >&2
    return 0
  fi
  echo "== apt-get install golang-go (for the generated Go types)"
  if ! { apt-get update -qq >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null; }; then
    echo "dev.sh: installing golang-go failed; the Go code-generation test will be skipped" >&2
  fi
}

# oh-my-pi 18.3.4 under Bun for its parity tests (tests/parity/omp18; cached there). Where it
# cannot be installed (not Linux x64, no registry) those tests skip and say why.
ensure_omp18() {
  if ! tests/parity/omp18/install.sh >/dev/null; then
    echo "dev.sh: oh-my-pi could not be installed; its parity tests will be skipped" >&2
  fi
}

case "${1:-}" in
  demo)
    shift
    ensure_venv ""
    exec "$VENV/bin/sessiond" demo "$@"
    ;;
  test)
    shift
    ensure_venv "[test]"
    ensure_node_modules tests/parity  # pi 0.73.1 itself, for the parity tests on files of its time
    ensure_node_modules tests/parity/pi16  # pi 1.6.0 itself, the reference
    ensure_node_modules protocol/codegen  # quicktype, for the generated-types test
    ensure_go
    ensure_omp18
    echo "== ruff"
    "$VENV/bin/ruff" check daemon clients/python tests bench examples sessiond_testkit
    "$VENV/bin/ruff" format --check daemon clients/python tests sessiond_testkit
    echo "== mypy --strict"
    "$VENV/bin/mypy" --strict daemon/sessiond clients/python/sessiond_client
    echo "== pytest"
    "$VENV/bin/python" -m pytest "$@"
    if [ "$#" -eq 0 ]; then  # with pytest arguments, only the chosen Python tests run
      echo "== TypeScript client and VS Code extension (node --test, against the daemon)"
      SESSIOND_VENV="$VENV" clients/run-node-tests.sh
      echo "== Neovim plugin (headless, against the daemon)"
      SESSIOND_VENV="$VENV" clients/nvim/run-tests.sh
    fi
    ;;
  test-ui)
    shift
    ensure_venv "[test]"
    SESSIOND_VENV="$VENV" tests/ui/setup.sh
    echo "== real editors: VS Code (code-server + Chromium) and Neovim (tmux)"
    SESSIOND_UI_TESTS=1 "$VENV/bin/python" -m pytest tests/ui "$@"
    ;;
  *)
    echo "usage: ./dev.sh demo | ./dev.sh test [pytest args] | ./dev.sh test-ui [pytest args]" >&2
    exit 2
    ;;
esac
