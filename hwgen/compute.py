"""The compute engine: one counter nest over the step's PE tile (k, c, y, x, and the filter
positions ``f`` in steps of the SIMD lanes), broadcast to every PE with the L1 addresses it
points at through a register, and a per-PE enable where the position is inside the PE's own
tile.  One MAC issue a cycle per PE; the engine is busy only while it issues: the pipeline's
tail overlaps the next step, and the drain waits for it (``docs/timing.md``)."""

from __future__ import annotations

import functools
import operator

from dataclasses import dataclass, field

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetSignal, Signal, Value

from costmodel.hwgen_preset.rules import TIMING, l1_input_fields, l1_shape, l1_words, slide_extent
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, by_stride, pipe, registered, times, wire
from .controller import Controller
from .geometry import Geometry

__all__ = ["Compute", "ORDER", "PES_PER_OPERAND_COPY"]

ORDER = ("k", "c", "y", "x", "f")     # outermost first
#: PEs served by one copy of the operands' broadcast register (:meth:`Compute.operands`).
PES_PER_OPERAND_COPY = 4


@dataclass
class Compute:
    continues: Signal       # still busy next cycle (this issue is not the last)
    issue: Signal           # the engine issues a MAC at its counters' position this cycle
    issue_r: Signal         # ... the cycle before: the PEs read its operands this cycle
    counters: dict          # ORDER -> the position (the PEs' enables are registered from it)
    filter_rs: Signal       # R*S of the layer
    rd_in: list             # per SIMD lane: the L1 address of its input operand (every PE's; registered,
    #                         like rd_w, rd_on and ps_addr: the issue_r cycle's)
    rd_w: list              # ... of its weight
    rd_on: Signal           # bit j: lane j's filter position is inside the filter
    ps_addr: Signal         # the L1 address of the partial sum
    banks: dict             # "bank_in" / "bank_w" / "bank_ps" of the step computed, registered with them
    _m: Module = None       # (for the operands' copies)
    _raw: dict = None       # the operands' addresses and banks before their broadcast register
    _copies: dict = field(default_factory=dict)

    @classmethod
    def build(cls, m: Module, s: HwStructure, g: Geometry, ctl: Controller) -> "Compute":
        cp = ctl.cp
        # the step's extents, and whether each is at most 1 (a counter at 0 is then at its end)
        # (and the extent less three steps, signed: a counter at or past it is a step from its
        # end after its next move, compared with no sum before the comparison)
        ld_ext = [ctl.ahead(m, "ld", f"cp_ext_{di}", *g.pe_tile_stages(di, 0, 0),
                            lambda e: {"n": e, "one": e <= 1, "two": e <= 2, "less3": (e - 3).as_signed()})
                  for di in range(4)]
        cp_ext = [ctl.later(m, e, "cp") for e in ld_ext]
        c_active = Signal(name="c_active")
        rs = g.rs
        mac = {n: Signal(COORD, name=f"mac_{n}") for n in ORDER}
        less3 = dict(zip(ORDER, [e["less3"] for e in cp_ext]
                         + [g.static((rs - 3 * s.simd_lanes).as_signed(), "filt_rs_less3")]))
        steps_by = {"k": 1, "c": 1, "y": 1, "x": 1, "f": s.simd_lanes}   # the lanes take simd filter positions
        # Whether each counter is at its end (its next value would reach its bound) is a
        # register, worked out when the counter moves, so the engine's last issue is known from
        # registers: it feeds the controller's shift, whose fanout is wide.  While the engine
        # is idle, and at its last issue, the flags follow the step in ld (whether each extent
        # is at most 1), which is the step computed from the next go on: so they are right at
        # go too, with no choice made by go.  Whether it is a step from its end is a register
        # too, so the end flag's next value is a choice of registers, with no sum or compare:
        # the last issue is known early enough for the engine's own "busy next cycle".
        one_issue = g.static(rs <= s.simd_lanes, "filt_one_issue", 1)
        two_issues = g.static(rs <= 2 * s.simd_lanes, "filt_two_issues", 1)
        first_end = dict(zip(ORDER, [e["one"] for e in cp_ext] + [one_issue]))
        next_end = dict(zip(ORDER, [e["one"] for e in ld_ext] + [one_issue]))
        first_near = dict(zip(ORDER, [e["two"] for e in cp_ext] + [two_issues]))
        next_near = dict(zip(ORDER, [e["two"] for e in ld_ext] + [two_issues]))
        end_r = {n: Signal(name=f"mac_{n}_end") for n in ORDER}
        near_r = {n: Signal(name=f"mac_{n}_near") for n in ORDER}     # a step from its end
        all_end = Signal(name="mac_all_end")        # every counter at its end: the last issue
        c_issue = wire(m, ctl.go_compute | c_active, "c_issue")
        def wraps(ends, last, tag):
            """Per counter, innermost first: whether every counter inside it is at its end (it
            moves or wraps at an issue), each an AND of the end flags, not a chain."""
            wrap, inner = [Const(1)], []
            for n in reversed(ORDER[1:]):
                inner.append(ends[n])
                wrap.append(wire(m, Cat(*inner).all(), f"c_wrap{tag}_{n}"))
            return wrap + [last]
        # (which counters wrap at this issue: registers of the same ANDs of the end flags' next
        # values, below, so a counter's end flag takes one choice after the registers)
        c_wrap = [Const(1)] + [Signal(name=f"c_wrap_{n}") for n in reversed(ORDER[1:])] + [all_end]
        bumps = {}                    # the counter that moves at this issue (the ones inside it wrap)
        end_next = {}
        idle_or_last = wire(m, ~c_issue | all_end, "c_idle_or_last")
        with m.If(c_issue):
            m.d.sync += c_active.eq(~all_end)
        for i, n in enumerate(reversed(ORDER)):
            bumps[n] = wire(m, c_wrap[i] & ~end_r[n], f"c_bump_{n}")
        for i, n in enumerate(reversed(ORDER)):
            # idle, or the last issue: the step in ld's; else as the counter moves
            end_next[n] = wire(m, Mux(idle_or_last, next_end[n],
                                      Mux(bumps[n], near_r[n], Mux(c_wrap[i], first_end[n], end_r[n]))),
                               f"mac_{n}_end_next")
            m.d.sync += near_r[n].eq(Mux(idle_or_last, next_near[n],
                                         Mux(bumps[n], mac[n] >= less3[n],
                                             Mux(c_wrap[i], first_near[n], near_r[n]))))
        m.d.sync += [end_r[n].eq(end_next[n]) for n in ORDER]
        # (every counter at its end next cycle: the same value as the AND of end_next, with the
        # idle-or-last choice taken last, so its path from c_active is that choice and not the
        # five choices and the ANDs after them, which synthesis shares with the wraps' ANDs as
        # a chain: on tiny's routed critical path, seed 1, six LUTs across the device)
        moving_end = [Mux(bumps[n], near_r[n], Mux(c_wrap[i], first_end[n], end_r[n]))
                      for i, n in enumerate(reversed(ORDER))]
        all_next = wire(m, Mux(idle_or_last, Cat(*next_end.values()).all(), Cat(*moving_end).all()),
                        "mac_all_end_next")
        m.d.sync += all_end.eq(all_next)
        # Busy next cycle, a register: it issues then (the shift now, with a step to compute,
        # or an issue now that is not the last), and that issue is not the last
        active_next = wire(m, Mux(c_issue, ~all_end, c_active), "c_active_next")
        continues_next = wire(m, (ctl.go_next["compute"] | active_next) & ~all_next, "c_continues_next")
        c_continues = registered(m, continues_next, "c_continues")
        # The counters and the operand addresses move by registers of what happens at the
        # issue (whether the engine issues; per counter, whether it moves, and whether it
        # wraps to 0), worked out a cycle ahead from the end flags' next values, a kept set of
        # them for each group of registers that moves (the counters, and each tensor's bases):
        # the flags above reach only the logic that decides the last issue and the engine's
        # "busy next cycle", which then sits together on the device, and each group chooses
        # by its own registers, not by logic of registers spread among the operand addresses'
        issue_next = wire(m, ctl.go_next["compute"] | active_next, "c_issue_next")
        wrap_next = wraps(end_next, all_next, "_n")
        m.d.sync += [r.eq(v) for r, v in zip(c_wrap[1:-1], wrap_next[1:-1])]
        moves_next = {}
        for i, n in enumerate(reversed(ORDER)):
            moves_next[n] = wire(m, issue_next & wrap_next[i] & ~end_next[n], f"c_bump_{n}_next")
            moves_next[f"{n}_zero"] = wire(m, issue_next & wrap_next[i] & end_next[n], f"c_zero_{n}_next")

        def moves(group, zeros=False):
            """The issue's moves (``issue``; per counter ``n``, moving ``n``, and with ``zeros``
            wrapping ``n_zero``), kept registers for one group of the registers they move."""
            return {"issue": pipe(m, issue_next, f"c_issue_{group}"),
                    **{k: pipe(m, v, f"c_{k}_{group}") for k, v in moves_next.items() if zeros or k in ORDER}}
        mv = moves("mac", zeros=True)
        for n in ORDER:
            with m.If(mv[n]):
                m.d.sync += mac[n].eq(mac[n] + steps_by[n])
            with m.Elif(mv[f"{n}_zero"]):
                m.d.sync += mac[n].eq(0)
        # (the filter position's next value, for the operand offsets' registers: _addresses;
        # its moved value is a register kept a step ahead of it, so no sum lies between the
        # position and the offsets' choice: on tiny's routed critical path, seed 3, the sum's
        # carry chain sat before that choice)
        f_plus = Signal(COORD, name="mac_f_plus", init=steps_by["f"])
        with m.If(mv["f"]):
            m.d.sync += f_plus.eq(f_plus + steps_by["f"])
        with m.Elif(mv["f_zero"]):
            m.d.sync += f_plus.eq(steps_by["f"])
        f_next = wire(m, Mux(mv["f"], f_plus, Mux(mv["issue"], 0, mac["f"]))[:COORD], "mac_f_next", COORD)
        # (a sliding design: where the step's input window starts in its L1, its first column
        # modulo M and its first row modulo M_y, as fields of an address: rules.l1_input_fields)
        origin = None
        fields = l1_input_fields(s)
        if fields:
            def first(d):
                starts = {"col": (3, g.stride_x, "X"), "row": (2, g.stride_y, "Y")}
                parts = []
                for name, bits in fields:
                    di, stride, dim = starts[name]
                    parts.append(by_stride(d.start[di], stride, s.max_stride)[:bits] if slide_extent(s, dim)
                                 else Const(0, bits))
                return Cat(*parts)
            ld_origin = ctl.ahead(m, "ld", "cp_origin", first)
            origin = {"ld": wire(m, Mux(ctl.ld.valid, ld_origin, 0), "cp_origin_next", len(ld_origin)),
                      "cp": ctl.later(m, ld_origin, "cp")}
        rd_in, rd_w, rd_on, ps_addr = cls._addresses(m, s, g, mac, f_next, rs, moves, origin)
        # What the PEs are told is registered before the broadcast (its wires reach every PE),
        # the banks of the step computed with it, and again at each PE's input, so they see an
        # issue two cycles after it: the PEs read its operands at t+2, take them into the
        # multiplier at t+3, multiply at t+4, register the product beside the partial sums at
        # t+5 and write the partial sum at t+6.  The engine is busy only while it issues
        # (COMPUTE_LATENCY 0): the next step's issues follow at the same pace, and the drain of
        # this step waits for the last writes (DRAIN_WAIT; docs/timing.md, "The MAC pipeline")
        assert TIMING.compute_latency_cycles == 0 and TIMING.drain_wait_cycles == 5, \
            "a broadcast register at each end and the PE's five-stage MAC (hwgen/pe.py)"

        def bcast(value, name):
            return registered(m, value, name)
        issue_r = bcast(mv["issue"], "c_issue_r")
        raw = {"rd_in": rd_in, "rd_w": rd_w, "bank_in": cp.bank_in, "bank_w": cp.bank_w, "issue": mv["issue"],
               "rd_on": rd_on, "ps_addr": ps_addr, "bank_ps": cp.bank_ps}
        banks = {name: bcast(getattr(cp, name), f"cp_{name}_r") for name in ("bank_in", "bank_w", "bank_ps")}
        rd_in = [bcast(a, f"rd_in{j}_r") for j, a in enumerate(rd_in)]
        rd_w = [bcast(a, f"rd_w{j}_r") for j, a in enumerate(rd_w)]
        compute = cls(c_continues, c_issue, issue_r, mac, rs, rd_in, rd_w,
                      bcast(rd_on, "rd_on_r"), bcast(ps_addr, "ps_addr_r"), banks, m, raw)
        compute.continues_next = continues_next     # (for the controller's copies of the register)
        return compute

    def operands(self, group: int) -> dict:
        """The operand addresses and banks, the issue, the lanes' filter flags and the partial
        sum's address and bank broadcast to group ``group`` of the PEs
        (:data:`PES_PER_OPERAND_COPY` of them): group 0 has the registers above, every other its
        own kept copy of them, so each register reaches a few PEs' read copies (each PE keeps a
        copy of the address for each bit it reads, ``hwgen/pe.py``)."""
        if group == 0:
            return {"rd_in": self.rd_in, "rd_w": self.rd_w, "bank_in": self.banks["bank_in"],
                    "bank_w": self.banks["bank_w"], "issue": self.issue_r, "rd_on": self.rd_on,
                    "ps_addr": self.ps_addr, "bank_ps": self.banks["bank_ps"]}
        if group not in self._copies:
            raw, m = self._raw, self._m
            self._copies[group] = {
                "rd_in": [pipe(m, a, f"rd_in{j}_r_g{group}") for j, a in enumerate(raw["rd_in"])],
                "rd_w": [pipe(m, a, f"rd_w{j}_r_g{group}") for j, a in enumerate(raw["rd_w"])],
                **{name: pipe(m, raw[name], f"cp_{name}_r_g{group}") for name in ("bank_in", "bank_w", "bank_ps")},
                # (the issue, a control bit the reset clears; the addresses are data)
                "issue": pipe(m, raw["issue"] & ~ResetSignal(), f"c_issue_r_g{group}"),
                "rd_on": pipe(m, raw["rd_on"], f"rd_on_r_g{group}"),
                "ps_addr": pipe(m, raw["ps_addr"], f"ps_addr_r_g{group}")}
        return self._copies[group]

    @staticmethod
    def _addresses(m: Module, s: HwStructure, g: Geometry, mac: dict, f_next, rs, moves, window=None):
        """The L1 addresses the counters point at, the same in every PE (its L1 is laid out by
        the largest tile): input ``[c][rows][cols]``, weight ``[k][c][R][S]``, partial sums
        ``[k][y][x]``; the SIMD lanes take filter positions ``f .. f+simd-1``.  The window's
        base in each tensor is counted alongside the counters (no multiplier: a register and
        one add per lane from a small table of ``f`` before the broadcast).  In a sliding design
        (``window``: where the input window starts, of the step in ``ld`` and in ``cp``) an input row is
        ``M`` columns holding column ``x`` at ``x mod M`` (:func:`.rules.slide_extent`), or a
        channel ``M_y`` rows holding row ``y`` at ``y mod M_y``: the address's low fields
        (:func:`.rules.l1_input_fields`) are counted each modulo its size, apart from the others.
        ``moves(group)``: the issue's moves, registers for each tensor's bases (:meth:`build`)."""
        fields = l1_input_fields(s)

        def field_add(a, b):
            """``a + b`` field by field, each wrapping (the channel's bits add apart)."""
            a, b = Value.cast(a), Value.cast(b)
            parts, lo = [], 0
            for _, bits in fields:
                parts.append((a[lo:lo + bits] + b[lo:lo + bits])[:bits])
                lo += bits
            parts.append((a[lo:] + b[lo:])[:COORD - lo])
            return Cat(*parts)
        t = s.pe_tile_max
        words = {name: banks * rows for name, (banks, rows) in l1_shape(s).items()}
        words["output"] = l1_words(t, s.max_stride)["output"]
        shape = {name: range(max(2, n)) for name, n in words.items()}
        # (the pitches of the layer's L1 layout, configuration registers the host works out:
        # hwgen.layout.config_registers)
        row = g.cfg["l1_in_row"]
        row_step = g.static(by_stride(row, g.stride_y, s.max_stride)[:COORD], "rd_row_step", COORD)
        # (at the counter that moves, the tensor's base moves by its stride there; the bases
        # of the levels outside it are kept to restart from; the levels inside restart)
        levels = {
            "in": ("c", {"c": g.cfg["l1_in_ch"], "y": row_step, "x": g.stride_x}),
            "w": ("k", {"k": g.cfg["l1_w_k"], "c": g.rs}),
            "ps": ("k", {"k": t["Y"] * t["X"], "y": t["X"], "x": 1}),
        }
        base = {}
        for name, (_, strides) in levels.items():
            mv = moves(name)
            issue, bumps = mv["issue"], {n: mv[n] for n in ORDER}
            dims = [n for n in ORDER if n in strides]          # outermost first
            regs = {n: Signal(COORD, name=f"rd_{name}_at_{n}") for n in dims}   # base where n last moved
            cur = regs[dims[-1]]
            base[name] = cur
            # (the input's base starts at the window's first column: 0, or in a sliding design
            # the step's column modulo M; the next step's at the last issue)
            origin = {"cp": Const(0, COORD), "ld": Const(0, COORD)}
            if name == "in" and window is not None:
                origin = window
            # each register's choices, one per counter that sets it (a counter the base follows
            # sets it and the bases inside it; a move of a counter no tensor base follows (f;
            # y, x for the weight) keeps the base outside it, which the inner ones restart
            # from), and at the last issue the restart: at most one counter moves at an issue,
            # so the choice is an AND-OR of them, not a chain of priorities
            choices = {d: [] for d in dims}
            for i, n in enumerate(ORDER):
                if n in strides:
                    nxt = wire(m, field_add(regs[n], strides[n]) if name == "in" else (regs[n] + strides[n])[:COORD],
                               f"rd_{name}_next_{n}", COORD)
                    for d in dims:
                        if ORDER.index(d) >= i:
                            choices[d].append((bumps[n], nxt))
                else:
                    outer = [d for d in dims if ORDER.index(d) < i]
                    keep = regs[outer[-1]] if outer else origin["cp"]
                    for d in dims:
                        if ORDER.index(d) > i:
                            choices[d].append((bumps[n], keep))
            restart = wire(m, ~Cat(*[bumps[n] for n in ORDER]).any(), f"rd_{name}_restart")   # the last issue
            with m.If(issue):
                for d in dims:
                    terms = choices[d] + [(restart, origin["ld"])]
                    value = functools.reduce(operator.or_, [Mux(c, v, 0) for c, v in terms])
                    with m.If(Cat(*[c for c, _ in terms]).any()):
                        m.d.sync += regs[d].eq(value[:COORD])
        ps_addr = wire(m, base["ps"], "ps_addr", shape["output"])
        max_rs = t["R"] * t["S"]
        # each filter position's offset in the input L1, (f // S) * row + f % S, a static
        # register per position, so an operand's address is a register chosen by f plus the
        # base: the row pitch's multiples and which S the layer has (registers), then a choice
        # over the S values the design allows, plus a constant
        row_times = [g.static(times(r, row)[:COORD], f"rd_row_x{r}", COORD) for r in range(t["R"])]
        s_is = {sv: g.static(g.S == sv, f"rd_s_is{sv}", 1) for sv in range(1, t["S"] + 1)}
        offsets = []
        for v in range(max_rs):
            value = Const(0, COORD)
            for sv in range(1, t["S"] + 1):
                if v // sv < t["R"]:
                    value = Mux(s_is[sv], (row_times[v // sv] + v % sv)[:COORD], value)
            offsets.append(g.static(value, f"rd_ofs_in_f{v}", COORD))
        rd_in, rd_w, on = [], [], []
        for lane in range(s.simd_lanes):
            f = wire(m, mac["f"] + lane, f"rd_f{lane}", COORD)
            # (the offset a register, chosen from the position's next value: the sum below
            # is all that lies before the operand's broadcast registers, one of which is a
            # copy beside each group of PEs, across the device)
            ofs_in = registered(m, Array(offsets)[(f_next + lane)[:COORD]], f"rd_ofs_in{lane}", COORD)
            rd_in.append(wire(m, field_add(base["in"], ofs_in), f"rd_in{lane}", shape["input"]))
            # (the filter's words are consecutive in its L1: its position is the offset)
            rd_w.append(wire(m, base["w"] + f, f"rd_w{lane}", shape["weight"]))
            on.append(f < rs)
        return rd_in, rd_w, wire(m, Cat(*on), "rd_on", s.simd_lanes), ps_addr
