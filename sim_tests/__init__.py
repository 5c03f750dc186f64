"""Verification of the generated RTL: the simulator environment (:mod:`.simenv`), the cocotb
runner (:mod:`.runner`), the host driver that lays tensors out in L2 and writes the
configuration registers (:mod:`.driver`), the cocotb benches (``tb_*.py``), the RTL case matrix
(:mod:`.matrix`, data in ``cases.yaml``) and ``make validate-rtl`` (:mod:`.validate`).

The ``test_*.py`` files are the pytest side: every case runs on Icarus and Verilator and asserts
bit-exact outputs and ``measured == predicted`` to the cycle.
"""

__all__: list[str] = []
