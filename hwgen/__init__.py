"""The RTL generator: the accelerator the ``hwgen`` cost-model preset times, in Amaranth.

* :mod:`hwgen.accelerator` — top level: host bus, banked L2, multicast NoC, controller, drain
* :mod:`hwgen.pe` — the processing element
* :mod:`hwgen.host` — L2 layouts, configuration registers, the numpy reference
* :mod:`hwgen.sim` — Verilog emission and cocotb runs on Icarus / Verilator
* :mod:`hwgen.matrix`, :mod:`hwgen.validate` — the RTL test matrix and ``make validate-rtl``

Submodules are imported on use (Amaranth and cocotb load only when needed); the timing contract
is ``docs/timing.md``.
"""

__all__: list[str] = []
