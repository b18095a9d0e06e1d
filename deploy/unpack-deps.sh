#!/usr/bin/env bash
# Unpacks the packages of bundle-deps.sh into PREFIX (never into /) and prints the CMake
# arguments that point leap's build at them.
# Usage: deploy/unpack-deps.sh DEB_DIR PREFIX
set -euo pipefail
debs="$1"; prefix="$2"
mkdir -p "$prefix"
for d in "$debs"/*.deb; do dpkg -x "$d" "$prefix"; done
# For shells and batch scripts: PATH (capnp) and the libraries at run time.
cat > "$prefix/leap-env.sh" <<ENV
export PATH="$prefix/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:\${LD_LIBRARY_PATH:-}"
ENV
# Cap'n Proto's CMake config hard-codes /usr/bin for its compiler.
echo "-DCMAKE_PREFIX_PATH=$prefix/usr -DCAPNP_EXECUTABLE=$prefix/usr/bin/capnp" \
     "-DCAPNPC_CXX_EXECUTABLE=$prefix/usr/bin/capnpc-c++ -DCAPNP_INCLUDE_DIRECTORY=$prefix/usr/include"
