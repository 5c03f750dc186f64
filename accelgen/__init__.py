"""accelgen's composition layer: the ``accelgen`` command line and report rendering.

The only package that imports the cost model (:mod:`costmodel`), the RTL generator
(:mod:`hwgen`) and the verification code (:mod:`sim_tests`) together.

* :mod:`.cli` — the parser, the subcommands' table and ``main``
* :mod:`.options` — argument groups shared by the subcommands, and atomic output
* :mod:`.analyze` — ``analyze`` and ``list``
* :mod:`.explore` — ``explore``
* :mod:`.hwcommands` — ``emit`` and ``verify``
* :mod:`.flow`, :mod:`.flow_report` — ``flow`` and its report
* :mod:`.report` — tables, JSON and CSV of analysis results
"""

__all__: list[str] = []
