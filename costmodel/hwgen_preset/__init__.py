"""The ``hwgen`` preset: the exact timing, traffic and buffers of the accelerator that
:mod:`hwgen` generates (``docs/timing.md``).  The generator and the host driver read the same
schedule, so model and RTL cannot drift.

* :mod:`.rules` — the rules every reader shares: which dimensions index which tensor, L1 sizing,
  stride compaction, the fixed cycle counts (:class:`~.rules.TimingConstants`)
* :mod:`.structure` — a dataflow as a generated structure; a layer as run-time tiles
* :mod:`.walk` — the steps one by one: the reference
* :mod:`.closed` — the same schedule in closed form: its cost does not grow with the steps (tested equal to the walk)
* :mod:`.preset` — what the analysis and ``emit`` call: structure, tiles and figures for a hardware
"""

__all__: list[str] = []
