#!/usr/bin/env bash
# Installs what the real-editor tests need, from package registries only:
#   Debian (when run as root): chromium, tmux, ripgrep, CJK and emoji fonts, and the build
#          tools and headers code-server's native modules are built with
#   npm:  code-server into tests/ui/.tools (kept between runs; gitignored)
#   PyPI: the [ui] extra (Playwright for Python) and Neovim into $SESSIOND_VENV
# Playwright drives Debian's chromium; `playwright install` (which downloads browsers from
# outside the registries) is never run.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV="${SESSIOND_VENV:-.venv}"
CODE_SERVER_VERSION="4.100.3"
tools="tests/ui/.tools"

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v c++ >/dev/null 2>&1 || missing+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
# code-server's kerberos module compiles against gssapi's headers.
[ -e /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
# The sample session quotes Japanese and an emoji; without these fonts the screenshots
# show empty boxes where they are.
[ -d /usr/share/fonts/opentype/noto ] || missing+=(fonts-noto-cjk)
[ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || missing+=(fonts-noto-color-emoji)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing Debian packages (install them as root): ${missing[*]}" >&2
    exit 1
  fi
  echo "== apt-get install ${missing[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

installed="$(node -p "require('./$tools/node_modules/code-server/package.json').version" 2>/dev/null || true)"
if [ "$installed" != "$CODE_SERVER_VERSION" ] || [ ! -d "$tools/node_modules/code-server/lib/vscode/node_modules" ]; then
  echo "== npm install code-server@$CODE_SERVER_VERSION into $tools (builds native modules; a few minutes the first time)"
  mkdir -p "$tools/tmp"
  # VS Code's @vscode/ripgrep fetches its binary from GitHub at install time, unless its
  # download cache (in the temporary directory) already holds the archive: give it
  # Debian's ripgrep, the same 13.0.0 release, under the name it looks for.
  case "$(uname -m)" in
    x86_64) rg_target=x86_64-unknown-linux-musl ;;
    aarch64) rg_target=aarch64-unknown-linux-musl ;;
    *) echo "setup.sh: no ripgrep archive name known for $(uname -m)" >&2; exit 1 ;;
  esac
  rg_cache="$tools/tmp/vscode-ripgrep-cache-1.15.11"
  mkdir -p "$rg_cache/staging"
  cp "$(command -v rg)" "$rg_cache/staging/rg"
  tar -czf "$rg_cache/ripgrep-v13.0.0-10-$rg_target.tar.gz" -C "$rg_cache/staging" rg
  export TMPDIR="$PWD/$tools/tmp"
  # Its install script refuses to run as root unless told it may; node-pty's runs
  # `npx node-gyp`, which must not stop to ask whether to fetch node-gyp.
  (cd "$tools" && npm_config_unsafe_perm=true npm_config_yes=true npm install --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION" >/dev/null)
fi

# Neovim: the release the plugin's own tests run (clients/nvim/run-tests.sh pins it).
nvim_package="$(sed -n 's/^nvim_package="\(.*\)"$/\1/p' clients/nvim/run-tests.sh)"
log="$(mktemp)"
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c constraints.txt -e ".[test,ui]" "$nvim_package" >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "setup.sh: installing the [ui] extra into $VENV failed" >&2
  exit 1
fi
rm -f "$log"
