"""The host side of a layer (L2 layouts, configuration registers, the numpy reference) moved to
:mod:`hwgen.layout` so the host driver outside the tests (:mod:`hwgen.host`) shares it; this
module keeps the old import path."""

from hwgen.layout import Job, bus_address, make_job, random_operands, reference_output

__all__ = ["Job", "make_job", "reference_output", "random_operands", "bus_address"]
