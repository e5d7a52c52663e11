#!/usr/bin/env bash
# Installs, builds and tests the Node packages against the real daemon:
#   clients/typescript  (@sessiond/client)   then   clients/vscode  (the extension, which links it)
# Exits non-zero on the first failure.
#
# Environment:
#   SESSIOND_VENV     the Python venv with sessiond installed (default: .venv at the repository root)
#   SESSIOND_COMMAND  the daemon command the tests spawn (default: $SESSIOND_VENV/bin/python -m sessiond serve --stdio)
# Only `npm ci` uses the network (the npm registry); the tests talk to nothing but the daemon.
set -euo pipefail

clients="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$clients")"

venv="${SESSIOND_VENV:-.venv}"
case "$venv" in
  /*) ;;
  *) venv="$root/$venv" ;;
esac
if [ -z "${SESSIOND_COMMAND:-}" ] && [ ! -x "$venv/bin/python" ]; then
  echo "run-node-tests: no Python venv with sessiond at $venv (set SESSIOND_VENV)" >&2
  exit 1
fi
export SESSIOND_VENV="$venv"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "run-node-tests: node and npm are required" >&2
  exit 1
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
  echo "run-node-tests: Node.js 20 or newer is required (found $(node --version))" >&2
  exit 1
fi

# The extension depends on the client through a link (file:../typescript), so the client
# is installed and built first.
for package in typescript vscode; do
  echo "== clients/$package: npm ci"
  (cd "$clients/$package" && npm ci --no-audit --no-fund --loglevel=error)
  echo "== clients/$package: build"
  (cd "$clients/$package" && npm run --silent build)
  echo "== clients/$package: test"
  (cd "$clients/$package" && npm test --silent)
done
