"""A simple dual-port RAM (one write port, one registered read port) as a small Verilog module
that the top level instantiates.

Amaranth 0.5 writes every word of a ``Memory``'s initial contents into the Verilog, which made
the L2 of a 64-PE design 26 MB of text and 90 s of emission.  This module has no initial
contents (the host writes what a layer reads and clears the outputs before ``start``), is inferred
as block RAM by Yosys (ECP5, iCE40, Xilinx) and by vendor tools, and costs a few lines whatever
its depth.

A read of the word written in the same cycle is left undefined (Yosys's ``no_rw_check``): the
accelerator never needs it (the host writes the inputs and weights only while the accelerator is
idle, and the loader reads them only while it runs; the drain reads an output word three cycles
before it writes it back, and no other access to that word falls between; the host bus makes one
access a cycle), and the logic that would make a block RAM return the old word (an address
comparison, a copy of the written word and a choice, about 40 LUT4 and 30 flip-flops a block RAM
on an ECP5) lay on the paths from the loader's address to the banks.  The simulators return the
old word."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Instance, Module, Shape, Signal

__all__ = ["RAM_MODULE", "RAM_VERILOG", "Ram"]

RAM_MODULE = "accelgen_ram"
RAM_VERILOG = f"""\
// {RAM_MODULE}: one write port, one registered read port; a read of the word written in the
// same cycle is undefined (no_rw_check: the design never makes one).
module {RAM_MODULE} #(parameter WIDTH = 8, parameter DEPTH = 1, parameter ABITS = 1) (
  input  wire             clk,
  input  wire             we,
  input  wire [ABITS-1:0] waddr,
  input  wire [WIDTH-1:0] wdata,
  input  wire [ABITS-1:0] raddr,
  output reg  [WIDTH-1:0] rdata
);
  (* no_rw_check *)
  reg [WIDTH-1:0] mem [0:DEPTH-1];
  always @(posedge clk) begin
    if (we)
      mem[waddr] <= wdata;
    rdata <= mem[raddr];
  end
endmodule
"""


@dataclass
class _Port:
    addr: Signal
    data: Signal
    en: Signal


class Ram:
    """``read`` and ``write`` ports shaped like ``amaranth.lib.memory``'s (``addr``, ``data``,
    ``en``; the read port is always enabled)."""

    def __init__(self, m: Module, name: str, width: int, depth: int, *, signed: bool = False):
        abits = max(1, (depth - 1).bit_length())
        shape = (width, signed)
        self.read = _Port(Signal(abits, name=f"{name}_raddr"), Signal(Shape(*shape), name=f"{name}_rdata"),
                          Signal(name=f"{name}_ren"))
        self.write = _Port(Signal(abits, name=f"{name}_waddr"), Signal(Shape(*shape), name=f"{name}_wdata"),
                           Signal(name=f"{name}_we"))
        m.submodules[name] = Instance(
            RAM_MODULE, p_WIDTH=width, p_DEPTH=depth, p_ABITS=abits,
            i_clk=ClockSignal("sync"), i_we=self.write.en, i_waddr=self.write.addr, i_wdata=self.write.data,
            i_raddr=self.read.addr, o_rdata=self.read.data)
