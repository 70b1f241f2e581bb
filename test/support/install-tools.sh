#!/usr/bin/env bash
# Installs the independent clients and real servers the tests use (Debian packages), or says what is missing.
set -euo pipefail
need=()
command -v ffprobe >/dev/null 2>&1 || need+=(ffmpeg)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# the browser test drives Debian's Chromium (never a browser build downloaded by a test tool)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing test tools: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "the tests need these Debian packages: ${need[*]} (run: sudo apt-get install -y ${need[*]})" >&2
  exit 1
fi
