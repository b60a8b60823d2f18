#!/usr/bin/env bash
# Builds glslang's standalone compiler from SRC once per machine and prints its path.
# Usage: build_once.sh SRC KEY. The binary goes to ${XDG_CACHE_HOME:-~/.cache}/infer/glslang-KEY/
# (KEY: the version and the tarball's hash), so every build directory of every clone on this
# machine (CI has three) shares one build of ~50 s; a lock serializes builds started together.
# Only the compiler is built: no optimizer (SPIR-V goes to the driver as glslang writes it, as
# glslc's does without -O), no HLSL, no tests. Progress goes to stderr, the path alone to stdout.
set -euo pipefail
src=$1 key=$2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/infer/glslang-$key
bin=$cache/bin/glslang
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi
echo "glslang: building the compiler once into $cache" >&2
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
rm -rf "$cache/build"
cmake -S "$src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DENABLE_OPT=OFF -DGLSLANG_TESTS=OFF -DENABLE_HLSL=OFF -DBUILD_EXTERNAL=OFF \
  -DENABLE_SPVREMAPPER=OFF -DGLSLANG_ENABLE_INSTALL=OFF >&2
ninja -C "$cache/build" glslang-standalone >&2
mkdir -p "$cache/bin"
cp "$cache/build/StandAlone/glslang" "$bin.tmp"
mv "$bin.tmp" "$bin"  # whole or absent, for the next run's check
rm -rf "$cache/build"
echo "$bin"
