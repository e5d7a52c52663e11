#!/usr/bin/env bash
# Install what the oh-my-pi parity tests run, from the npm registry only, into this folder:
#   node_modules/       Bun 1.4.5 (an npm package), the native addon oh-my-pi loads, @babel/parser
#                       (pinned exactly by package.json and package-lock.json). `npm install
#                       --no-save`, not `npm ci`: the addon lists builds for other platforms
#                       that the registry does not have, which `npm ci` refuses to leave out.
#   .cache/omp-18.3.4.mjs  oh-my-pi 18.3.4's published bundle (dist/cli.js of
#                       @oh-my-pi/pi-coding-agent, checked against its sha256) with one line
#                       appended that exports its table of modules (see README.md)
# Quick when both are there already. Exit status 0: ready; 3: this machine cannot run it
# (not Linux x64, no npm, no registry); anything else: a failure.
set -euo pipefail
cd "$(dirname "$0")"

VERSION=18.3.4
CLI_SHA256=c8306e6636437f5da5d79ab97cffafa9d1c01f47cd5be3e8563ddc9101fd0329
# In this exact build the module table is `$ku`, filled in by `$_r()`.
EXPORT_LINE='export const __sessiondModules = () => ($_r(), $ku);'
BUNDLE=.cache/omp-$VERSION.mjs

cannot() { echo "omp18 install: $*" >&2; exit 3; }

[ "$(uname -s)/$(uname -m)" = "Linux/x86_64" ] || cannot "oh-my-pi's Bun and native addon are installed for Linux x64 only"
command -v npm >/dev/null 2>&1 || cannot "npm is needed (install Node.js 20 or newer)"

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  if ! npm install --no-save --no-audit --no-fund --loglevel=error >.cache-npm.log 2>&1; then
    tail -n 5 .cache-npm.log >&2
    rm -f .cache-npm.log
    cannot "npm install failed (see above)"
  fi
  rm -f .cache-npm.log
fi

if [ ! -f "$BUNDLE" ] || [ "$(tail -n 1 "$BUNDLE")" != "$EXPORT_LINE" ]; then
  mkdir -p .cache
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  if ! (cd "$work" && npm pack --silent "@oh-my-pi/pi-coding-agent@$VERSION" >/dev/null 2>pack.log); then
    tail -n 5 "$work/pack.log" >&2
    cannot "npm pack @oh-my-pi/pi-coding-agent@$VERSION failed"
  fi
  tar -xzf "$work/oh-my-pi-pi-coding-agent-$VERSION.tgz" -C "$work" package/dist/cli.js
  sum=$(sha256sum "$work/package/dist/cli.js" | cut -d' ' -f1)
  if [ "$sum" != "$CLI_SHA256" ]; then
    echo "omp18 install: dist/cli.js has sha256 $sum, not $CLI_SHA256" >&2
    exit 1
  fi
  { cat "$work/package/dist/cli.js"; printf '\n%s\n' "$EXPORT_LINE"; } >"$BUNDLE.tmp"
  mv "$BUNDLE.tmp" "$BUNDLE"
fi
echo "omp18: oh-my-pi $VERSION ready in $(pwd)"
