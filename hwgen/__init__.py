"""The RTL generator: the accelerator the ``hwgen`` cost-model preset times, in Amaranth.

* :mod:`hwgen.accelerator` — top level: host bus, banked L2, multicast NoC, controller, drain
* :mod:`hwgen.pe` — the processing element
* :mod:`hwgen.emit` — Verilog, the file list and the manifest of a design

It takes the schedule from :mod:`costmodel.hwgen_preset` and never re-derives it; simulation
and the host driver live in :mod:`sim_tests`.  Submodules are imported on use (Amaranth loads
only when needed); the timing contract is ``docs/timing.md``.
"""

__all__: list[str] = []
