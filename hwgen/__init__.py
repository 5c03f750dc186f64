"""The RTL generator: the accelerator the ``hwgen`` cost-model preset times, in Amaranth.

* :mod:`hwgen.accelerator` — the core: host bus, banked L2, multicast NoC, controller, drain
* :mod:`hwgen.pe` — the processing element
* :mod:`hwgen.axi` — the IP top level: AXI4-Lite registers, AXI4-Stream in and out, ``irq``
* :mod:`hwgen.regmap` — the register map (SystemRDL), its C header and table
* :mod:`hwgen.emit`, :mod:`hwgen.ipfiles` — Verilog, register files, FuseSoC core, file lists,
  C example and the manifest of a design
* :mod:`hwgen.layout`, :mod:`hwgen.host` — a layer's L2 layout and the host driver

It takes the schedule from :mod:`costmodel.hwgen_preset` and never re-derives it; simulation
lives in :mod:`sim_tests`.  Submodules are imported on use (Amaranth loads
only when needed); the timing contract is ``docs/timing.md``.
"""

__all__: list[str] = []
