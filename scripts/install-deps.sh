#!/usr/bin/env bash
# Installs what building and testing rjq needs on Debian/Ubuntu, only when missing.
set -euo pipefail
pkgs=(gcc g++ make cmake pkg-config libhiredis-dev libevent-dev libuv1-dev libev-dev libglib2.0-dev libssl-dev openssl
      redis-server redis-tools redis-sentinel valgrind libpq-dev postgresql
      libncurses-dev tmux libjansson-dev curl python3
      clang libclang-rt-14-dev # clang, libclang-rt: the libFuzzer targets (make fuzz-smoke)
      debhelper dpkg-dev lintian # the Debian packages and their test (tests/consumer/debs.sh)
      abigail-tools # abidw, abidiff: the ABI check (scripts/abi-check.sh, ctest label abi)
      prometheus) # promtool: `promtool check metrics` on rjq serve's /metrics (tests/tool_serve_metrics.sh)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
((${#missing[@]})) || exit 0
echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends "${missing[@]}" ||
  { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; }
