"""cocotb bench for the generated accelerator: a host driver that runs the jobs in
``$ACCELGEN_JOBS`` (JSON written by :mod:`rtl_cases`) and writes what it measured to
``$ACCELGEN_RESULTS``.  One simulator build runs every job of a design."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


async def _write(dut, addr: int, value: int) -> None:
    dut.bus_addr.value = addr
    dut.bus_wdata.value = value & 0xFFFFFFFF
    dut.bus_we.value = 1
    await RisingEdge(dut.clk)
    dut.bus_we.value = 0


async def _read(dut, addr: int) -> int:
    dut.bus_addr.value = addr
    dut.bus_re.value = 1
    await RisingEdge(dut.clk)
    dut.bus_re.value = 0
    await ReadOnly()
    value = dut.bus_rdata.value.to_unsigned()
    await RisingEdge(dut.clk)
    return value


@cocotb.test()
async def run_jobs(dut) -> None:
    jobs = json.loads(Path(os.environ["ACCELGEN_JOBS"]).read_text())
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.bus_we.value = 0
    dut.bus_re.value = 0
    dut.bus_addr.value = 0
    dut.bus_wdata.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    results = []
    for job in jobs:
        for addr, value in job["writes"]:
            await _write(dut, addr, value)
        await _write(dut, job["start"], 1)
        limit = job["timeout_cycles"]
        waited = 0
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if dut.done.value == 1:
                break
            waited += 1
            if waited > limit:
                break
        await RisingEdge(dut.clk)
        finished = waited <= limit
        cycles = await _read(dut, job["cycles"]) if finished else -1
        outputs = []
        if finished:
            for i in range(job["output_words"]):
                raw = await _read(dut, job["output_base"] + i)
                outputs.append(raw - (1 << 32) if raw & (1 << 31) else raw)
        results.append({"name": job["name"], "finished": finished, "measured_cycles": cycles,
                         "outputs": outputs})
    Path(os.environ["ACCELGEN_RESULTS"]).write_text(json.dumps(results))
