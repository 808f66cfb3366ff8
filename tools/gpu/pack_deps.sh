#!/usr/bin/env bash
# Copies the third-party build inputs of the engine-only build (headers, static GoogleTest, the
# TurboJPEG library and their CMake package files) from this Debian machine into DIR/deps, for a
# machine that has a compiler and CUDA but not these packages (the GPU machine): tools/gpu/run.sh
# puts DIR/deps first on CMake's search paths.
#   tools/gpu/pack_deps.sh DIR
set -euo pipefail
DIR=${1:?usage: pack_deps.sh DIR}
D="$DIR/deps"
rm -rf "$D"
mkdir -p "$D/include" "$D/lib/x86_64-linux-gnu/cmake" "$D/lib/cmake" "$D/share/cmake"
A=/usr/lib/x86_64-linux-gnu
cp -r /usr/include/nlohmann /usr/include/gtest /usr/include/gmock /usr/include/stb "$D/include/"
cp /usr/include/cxxopts.hpp /usr/include/turbojpeg.h "$D/include/"
cp -r /usr/share/cmake/nlohmann_json "$D/share/cmake/"
cp -r /usr/lib/cmake/cxxopts "$D/lib/cmake/"
cp -r "$A/cmake/GTest" "$D/lib/x86_64-linux-gnu/cmake/"
cp "$A"/libgtest.a "$A"/libgtest_main.a "$A"/libgmock.a "$A"/libgmock_main.a "$D/lib/x86_64-linux-gnu/"
cp -P "$A"/libturbojpeg.so.0* "$D/lib/"
ln -sf libturbojpeg.so.0 "$D/lib/libturbojpeg.so"
du -sh "$D"
