"""Hardware descriptions: PEs, SIMD lanes, buffers, NoC levels, data widths, clock, and the
energy and area tables with their sources.

* :mod:`.hardware` — :class:`Hardware`, its YAML schema and the built-in designs (package data)
* :mod:`.tables` — energy and area coefficients, each with a recorded source
"""

from .hardware import (
                       BUILTIN_HARDWARE,
                       Hardware,
                       NoCLevel,
                       builtin_hardware,
                       hardware_from_dict,
                       hardware_from_yaml,
                       hardware_to_dict,
                       load_hardware,
                       transfer_cycles,
)

__all__ = ["BUILTIN_HARDWARE", "Hardware", "NoCLevel", "builtin_hardware", "hardware_from_dict",
           "hardware_from_yaml", "hardware_to_dict", "load_hardware", "transfer_cycles"]
