#!/usr/bin/env bash
# Installs the system parts the tests and demos use, only when they are missing:
# Debian's Chromium (Playwright cannot download its own browser here) and PostgreSQL.
set -euo pipefail
PY=${1:-python3}

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! "$PY" -c 'from session_keeper import find_chromium; find_chromium()' >/dev/null 2>&1; then
  if can_install; then
    echo "session_keeper: no Chromium found; installing Debian's chromium package" >&2
    apt_install chromium
  else
    echo "session_keeper: no Chromium found and cannot install packages; set SESSION_KEEPER_CHROMIUM" >&2
  fi
fi

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  if can_install; then
    echo "session_keeper: no PostgreSQL found; installing Debian's postgresql package" >&2
    apt_install postgresql
  else
    echo "session_keeper: PostgreSQL not found; PostgreSQL tests will be skipped" >&2
  fi
fi

# The single sign-on test site (demos/sites/sso): Node.js and its modules, installed from the
# lock file with `npm ci` when node_modules is missing or older than package-lock.json.
SSO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/demos/sites/sso"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if can_install; then
    echo "session_keeper: no Node.js found; installing Debian's nodejs and npm packages" >&2
    apt_install nodejs npm
  else
    echo "session_keeper: Node.js not found; the single sign-on tests will be skipped" >&2
  fi
fi
if command -v npm >/dev/null 2>&1; then
  if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
    echo "session_keeper: Node.js $(node --version) is older than 20.19, which the single sign-on site needs" >&2
  fi
  installed="$SSO_DIR/node_modules/.package-lock.json"
  if [ ! -f "$installed" ] || [ "$SSO_DIR/package-lock.json" -nt "$installed" ]; then
    echo "session_keeper: installing the single sign-on site's Node modules (npm ci)" >&2
    npm ci --prefix "$SSO_DIR" --no-audit --no-fund --loglevel=error
  fi
fi
