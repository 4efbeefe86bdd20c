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
