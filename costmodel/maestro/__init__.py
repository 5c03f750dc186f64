"""The ``maestro`` preset: MAESTRO's step model in closed form, and its check against MAESTRO's
printed figures.

* :mod:`.levels` — one cluster level of a dataflow: its maps, states and per-step traffic
* :mod:`.engine` — the levels of a layer, analysed (structure) and timed
* :mod:`.cases` — the case tables (Init / Steady / Edge combinations and their counts)
* :mod:`.timing` — cycles of every case, vectorised over hardware points
* :mod:`.validate` — ``make validate-maestro``: agreement with ``data/maestro_reference.csv``
"""

__all__: list[str] = []
