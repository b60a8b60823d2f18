#!/usr/bin/env bash
# Installs the Debian 12 packages infer builds and tests with (as root); a no-op when all are there.
set -euo pipefail
pkgs=(
  build-essential meson ninja-build pkg-config python3 cmake
  libcaf-dev libboost-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libvulkan-dev libvulkan-volk-dev glslc mesa-vulkan-drivers vulkan-validationlayers
  clang libclang-rt-14-dev
  libedit-dev tmux
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
