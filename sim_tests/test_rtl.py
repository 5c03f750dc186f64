"""The RTL matrix: every dataflow x four layer shapes x two array sizes, on Icarus and Verilator.
Each case asserts bit-exact outputs against numpy and measured cycles == the hwgen preset's."""

import zlib

import pytest

from costmodel.analysis import resolve_dataflow
from costmodel.hwgen_preset.preset import hwgen_structure
from hwgen.axi import IRQ_LATENCY_CYCLES
from hwgen.pe import PE, shifts_rows

from . import matrix, simenv

CASES = list(matrix.CASES)


def _check(rows):
    assert rows, "no results"
    for row in rows:
        where = f"{row['dataflow']} on {row['array']} ({row['sim']}, {'AXI4-Stream' if row['streams'] else 'AXI4-Lite'} data): {row['layer']}"
        assert row["bit_exact"], f"outputs differ from numpy: {where}"
        assert row["measured_cycles"] == row["predicted_cycles"], (
            f"measured {row['measured_cycles']} != predicted {row['predicted_cycles']}: {where}")
        # done arrives, and the cycles register is what the bus saw: start handshake to irq
        assert row["irq_cycles"] == row["measured_cycles"] + IRQ_LATENCY_CYCLES, (
            f"irq {row['irq_cycles']} cycles after the start write, cycles register {row['measured_cycles']}: {where}")
    assert {row["streams"] for row in rows} == {True, False} or len(rows) == 1


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
@pytest.mark.parametrize("dataflow,array_name", CASES, ids=[f"{d}-{a}" for d, a in CASES])
def test_rtl_matrix(sim, dataflow, array_name):
    simenv.require_simulator(sim)
    extra = matrix.random_layers(dataflow, seed=zlib.crc32(f"{dataflow}-{array_name}".encode()), count=3) \
        if array_name == matrix.random_array(dataflow) else ()
    rows = matrix.run_case(dataflow, array_name, sim, extra)
    assert len(rows) == len(matrix.DATAFLOWS[dataflow]) + len(extra)
    _check(rows)


#: A NoC wider than the classes of `kcp`'s tensors on 8 PEs, so its PEs take two words of each
#: chunk into two banks, and wide enough that `xp`'s PEs align their windows with logarithmic
#: shifters (the matrix's arrays, 2 and 4 words wide, give `kcp` more classes than lanes, and
#: `xp` a mux per word).
WIDE = "tiny8-w16"


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
@pytest.mark.parametrize("dataflow", ["kcp", "xp(k_tile=2)"])
def test_rtl_wide_noc(sim, dataflow):
    simenv.require_simulator(sim)
    hw = matrix.array(WIDE)
    todo = matrix.layers(dataflow)
    s = hwgen_structure(resolve_dataflow(matrix.dataflow_spec(dataflow), todo[0], hw), todo[0], hw, fit=todo)
    pe = PE(s)
    pe._MustUse__silence = True             # (only its geometry is read here)
    if pe.window:
        assert shifts_rows(s.noc_words_per_cycle, pe.in_cols)
    else:
        assert min(banks for banks, _ in pe.shape.values()) > 1
    extra = matrix.random_layers(dataflow, seed=zlib.crc32(f"{dataflow}-{WIDE}".encode()), count=2)
    rows = matrix.run_case(dataflow, WIDE, sim, extra)
    assert len(rows) == len(todo) + len(extra)
    _check(rows)


#: Designs whose PEs keep their partial sums in LUT RAM (one drain lane; two), which is not
#: reset: the PEs clear it after reset (``docs/timing.md``, "Double buffering").
PSUMS_IN_RAM = [("xp(k_tile=2)", "tiny8"), ("kcp_x2", "tiny4")]


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
@pytest.mark.parametrize("dataflow,array_name", PSUMS_IN_RAM, ids=[f"{d}-{a}" for d, a in PSUMS_IN_RAM])
def test_rtl_reset_midway(sim, dataflow, array_name):
    """Every layer started, the design reset halfway through its run (partial sums in the PEs'
    memories), then run again: exact, to the cycle."""
    simenv.require_simulator(sim)
    hw = matrix.array(array_name)
    todo = matrix.layers(dataflow)
    s = hwgen_structure(resolve_dataflow(matrix.dataflow_spec(dataflow), todo[0], hw), todo[0], hw, fit=todo)
    pe = PE(s)
    pe._MustUse__silence = True
    assert pe.psum_rows >= 2 and pe.psum_clear_cycles >= pe.psum_rows
    rows = matrix.run_case(dataflow, array_name, sim, abort_midway=True)
    assert len(rows) == len(todo)
    _check(rows)
