#!/usr/bin/env bash
# Create/refresh the project venv (.venv) and install accelgen with its test extra.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=.venv

need_root() {  # run a command as root, or explain and exit
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
    else echo "accelgen: need python3-venv; run: sudo apt-get install -y python3-venv" >&2; exit 1
    fi
}

command -v python3 >/dev/null 2>&1 || { echo "accelgen: python3 (>=3.11) not found" >&2; exit 1; }
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "accelgen: python3 >= 3.11 required, found $(python3 -V 2>&1)" >&2; exit 1; }

# Debian's python3 ships venv's ensurepip separately (python3-venv).
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "accelgen: installing python3-venv" >&2
    need_root env DEBIAN_FRONTEND=noninteractive apt-get update
    need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv
fi

# (the venv with its packages takes ~0.9 GB, and pip unpacks them beside it: say so plainly
# rather than let pip fail half-way with "No space left on device")
free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
if [ ! -x "$VENV/bin/python" ] && [ -n "$free_kb" ] && [ "$free_kb" -lt 1572864 ]; then
    echo "accelgen: $((free_kb / 1024)) MB free on $(df -P . | awk 'NR == 2 {print $6}'); the venv needs about 1.5 GB while it installs" >&2
    exit 1
fi

if ! "$VENV/bin/python" -c 'import pip' >/dev/null 2>&1; then
    python3 -m venv --clear "$VENV"
fi
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install -e '.[test]'
