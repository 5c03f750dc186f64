"""cocotb bench for the IP top level ``accelgen_axi_top``: the host driver's program
(:func:`hwgen.host.program`) for every job of ``$ACCELGEN_JOBS`` (JSON written by
:mod:`sim_tests.runner`), run through ``cocotbext-axi``: an AXI4-Lite master for the registers,
an AXI4-Stream source and sink for L2 (jobs with ``streams`` false load and read through the
``load_data`` / ``read_data`` registers instead).  What it measured goes to
``$ACCELGEN_RESULTS``.  One simulator build runs every job of a design; both streams pause now
and then (back-pressure on ``s_axis``, ``m_axis_tready`` low).

Besides the ``cycles`` register (start to done, ``docs/timing.md``), a monitor counts the clock
edges from the ``ctrl.start`` write handshake to ``irq`` rising: done must arrive, and exactly
when the register says."""

from __future__ import annotations

import itertools
import json
import logging
import os
import warnings
from pathlib import Path

# The bench runs with warnings as errors (simenv.TB_ENV); cocotbext-axi 0.1.x still calls cocotb
# 1.x APIs that cocotb 2 deprecates (setimmediatevalue, ...): those are its own, not ours.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.axi(\..*)?$")
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotb_bus(\..*)?$")

import cocotb  # noqa: E402
from cocotb.clock import Clock  # noqa: E402
from cocotb.triggers import ReadOnly, RisingEdge  # noqa: E402
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink,  # noqa: E402
                           AxiStreamSource)

from costmodel.base import AccelgenError  # noqa: E402
from hwgen.host import Read, Receive, Stream, Write, program  # noqa: E402
from hwgen.layout import Job  # noqa: E402
from hwgen.regmap import register_map  # noqa: E402


class _Edges:
    """Clock edges from the last start handshake to the next rise of ``irq``."""

    def __init__(self, dut, start_address: int):
        self.dut, self.start_address = dut, start_address
        self.start_edge: int | None = None
        self.irq_edge: int | None = None

    async def run(self) -> None:
        dut, edge, irq_was = self.dut, 0, 0
        while True:
            await RisingEdge(dut.aclk)
            await ReadOnly()
            edge += 1
            if (dut.s_axil_awvalid.value == 1 and dut.s_axil_awready.value == 1
                    and dut.s_axil_awaddr.value.to_unsigned() == self.start_address
                    and dut.s_axil_wdata.value.to_unsigned() & 1):
                self.start_edge, self.irq_edge = edge, None
            irq = int(dut.irq.value)
            if irq and not irq_was and self.irq_edge is None:
                self.irq_edge = edge
            irq_was = irq

    def cycles(self) -> int | None:
        if self.start_edge is None or self.irq_edge is None:
            return None
        return self.irq_edge - self.start_edge


async def _reset(dut) -> None:
    dut.aresetn.value = 0
    for _ in range(3):
        await RisingEdge(dut.aclk)
    dut.aresetn.value = 1
    await RisingEdge(dut.aclk)


async def _execute(prog, axil: AxiLiteMaster, source: AxiStreamSource, sink: AxiStreamSink,
                   abort: tuple | None = None):
    """Run the host program ``prog``; with ``abort = (dut, start_address, cycles)``, reset the
    design ``cycles`` clock edges after the program's start write instead of finishing it."""
    reply = None
    try:
        while True:
            op = prog.send(reply)
            reply = None
            if isinstance(op, Write):
                if op.strobe == 0xF:
                    await axil.write_dword(op.address, op.value)
                else:                         # a contiguous low strobe: the short tail of a tensor
                    await axil.write(op.address, op.value.to_bytes(4, "little")[:op.strobe.bit_length()])
                if abort is not None and op.address == abort[1] and op.value & 1:
                    dut = abort[0]
                    for _ in range(abort[2]):
                        await RisingEdge(dut.aclk)
                    await _reset(dut)
                    prog.close()
                    return None
            elif isinstance(op, Read):
                reply = await axil.read_dword(op.address)
            elif isinstance(op, Stream):
                await source.send(AxiStreamFrame(op.data))
                await source.wait()
            elif isinstance(op, Receive):
                frame = await sink.recv()
                data = bytes(frame.tdata)
                reply = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
                if len(reply) != op.words:
                    raise AccelgenError(f"m_axis sent {len(reply)} words, expected {op.words}", where="m_axis")
    except StopIteration as stop:
        return stop.value


@cocotb.test()
async def run_jobs(dut) -> None:
    jobs = json.loads(Path(os.environ["ACCELGEN_JOBS"]).read_text())
    regs = register_map()
    cocotb.start_soon(Clock(dut.aclk, 10, unit="ns").start())
    for name in ("cocotb.accelgen_axi_top", "cocotb"):
        logging.getLogger(name).setLevel(logging.WARNING)
    dut.aresetn.value = 0
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.aclk, dut.aresetn, reset_active_level=False)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.aclk, dut.aresetn, reset_active_level=False)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.aclk, dut.aresetn, reset_active_level=False)
    # both streams stall now and then: the shell's back-pressure paths run in every case
    source.set_pause_generator(itertools.cycle([0, 0, 0, 1, 0, 1]))
    sink.set_pause_generator(itertools.cycle([0, 1, 0, 0, 1, 1, 0]))
    await _reset(dut)
    edges = _Edges(dut, regs.address("ctrl"))
    cocotb.start_soon(edges.run())
    await axil.write_dword(regs.address("irq_enable"), regs["irq_enable"].value(done=1))
    results = []
    for i, entry in enumerate(jobs):
        job = Job.from_dict(entry["job"])
        if entry.get("abort_after"):
            # the job started, reset in the middle of its run, then run again from the start
            # (what the PEs accumulated must not leak into the next run)
            await _execute(program(job, streams=False), axil, source, sink,
                           abort=(dut, regs.address("ctrl"), entry["abort_after"]))
            await axil.write_dword(regs.address("irq_enable"), regs["irq_enable"].value(done=1))
        try:
            outputs, cycles = await _execute(program(job, streams=entry["streams"],
                                                     poll_limit=entry["timeout_cycles"] // 4 + 16),
                                             axil, source, sink)
            finished = True
        except AccelgenError as err:
            dut._log.error("%s: %s", entry["name"], err)
            outputs, cycles, finished = [], -1, False
        results.append({"name": entry["name"], "finished": finished, "measured_cycles": cycles,
                        "irq_cycles": edges.cycles() if finished else None, "streams": entry["streams"],
                        "outputs": outputs})
    Path(os.environ["ACCELGEN_RESULTS"]).write_text(json.dumps(results))
