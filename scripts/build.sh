#!/usr/bin/env bash
# Installs what is missing, then configures and builds build/ (release). Usage: scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
[ -f build/build.ninja ] || meson setup build --wrap-mode=nodownload --buildtype=release >/dev/null
ninja -C build
