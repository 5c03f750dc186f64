"""cocotb testbench for the toolchain smoke test (driven by test_toolchain.py).

Not collected by pytest (no ``test_`` prefix); the simulator imports it.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

N_PAIRS = 50


def _drive(dut, *, a: int = 0, b: int = 0, en: int = 0, clear: int = 0) -> None:
    # Amaranth ports are unsigned in the emitted Verilog: write two's complement.
    dut.a.value = a & 0xFF
    dut.b.value = b & 0xFF
    dut.en.value = en
    dut.clear.value = clear


@cocotb.test()
async def mac_matches_python_sum(dut) -> None:
    """Registered int8 x int8 -> int32 MAC equals Python's exact sum every cycle."""
    rng = random.Random(cocotb.RANDOM_SEED)
    Clock(dut.clk, 10, unit="ns").start()

    _drive(dut)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    await FallingEdge(dut.clk)
    dut.rst.value = 0

    # Extremes first, then random pairs.
    pairs = [(-128, -128), (127, -128), (-1, 1), (0, 0)]
    pairs += [(rng.randint(-128, 127), rng.randint(-128, 127)) for _ in range(N_PAIRS - len(pairs))]

    expected = 0
    for i, (a, b) in enumerate(pairs):
        hold = i % 7 == 3  # some cycles with en=0: the accumulator must hold
        _drive(dut, a=a, b=b, en=0 if hold else 1)
        await FallingEdge(dut.clk)
        if not hold:
            expected += a * b
        got = dut.acc.value.to_signed()
        assert got == expected, f"cycle {i}: a={a} b={b} acc={got} expected={expected}"

    # clear wins over en and zeroes the accumulator.
    _drive(dut, a=5, b=5, en=1, clear=1)
    await FallingEdge(dut.clk)
    assert dut.acc.value.to_signed() == 0
    _drive(dut, a=-7, b=9, en=1)
    await FallingEdge(dut.clk)
    assert dut.acc.value.to_signed() == -63
