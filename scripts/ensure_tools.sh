#!/usr/bin/env bash
# Install the Debian tools the simulations need (iverilog, yosys, ccache) when missing.
set -euo pipefail

pkgs=(iverilog yosys ccache)
missing=()
for p in "${pkgs[@]}"; do
    command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" -eq 0 ]; then
    echo "accelgen: installing missing tools: ${missing[*]}" >&2
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "accelgen: installing missing tools with sudo: ${missing[*]}" >&2
    sudo -n apt-get update
    sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
    echo "accelgen: need ${pkgs[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi

for p in "${missing[@]}"; do
    command -v "$p" >/dev/null 2>&1 || { echo "accelgen: $p still missing after apt-get install" >&2; exit 1; }
done
