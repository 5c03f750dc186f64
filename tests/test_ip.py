"""The accelerator as IP: the register map has one source (SystemRDL) and the AXI4-Lite decoder,
the C header, the Markdown table and the host driver all agree with it; the AXI shell moves
registers and data to the core's bus as the map says (Amaranth simulation with a stand-in
core); the emitted C compiles; fusesoc accepts the emitted core; the host driver refuses a layer
that does not fit in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from accelgen.cli import main
from costmodel import AccelgenError
from hwgen.axi import AxiTop
from hwgen.geometry import CONFIG_REGS
from hwgen.host import CallableTransport, Design, Device, Read, program
from hwgen.hostbus import CTRL, REGION
from hwgen.regmap import INFO_REGS, MAGIC, MAP_NAME, REGION_CODES, rdl_source, register_map, write_outputs

ROOT = Path(__file__).resolve().parents[1]
N = 20                                   # the core's bus offset bits in the stand-in
L2 = {"input": 64, "weight": 64, "output": 16}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ip") / "kcp_tiny"
    assert main(["emit", "--dataflow", "kcp", "--hw", "tiny", "--out", str(out),
                 "--model", "conv2d:K=8,C=4,Y=6,X=6,R=3,S=3"]) == 0
    return out


# -- one source

def test_the_register_map_is_the_rdl_and_names_every_configuration_register():
    rm = register_map()
    assert [n for n in rm.registers if n.startswith("cfg_")] == [f"cfg_{n}" for n in CONFIG_REGS]
    addresses = [r.address for r in rm.registers.values()]
    assert len(set(addresses)) == len(addresses) and all(a % 4 == 0 for a in addresses)
    assert set(REGION_CODES.items()) <= set(REGION.items())         # the data port's codes are the core's regions
    assert f"addrmap {MAP_NAME}" in rdl_source()


def test_emitted_header_table_and_manifest_carry_the_rdl_addresses(emitted: Path):
    rm = register_map()
    manifest = json.loads((emitted / "manifest.json").read_text())
    assert manifest["registers"] == {name: r.address for name, r in rm.registers.items()}
    for name in manifest["files"]["verilog"] + manifest["files"]["register_map"] + [
            manifest["files"]["c_example"], manifest["files"]["fusesoc"], "files.f", "accelgen_files.tcl"]:
        assert (emitted / name).is_file(), name
    table = (emitted / f"{MAP_NAME}.md").read_text()
    assert all(f"| 0x{r.address:02X} |" in table for r in rm.registers.values())
    assert "l2_input_words" in (emitted / f"{MAP_NAME}.rdl").read_text()
    assert f"= {manifest['l2_words']['input']};" in (emitted / f"{MAP_NAME}.rdl").read_text()


def test_the_docs_register_table_is_the_generated_one(tmp_path: Path):
    write_outputs(tmp_path, {})
    generated = (tmp_path / f"{MAP_NAME}.md").read_text()
    assert (ROOT / "docs" / "ip-registers.md").read_text() == generated, \
        "docs/ip-registers.md is out of date: python -m hwgen.regmap --markdown docs/ip-registers.md"


# -- C

def _cc() -> str:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    return cc


def test_the_c_header_and_example_compile_and_agree_with_the_rdl(emitted: Path, tmp_path: Path):
    cc = _cc()
    for defines in ([], ["-DACCELGEN_EXAMPLE_MAIN"]):
        proc = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", *defines, "-c",
                               str(emitted / "accelgen_example.c"), "-o", str(tmp_path / "example.o")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    checks = "\n".join(f'_Static_assert(offsetof({MAP_NAME}_t, {name}) == 0x{r.address:x}, "{name}");'
                       for name, r in register_map().registers.items())
    (tmp_path / "offsets.c").write_text(f'#include <stddef.h>\n#include "{MAP_NAME}.h"\n{checks}\n')
    proc = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", str(emitted), "-c", str(tmp_path / "offsets.c"),
                           "-o", str(tmp_path / "offsets.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# -- FuseSoC

def _fusesoc(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "fusesoc"
    if not exe.exists():
        pytest.skip("fusesoc is not installed (pip install -e '.[test]')")
    env = dict(os.environ, XDG_CACHE_HOME=str(cwd / "cache"), XDG_DATA_HOME=str(cwd / "data"),
               XDG_CONFIG_HOME=str(cwd / "config"))
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_fusesoc_accepts_the_emitted_core(emitted: Path, tmp_path: Path):
    manifest = json.loads((emitted / "manifest.json").read_text())
    added = _fusesoc(["library", "add", "accelgen_ip", str(emitted)], tmp_path)
    assert added.returncode == 0, added.stderr
    info = _fusesoc(["core-info", manifest["core_name"]], tmp_path)
    assert info.returncode == 0, info.stderr
    assert manifest["core_name"] in info.stdout and "sim" in info.stdout and "lint" in info.stdout
    # the ECP5 target: Yosys reads the design with the macro that maps accelgen_mul onto MULT18X18D
    setup = _fusesoc(["run", "--setup", "--target", "ecp5", manifest["core_name"]], tmp_path)
    assert setup.returncode == 0, setup.stderr
    procs = list((tmp_path / "build").rglob("edalize_yosys_procs.tcl"))
    assert len(procs) == 1 and "ACCELGEN_ECP5_DSP" in procs[0].read_text()
    from sim_tests import simenv
    simenv.apply_env()
    if not simenv.missing_tools("icarus"):
        sim = _fusesoc(["run", "--target", "sim", manifest["core_name"]], tmp_path)
        assert sim.returncode == 0, (sim.stdout + sim.stderr)[-2000:]


# -- the driver

def test_the_driver_refuses_a_layer_that_does_not_fit_in_one_line(emitted: Path):
    design = Design.load(emitted)
    big = "conv2d:K=64,C=64,Y=32,X=32,R=3,S=3"
    a, b = np.zeros((64, 32, 32), np.int64), np.zeros((64, 64, 3, 3), np.int64)
    with pytest.raises(AccelgenError) as err:
        design.job(big, a, b)
    assert "layer 'layer'" in str(err.value) and "L2 words" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(AccelgenError, match=r"first operand has shape \(4, 6\), expected \(4, 6, 6\)"):
        design.job("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3", np.zeros((4, 6)), np.zeros((8, 4, 3, 3)))
    with pytest.raises(AccelgenError, match="no manifest.json"):
        Design.load(emitted / "nowhere")


class _FakeBoard:
    """Registers as memory; status always done; read_data counts up."""

    def __init__(self):
        rm = register_map()
        self.rm, self.mem, self.writes = rm, {}, []
        self.mem[rm.address("status")] = rm["status"].value(done=1)
        self.mem[rm.address("cycles")] = 1234
        self.mem[rm.address("info")] = rm["info"].value(version=1, magic=MAGIC)
        self.next_word = 0

    def read(self, address: int) -> int:
        if address == self.rm.address("read_data"):
            self.next_word += 1
            return (-self.next_word) & 0xFFFFFFFF
        return self.mem.get(address, 0)

    def write(self, address: int, value: int) -> None:
        self.writes.append((address, value))


def test_the_driver_runs_a_layer_through_the_register_map(emitted: Path):
    design = Design.load(emitted)
    board = _FakeBoard()
    for name, words in design.l2_words.items():
        board.mem[board.rm.address(f"l2_{name}_words")] = words
    dev = Device(design, CallableTransport(board.read, board.write))
    dev.check()
    rng = np.random.default_rng(0)
    x, w = rng.integers(-128, 128, (4, 6, 6)), rng.integers(-128, 128, (8, 4, 3, 3))
    out, cycles = dev.run("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3", x, w)
    assert cycles == 1234 and out.shape == (8, 4, 4) and out.flat[0] == -1 and out.flat[-1] == -128
    job, predicted = design.job("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3", x, w)
    rm = board.rm
    cfg = {a: v for a, v in board.writes if rm.address("cfg_K") <= a}
    assert cfg == {rm.address(f"cfg_{n}"): job.config[n] for n in CONFIG_REGS}
    starts = [i for i, (a, v) in enumerate(board.writes) if a == rm.address("ctrl") and v == 1]
    assert len(starts) == 1 and predicted > 0
    loads = [v for a, v in board.writes if a == rm.address("load_data")]
    assert len(loads) == -(-len(job.input_words) // 4) + -(-len(job.weight_words) // 4)
    board.mem[rm.address("info")] = 0
    with pytest.raises(AccelgenError, match="not an accelgen register map"):
        dev.check()


def test_the_program_streams_when_asked(emitted: Path):
    design = Design.load(emitted)
    job, _ = design.job("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3", np.ones((4, 6, 6)), np.ones((8, 4, 3, 3)))
    ops = program(job, streams=True)
    kinds, data_port = [], {register_map().address("load_data"), register_map().address("read_data")}
    reply = None
    try:
        while True:
            op = ops.send(reply)
            kinds.append(type(op).__name__)
            assert getattr(op, "address", None) not in data_port
            reply = (register_map()["status"].value(done=1) if isinstance(op, Read)
                     else [0] * job.output_words if type(op).__name__ == "Receive" else None)
    except StopIteration as stop:
        outputs, _ = stop.value
    assert kinds.count("Stream") == 2 and kinds.count("Receive") == 1 and outputs == [0] * job.output_words


# -- the AXI shell, simulated around a stand-in core

class _StandInCore(wiring.Component):
    """The core's bus: reads return ``3 * address + 1`` the cycle after ``bus_re``; ``busy`` and
    ``done`` are driven by the testbench."""

    def __init__(self):
        super().__init__({"bus_addr": In(N + 4), "bus_wdata": In(32), "bus_we": In(1), "bus_re": In(1),
                          "bus_rdata": Out(32), "busy": Out(1), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.bus_re):
            m.d.sync += self.bus_rdata.eq(self.bus_addr * 3 + 1)
        return m


def _core_address(region: str, offset: int) -> int:
    return REGION[region] << N | offset


def _simulate(bench, info=None):
    core = _StandInCore()
    top = AxiTop(N, L2, info or {name: 100 + i for i, name in enumerate(INFO_REGS)}, core=core,
                 clock_from_ports=False)
    writes: list[tuple[int, int]] = []
    sim = Simulator(top)
    sim.add_clock(1e-8)

    async def record(ctx):
        async for _, _, we, addr, data in ctx.tick().sample(core.bus_we, core.bus_addr, core.bus_wdata):
            if we:
                writes.append((addr, data))

    async def testbench(ctx):
        await bench(ctx, top, core)

    sim.add_process(record)
    sim.add_testbench(testbench)
    sim.run()
    return writes


async def _axil_write(ctx, top, address: int, value: int, strobe: int = 0xF) -> int:
    ctx.set(top.s_axil_awaddr, address)
    ctx.set(top.s_axil_wdata, value)
    ctx.set(top.s_axil_wstrb, strobe)
    ctx.set(top.s_axil_awvalid, 1)
    ctx.set(top.s_axil_wvalid, 1)
    ctx.set(top.s_axil_bready, 1)
    await ctx.tick().until(top.s_axil_awready)
    ctx.set(top.s_axil_awvalid, 0)
    ctx.set(top.s_axil_wvalid, 0)
    (bresp,) = await ctx.tick().sample(top.s_axil_bresp).until(top.s_axil_bvalid)
    return bresp


async def _axil_read(ctx, top, address: int, resp: list | None = None) -> int:
    ctx.set(top.s_axil_araddr, address)
    ctx.set(top.s_axil_arvalid, 1)
    ctx.set(top.s_axil_rready, 1)
    await ctx.tick().until(top.s_axil_arready)
    ctx.set(top.s_axil_arvalid, 0)
    value, rresp = await ctx.tick().sample(top.s_axil_rdata, top.s_axil_rresp).until(top.s_axil_rvalid)
    if resp is not None:
        resp.append(rresp)
    return value


def test_the_axi_decoder_maps_every_register_as_the_rdl_says():
    rm = register_map()
    seen: dict[str, int] = {}

    async def bench(ctx, top, core):
        for i, name in enumerate(CONFIG_REGS):
            await _axil_write(ctx, top, rm.address(f"cfg_{name}"), 1000 + i)
            seen[f"read cfg_{name}"] = await _axil_read(ctx, top, rm.address(f"cfg_{name}"))
        await _axil_write(ctx, top, rm.address("ctrl"), rm["ctrl"].value(start=1))
        seen["read cycles"] = await _axil_read(ctx, top, rm.address("cycles"))
        seen["info"] = await _axil_read(ctx, top, rm.address("info"))
        for name in INFO_REGS:
            seen[name] = await _axil_read(ctx, top, rm.address(name))
        await _axil_write(ctx, top, rm.address("offset"), 7)
        seen["offset"] = await _axil_read(ctx, top, rm.address("offset"))
        ctx.set(core.done, 1)
        await ctx.tick().repeat(2)
        seen["irq masked"] = ctx.get(top.irq)
        await _axil_write(ctx, top, rm.address("irq_enable"), 1)
        seen["irq"] = ctx.get(top.irq)
        seen["status"] = await _axil_read(ctx, top, rm.address("status"))
        await _axil_write(ctx, top, rm.address("irq_status"), 1)
        seen["irq cleared"] = ctx.get(top.irq)
        resp: list[int] = []
        await _axil_read(ctx, top, rm.address("status"), resp)
        await _axil_read(ctx, top, 0x400, resp)                             # no register there
        await _axil_read(ctx, top, rm.address("load_data"), resp)           # write-only
        seen["rresp"] = resp
        seen["bresp"] = [await _axil_write(ctx, top, rm.address(name), 0) for name in ("out_words", "cycles")]
        seen["bresp"].append(await _axil_write(ctx, top, 0xFFC, 0))
        ctx.set(core.busy, 1)                                               # L2 is the core's
        seen["bresp"].append(await _axil_write(ctx, top, rm.address("load_data"), 0x11223344))
        ctx.set(core.busy, 0)
        await ctx.tick().repeat(8)

    writes = _simulate(bench)
    expected = [(_core_address("ctrl", CTRL["config"] + i), 1000 + i) for i in range(len(CONFIG_REGS))]
    assert writes == expected + [(_core_address("ctrl", CTRL["start"]), 1)]   # and nothing from load_data
    for i, name in enumerate(CONFIG_REGS):
        assert seen[f"read cfg_{name}"] == 3 * _core_address("ctrl", CTRL["config"] + i) + 1
    assert seen["read cycles"] == 3 * _core_address("ctrl", CTRL["cycles"]) + 1
    assert rm["info"].get(seen["info"], "magic") == MAGIC
    assert [seen[name] for name in INFO_REGS] == [100 + i for i in range(len(INFO_REGS))]
    assert seen["offset"] == 7
    assert (seen["irq masked"], seen["irq"], seen["irq cleared"]) == (0, 1, 0)
    assert rm["status"].get(seen["status"], "done") == 1
    assert seen["rresp"] == [0, 2, 2] and seen["bresp"] == [0, 2, 2, 2]        # OKAY, SLVERR


def test_the_streams_and_the_data_port_write_and_read_l2_in_order():
    rm = register_map()
    got: dict[str, object] = {}

    async def bench(ctx, top, core):
        await _axil_write(ctx, top, rm.address("region"), REGION_CODES["weight"])
        await _axil_write(ctx, top, rm.address("offset"), 2)
        for data, keep, last in ((0x44332211, 0xF, 0), (0x00006655, 0x3, 1)):      # six int8 words
            ctx.set(top.s_axis_tdata, data)
            ctx.set(top.s_axis_tkeep, keep)
            ctx.set(top.s_axis_tlast, last)
            ctx.set(top.s_axis_tvalid, 1)
            await ctx.tick().until(top.s_axis_tready)
        ctx.set(top.s_axis_tvalid, 0)
        await _axil_write(ctx, top, rm.address("load_data"), 0x0000BBAA, strobe=0x3)   # two more
        await _axil_write(ctx, top, rm.address("region"), REGION_CODES["output"])
        await _axil_write(ctx, top, rm.address("offset"), 0)
        await _axil_write(ctx, top, rm.address("load_data"), 0x12345678)
        await _axil_write(ctx, top, rm.address("out_words"), 5)
        await _axil_write(ctx, top, rm.address("ctrl"), rm["ctrl"].value(clear=1))
        await _axil_write(ctx, top, rm.address("ctrl"), rm["ctrl"].value(start=1))      # ignored: clearing
        while rm["status"].get(await _axil_read(ctx, top, rm.address("status")), "clearing"):
            pass
        await _axil_write(ctx, top, rm.address("ctrl"), rm["ctrl"].value(readout=1))
        words, pause = [], 0
        for _ in range(100):                          # a sink that pauses every third cycle
            pause += 1
            ctx.set(top.m_axis_tready, pause % 3 != 0)
            _, _, valid, ready, data, last = await ctx.tick().sample(
                top.m_axis_tvalid, top.m_axis_tready, top.m_axis_tdata, top.m_axis_tlast)
            if valid and ready:
                words.append((data, last))
                if last:
                    break
        got["stream"] = words
        await _axil_write(ctx, top, rm.address("offset"), 3)
        got["read_data"] = [await _axil_read(ctx, top, rm.address("read_data")) for _ in range(2)]
        got["offset"] = await _axil_read(ctx, top, rm.address("offset"))

    writes = _simulate(bench)
    assert all(a >> N != REGION["ctrl"] for a, _ in writes)      # the start during the clear was dropped
    data = writes
    weights = [(_core_address("weight", 2 + i), v) for i, v in enumerate([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0xAA, 0xBB])]
    clears = [(_core_address("output", i), 0) for i in range(5)]
    assert data == weights + [(_core_address("output", 0), 0x12345678)] + clears
    assert got["stream"] == [(3 * _core_address("output", i) + 1, int(i == 4)) for i in range(5)]
    assert got["read_data"] == [3 * _core_address("output", 3) + 1, 3 * _core_address("output", 4) + 1]
    assert got["offset"] == 5
