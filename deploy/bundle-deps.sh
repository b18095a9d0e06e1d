#!/usr/bin/env bash
# Downloads the Debian packages of the libraries that GPU images often lack (ZeroMQ, Cap'n Proto with
# its compiler, spdlog/fmt, libsodium, libseccomp, bubblewrap, and the header-only toml++, CLI11,
# nlohmann-json, DLPack; cpp-httplib for leap serve, with the headers it includes) into DIR, for unpacking into a private prefix with unpack-deps.sh.
# Usage: deploy/bundle-deps.sh [DIR]     (default .deps/debs; run on Debian 12)
set -euo pipefail
dir="${1:-$(dirname "$0")/../.deps/debs}"
mkdir -p "$dir"
cd "$dir"
pkgs=(libzmq3-dev libzmq5 libpgm-5.3-0 libnorm1 cppzmq-dev
      capnproto libcapnp-0.9.2 libcapnp-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
      libsodium-dev libsodium23 libseccomp-dev libseccomp2
      libtomlplusplus-dev libtomlplusplus3 libcli11-dev nlohmann-json3-dev libdlpack-dev
      bubblewrap
      libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libbrotli-dev zlib1g-dev
      libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libsqlite3-dev libsqlite3-0)
apt-get download "${pkgs[@]}" >/dev/null
echo "bundle-deps: $(ls ./*.deb | wc -l) packages in $(pwd)"
