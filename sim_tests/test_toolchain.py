"""Toolchain smoke test: Amaranth 0.5 -> Verilog -> cocotb 2 on Icarus and Verilator."""

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from cocotb_tools.check_results import get_results
from cocotb_tools.runner import get_runner

from . import simenv


class Mac8(wiring.Component):
    """Registered signed int8 x int8 multiply-accumulate into int32."""

    clear: In(1)
    en: In(1)
    a: In(signed(8))
    b: In(signed(8))
    acc: Out(signed(32))

    def elaborate(self, platform):
        m = Module()
        with m.If(self.clear):
            m.d.sync += self.acc.eq(0)
        with m.Elif(self.en):
            m.d.sync += self.acc.eq(self.acc + self.a * self.b)
        return m


@pytest.mark.parametrize("sim", simenv.SIMULATORS)
def test_toolchain_mac(sim: str) -> None:
    simenv.require_simulator(sim)
    build_dir = simenv.build_dir("toolchain_mac", sim)
    src = build_dir / "mac8.v"
    src.write_text(verilog.convert(Mac8(), name="mac8"))

    runner = get_runner(sim)
    runner.build(
        sources=[src],
        hdl_toplevel="mac8",
        build_dir=build_dir,
        build_args=simenv.build_args(sim),
        timescale=("1ns", "1ps"),
        always=True,
    )
    results = runner.test(
        test_module="sim_tests.tb_toolchain",
        hdl_toplevel="mac8",
        build_dir=build_dir,
        test_dir=build_dir,
        extra_env=simenv.TB_ENV,
    )
    n_tests, n_failed = get_results(results)
    assert (n_tests, n_failed) == (1, 0)
