"""The controller: walks the dataflow's loop nest as an odometer and runs it in *slots*.  Slot
``k`` loads step ``k``, computes step ``k-1`` and drains step ``k-2`` (three step descriptors,
``ld``, ``cp``, ``dr``).  Each engine tells the controller whether it will still be busy next
cycle; in the cycle none will, the descriptors shift and ``go`` (a register) starts the next
slot's engines the cycle after, so a slot lasts as long as its longest engine, at least the one
``go`` cycle (``docs/timing.md``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.hdl import Cat, Const, Module, Mux, ResetSignal, Signal, Value

from costmodel.hwgen_preset.rules import LOOP_DIMS, OUTPUT_DIMS, TENSOR_LOOP_DIMS, TIMING, sliding
from costmodel.hwgen_preset.structure import HwStructure

from .common import COORD, kept_copy, multiply, pipe, registered, times, wire
from .geometry import Desc, Geometry

__all__ = ["Controller", "Product"]


def _at_least_zero(diff) -> Value:
    """``max(diff, 0)`` of a difference of unsigned coordinates, as an unsigned coordinate."""
    diff = Value.cast(diff).as_signed()
    return Mux(diff[-1], 0, diff[:COORD])


@dataclass(frozen=True)
class Product:
    """What a stage function of :meth:`Controller.ahead` returns for ``a * b``: ``a`` a register
    of the stage before, ``b`` a static or configuration register.  The stage's register is then
    the output register of a registered multiplier (:func:`.common.multiply`) whose input
    registers take ``a``'s value when ``a`` does and ``b`` in every cycle (a static register's
    copy, a stage later): the multiplier's paths are the wires to and from it."""
    a: Signal
    b: Signal
    width: int


@dataclass
class Controller:
    running: Signal
    done: Signal
    cycles: Signal          # start to done
    go: Signal              # a slot starts: every engine takes its descriptor
    go_load: Signal         # ... and the step loaded has a tensor to load (go & ld.valid & (ld_in | ld_w))
    go_compute: Signal      # ... and there is a step to compute (go & cp.valid)
    go_drain: Signal        # ... and the step drained ends its output tile (go & dr.valid & dr.ends)
    ld: Desc                # the step being loaded
    cp: Desc                # the step being computed
    dr: Desc                # the step being drained
    engines_continue: Signal  # driven by the top level: an engine is still busy next cycle
    flushing: Signal        # driven by the top level: the drain's pipeline has writes in flight
    busy: Signal            # running (or in the cycle after), or starting (the start write is in its delay)
    shift: Signal | None = None     # (after elaborate) the descriptors shift at this cycle's edge
    slide_pre: dict | None = None   # (after elaborate) "X" / "Y": the input's window in pre slid from ld's (a register)
    pre: Desc | None = None         # (after elaborate) the step after ld
    pos: Desc | None = None         # (after elaborate) the odometer: the step after pre
    go_walk: Signal | None = None   # (after elaborate) a kept copy of go, for the drain's walk
    go_next: dict | None = None     # (after elaborate) "load" / "compute" / "drain": go_* of the next cycle
    #: ``busy`` a cycle early, from registers and the start write only: a kept copy of it
    #: (:func:`.common.pipe`) is ``busy``, beside the L2 banks whose host writes it gates
    busy_soon: Signal = field(default_factory=lambda: Signal(name="busy_soon"))
    _taken: dict = field(default_factory=dict)      # id of a stage register -> (it, its value, settled)

    @classmethod
    def build(cls) -> "Controller":
        """The controller's registers; :meth:`elaborate` adds its logic once the host bus (which
        reads them and gives ``start``) exists."""
        return cls(Signal(name="running"), Signal(name="done"), Signal(32, name="cycles"), Signal(name="go"),
                   Signal(name="go_load"), Signal(name="go_compute"), Signal(name="go_drain"),
                   Desc.named("ld"), Desc.named("cp"), Desc.named("dr"), Signal(name="engines_continue"),
                   Signal(name="flushing"), Signal(name="busy"))

    def elaborate(self, m: Module, s: HwStructure, g: Geometry, start_write: Signal) -> None:
        """The odometer and the slot sequencing; ``start_write`` (the host's write of start)
        restarts the walk ``start_delay_cycles`` later, and the ``cycles`` count from it: the
        delay gives the configuration's products time to settle (:meth:`Geometry.static`), so a
        static register may be that many stages deeper.  The odometer runs
        two steps ahead of the step loaded: ``pos`` (with ``more``) is the step after ``pre``,
        which is the step after ``ld``, so a step's quantities have two slots to be computed in
        (:meth:`ahead`)."""
        ld, cp, dr, go = self.ld, self.cp, self.dr, self.go
        self._m = m
        assert TIMING.start_cycles == TIMING.start_delay_cycles + 4, "the delay, then two shifts each after a hold cycle"
        starting = [Signal(name=f"starting{k}") for k in range(TIMING.start_delay_cycles)]
        m.d.sync += [starting[0].eq(start_write)] + [starting[k].eq(starting[k - 1]) for k in range(1, len(starting))]
        start = starting[-1]
        # (busy: starting, running, or the cycle after running; a register of ``busy_soon``, its
        # next value, so the host's start write, which it guards, meets no wire of ``running``.
        # Its copies beside the L2 banks and at the output port register busy_soon likewise,
        # and the drain's copies of running a cycle late (running_copy) come from no stop logic)
        m.d.comb += self.busy_soon.eq((start_write | Cat(*starting).any() | self.running) & ~ResetSignal("sync"))
        m.d.sync += self.busy.eq(self.busy_soon)
        pos_b0 = [Signal(COORD, name=f"pos_b0_{d}") for d in LOOP_DIMS]
        pos_r1 = [Signal(COORD, name=f"pos_r1_{d}") for d in LOOP_DIMS]
        more = Signal(name="more")
        pre = Desc.named("pre")
        self.pre = pre

        def tensor_differs(a: Desc, b: Desc, dims):
            return Cat(*[(a.b0[LOOP_DIMS.index(d)] != b.b0[LOOP_DIMS.index(d)])
                         | (a.r1[LOOP_DIMS.index(d)] != b.r1[LOOP_DIMS.index(d)])
                         for d in dims]).any()

        def settled(expr, name):
            """``expr`` of the odometer's and the descriptors' registers, as a register computed
            in every cycle: they change only at a shift (or ``start``) and are not read for the
            next one until two cycles later (``hold``), so it is right whenever it is read."""
            return registered(m, expr, name)

        # (ld.valid as these flags read it: a kept copy beside them, below, since ld.valid's own
        # register reaches logic across the device)
        ld_valid = Signal(name="ld_valid_cmp")
        new_in = settled(~ld_valid | tensor_differs(pre, ld, TENSOR_LOOP_DIMS["input"]), "new_in")
        # along which axis the input's window in pre slid from ld's (rules.slides): the same
        # positions along the input's other loop dims, the start along the axis past ld's (b0
        # then r1, compared as a pair: b0 is a multiple of the level-0 tile, r1 below it), at a
        # stride narrower than the filter; the loader then sends its new columns or rows
        # (Loader.build) into the same buffer as ld's
        self.slide_pre = {}
        for d in "XY":
            self.slide_pre[d] = Const(0, 1)
            if sliding(s, d):
                di = LOOP_DIMS.index(d)
                forward = (pre.b0[di] > ld.b0[di]) | ((pre.b0[di] == ld.b0[di]) & (pre.r1[di] > ld.r1[di]))
                stride = g.stride_x if d == "X" else g.stride_y
                narrow = g.static(stride < (g.S if d == "X" else g.R), f"slide_narrow_{d}", 1)
                others = [o for o in TENSOR_LOOP_DIMS["input"] if o != d]
                self.slide_pre[d] = settled(ld_valid & narrow & ~tensor_differs(pre, ld, others) & forward,
                                            f"slide_pre_{d}")
        new_w = settled(~ld_valid | tensor_differs(pre, ld, TENSOR_LOOP_DIMS["weight"]), "new_w")
        ld_ends = settled(~pre.valid | tensor_differs(pre, ld, OUTPUT_DIMS), "ld_ends")
        # whether the step in cp ends its output tile (~ld.valid | ld's output tile differs from
        # cp's): a register that takes ``ld_ends`` at the shift (the pair moves on as (ld, cp)),
        # 1 at start (ld not valid), so it needs no comparison of its own
        cp_ends = Signal(name="cp_ends")
        work_now = wire(m, more | pre.valid | ld.valid | (cp.valid & cp_ends), "work_now")
        work = settled(work_now, "work")
        # ``hold``: the cycle after start or after a shift, when the first register stage of
        # the quantities (:meth:`ahead`) and the settled flags are computed from the new
        # positions: no shift then (MIN_SLOT = 2; docs/timing.md).  ``ready``: running, not
        # held and with work, a register (the descriptors, which ``work`` reads, change only at
        # a shift or start), so the shift, whose fanout is the widest, is a few gates from
        # registers: ready and no engine busy next cycle.
        #
        # The shift enables about a thousand registers over the whole device (the descriptors,
        # the odometer, every stage of :meth:`ahead`), so it is decoded in several copies
        # (:meth:`shift_copy`), each for one group of them: a kept copy of ``ready`` (so
        # synthesis does not merge them) and the engines' three registers, one LUT.  The
        # odometer's copy has ``more`` in its ``ready`` (``more`` changes only at a shift or
        # start, after which ``ready`` is 0), so its positions' enables are that copy and a
        # settled register.
        hold = Signal(name="hold")
        # (``start`` comes only while not running, so never with ``ready``)
        self._ready_terms = wire(m, self.running & ~start & work_now, "ready_terms")
        self._shifts = {}
        # (the engines' "busy next cycle" registers, in kept copies that the shift's copies
        # share out in turn: connect_engines)
        self._continue_copies = [Signal(3, name=f"engines_continue{i}") for i in range(self.CONTINUE_COPIES)]
        self.shift = self.shift_copy("desc")
        self._ready_next = wire(m, self._ready_terms & ~self.shift, "ready_next")
        self._n_staged = 0
        shift_odo = self.shift_copy("odo", also=more)
        # (ld.valid's updates below, start's last: the first true one here)
        kept_copy(m, ld_valid.name, 1, [(start, 0), (self.shift_copy("ld_valid"), pre.valid)], q=ld_valid)
        m.d.sync += hold.eq(start | self.shift)
        # each engine's go: the shift, with work for it in the step moving in (the engines read
        # these for whether they are busy next cycle)
        go_shift = self.shift_copy("go")
        self.go_next = {"load": wire(m, go_shift & pre.valid & (new_in | new_w), "go_load_next"),
                        "compute": wire(m, go_shift & ld.valid, "go_compute_next"),
                        "drain": wire(m, go_shift & cp.valid & cp_ends, "go_drain_next")}
        m.d.sync += [self.go_load.eq(self.go_next["load"]), self.go_compute.eq(self.go_next["compute"]),
                     self.go_drain.eq(self.go_next["drain"])]
        # (go for the drain's walk, which takes the dr step's first group at every go: a kept
        # copy beside it, equal to ``go``, which is a register of the shift (set at a shift,
        # cleared in every other running cycle, and the cycle that stops has no shift), so
        # go's wires across the device are not in its next-state logic)
        self.go_walk = pipe(m, go_shift & ~ResetSignal("sync"), "go_dr_walk")

        # advance of the odometer: each loop's position plus its step and whether that is inside
        # its bound are settled registers; whether the carry reaches the loop (every loop inside
        # it wraps) is an AND of the inner loops' ``fits``, settled, so at the shift each
        # position takes a choice of registers and its enable is the odometer's copy of the
        # shift and a few registers (no comparison between the positions and their enables).
        # ``fits`` is one comparison against a static limit: a level-0 loop's ``b0 < D - step``;
        # a level-1 loop's ``r1 < T0 - step`` and ``b0 + r1 < D - step``, with ``b0 + r1`` a
        # register of the odometer's (``pos_start``, kept for every loop dim: the tiles' and the
        # unions' starts read it, Controller.ahead) moved along with its positions
        nxt_b0 = [Signal(COORD, name=f"nxt_b0_{d}") for d in LOOP_DIMS]
        nxt_r1 = [Signal(COORD, name=f"nxt_r1_{d}") for d in LOOP_DIMS]
        pos_start = [Signal(COORD, name=f"pos_start_{d}") for d in LOOP_DIMS]
        self.pos = Desc(wire(m, more, "pos_valid"), pos_b0, pos_r1, *[Signal(name=f"pos_{f}") for f in
                        ("bank_in", "bank_w", "bank_ps", "ld_in", "ld_w", "ends")], start=pos_start)   # (copied below)
        nxt_start = [Signal(COORD, name=f"nxt_start_{d}") for d in LOOP_DIMS]
        m.d.comb += [nxt_b0[i].eq(pos_b0[i]) for i in range(4)]
        m.d.comb += [nxt_r1[i].eq(pos_r1[i]) for i in range(4)]
        m.d.comb += [nxt_start[i].eq(pos_start[i]) for i in range(4)]
        inner_fits = []             # (idx, fits_now) of the loops inside this one: the carry
        #                             reaches it when none fits

        def none_fits(tag):
            """No loop inside fits: an AND of kept copies of their ``fits`` registers, each
            loop's own copies (so synthesis cannot share the ANDs of nested loops as one chain)."""
            if not inner_fits:
                return Const(1)
            return ~Cat(*[pipe(m, f, f"odo_fits{j}_{tag}") for j, f in inner_fits]).any()
        inner_dims = {d for lv, d in s.loops if lv == 1}
        assert all(lv == 1 for lv, _ in s.loops[len(s.loops) - len(inner_dims):]), "level-1 loops are inside level 0's"
        # each loop's position plus its step (settled), its limits (statics, clamped at 0 and
        # unsigned: no position is below one then, and each comparison is the positions' width)
        # and ``fits``: a register of whether the position the loop holds can take one more step,
        # set with the position (at the start, and at a shift that moves the loop) from
        # comparisons of the registers the position is chosen from (its plus, or 0, or for a
        # level-1 loop's start the new b0), never from the position itself: its paths are a
        # register, a comparison against a static and a choice by the odometer's registers
        loop = {}
        for idx, (lv, d) in enumerate(s.loops):
            di = LOOP_DIMS.index(d)
            units = (s.n0 if lv == 0 else s.n1) if s.spatial[lv] == d else 1
            step = g.scaled(lv, d, units) if units > 1 else (g.T0[d] if lv == 0 else g.T1[d])
            # the same step from the configuration alone, for the static limits (one register
            # stage from the configuration, like ``step``: ready by the first shift)
            step_cfg = times(units, (g.T0 if lv == 0 else g.T1)[d])
            cur = pos_b0[di] if lv == 0 else pos_r1[di]
            x = {"lv": lv, "d": d, "di": di, "cur": cur, "nxt": nxt_b0[di] if lv == 0 else nxt_r1[di],
                 "plus": settled((cur + step)[:COORD], f"odo_plus{idx}"), "fits": Signal(name=f"odo_fits{idx}")}
            if lv == 0:
                x["lim"] = g.static(_at_least_zero(g.D[d] - step_cfg), f"odo_lim{idx}")
            else:       # inside the level-0 tile and the layer: b0 + r1 + step < min(b0 + T0, D)
                x["lim_t"] = g.static(_at_least_zero(g.T0[d] - step_cfg), f"odo_lim_t{idx}")
                x["lim"] = g.static(_at_least_zero(g.D[d] - step_cfg), f"odo_lim_d{idx}")
                x["start_plus"] = settled((pos_start[di] + step)[:COORD], f"odo_start_plus{idx}")
            loop[idx] = x
        for idx in reversed(range(len(s.loops))):
            x = loop[idx]
            x["reaches"] = wire(m, none_fits(f"c{idx}"), f"odo_carry{idx}")
            inner_fits.append((idx, x["fits"]))
        outer_of = {x["d"]: x for x in loop.values() if x["lv"] == 0}
        for idx in reversed(range(len(s.loops))):
            x = loop[idx]
            lv, d, di, nxt, plus, fits = x["lv"], x["d"], x["di"], x["nxt"], x["plus"], x["fits"]
            with m.If(x["reaches"]):
                with m.If(fits):
                    m.d.comb += nxt.eq(plus)
                    if lv == 1:
                        m.d.comb += nxt_start[di].eq(x["start_plus"])
                    elif d not in inner_dims:       # (the start is b0)
                        m.d.comb += nxt_start[di].eq(plus)
                with m.Else():
                    m.d.comb += nxt.eq(0)
                    if lv == 1:     # r1 back to 0 (and b0 moved on, or not, by the outer loops)
                        m.d.comb += nxt_start[di].eq(nxt_b0[di])
                    elif d not in inner_dims:
                        m.d.comb += nxt_start[di].eq(0)
            if lv == 0:
                at_zero = wire(m, x["lim"] != 0, f"odo_fits{idx}_zero")
                stepped = wire(m, plus < x["lim"], f"odo_fits{idx}_plus")
                wrapped = at_zero
            else:
                lim_t_nz = wire(m, x["lim_t"] != 0, f"odo_fits{idx}_zero_t")
                at_zero = wire(m, lim_t_nz & (x["lim"] != 0), f"odo_fits{idx}_zero")
                stepped = wire(m, (plus < x["lim_t"]) & (x["start_plus"] < x["lim"]), f"odo_fits{idx}_plus")
                # (back to r1 = 0: the start is the new b0, which the level-0 loop of the same
                # dimension moves on, wraps to 0, or leaves)
                outer = outer_of.get(d)
                if outer is None:
                    b0_fits = x["lim"] != 0
                else:
                    b0_fits = Mux(outer["reaches"], Mux(outer["fits"], outer["plus"] < x["lim"], x["lim"] != 0),
                                  outer["cur"] < x["lim"])
                wrapped = wire(m, lim_t_nz & b0_fits, f"odo_fits{idx}_wrap")
            with m.If(shift_odo & x["reaches"]):
                m.d.sync += fits.eq(Mux(fits, stepped, wrapped))
            with m.If(start):
                m.d.sync += fits.eq(at_zero)
        last = wire(m, none_fits("last"), "odo_last")       # every loop wraps: the walk's last step

        with m.If(start):
            m.d.sync += [self.running.eq(1), self.cycles.eq(self.cycles + 1), go.eq(0)]
        # (the shift comes only while running, in every engine's last busy cycle: ``ready`` is
        # a register of ``running``, and the cycle after ``done``'s has no work; it is decoded
        # on its own, so its enables are the shift and a register or two)
        with m.Elif(self.shift):
            m.d.sync += [self.cycles.eq(self.cycles + 1), go.eq(1)]
            # dr <- cp, cp <- ld, ld <- pre, pre <- pos, pos <- next (each pair of descriptors
            # with its own copy of the shift, below)
        with m.Elif(self.running):
            m.d.sync += [self.cycles.eq(self.cycles + 1), go.eq(0)]
            with m.If(~self.engines_continue & ~work & ~hold & ~self.flushing):    # (the last writes landed)
                m.d.sync += [self.running.eq(0), self.done.eq(1)]
        with m.Elif(Cat(*starting[:-1]).any()):     # (the start's delay)
            m.d.sync += self.cycles.eq(self.cycles + 1)
        # (the count restarts from the start write: it is 0 in the cycle after, 1 in the next,
        # so its 32 bits are set from the delay's first register, not from the write's decode)
        with m.If(starting[0]):
            m.d.sync += self.cycles.eq(1)
        with m.If(start_write):                     # (only while not busy)
            m.d.sync += self.done.eq(0)
        # (a shift never comes with start, nor while not running: these follow the chain above)
        with m.If(self.shift_copy("dr_cp")):
            m.d.sync += [dr.valid.eq(cp.valid), dr.ends.eq(cp_ends), dr.bank_ps.eq(cp.bank_ps)]
            m.d.sync += [a.eq(b) for a, b in zip(dr.b0 + dr.r1, cp.b0 + cp.r1)]
            m.d.sync += [cp.valid.eq(ld.valid), cp.bank_in.eq(ld.bank_in),
                         cp.bank_w.eq(ld.bank_w), cp.bank_ps.eq(ld.bank_ps)]
            m.d.sync += [a.eq(b) for a, b in zip(cp.b0 + cp.r1, ld.b0 + ld.r1)]
        with m.If(self.shift_copy("ld_pre")):
            m.d.sync += cp_ends.eq(ld_ends)
            m.d.sync += [ld.valid.eq(pre.valid), ld.ld_in.eq(pre.valid & new_in),
                         ld.ld_w.eq(pre.valid & new_w),
                         ld.bank_in.eq(ld.bank_in ^ (new_in & ~self.slide_pre["X"] & ~self.slide_pre["Y"])),
                         ld.bank_w.eq(ld.bank_w ^ new_w),
                         ld.bank_ps.eq(ld.bank_ps ^ (ld.valid & ld_ends))]
            m.d.sync += [a.eq(b) for a, b in zip(ld.b0 + ld.r1, pre.b0 + pre.r1)]
            m.d.sync += pre.valid.eq(more)
            m.d.sync += [a.eq(b) for a, b in zip(pre.b0 + pre.r1, pos_b0 + pos_r1)]
        with m.If(shift_odo):           # (the shift, with more)
            m.d.sync += [a.eq(b) for a, b in zip(pos_b0 + pos_r1 + pos_start, nxt_b0 + nxt_r1 + nxt_start)]
            m.d.sync += more.eq(~last)
        with m.If(start):
            m.d.sync += [more.eq(1), pre.valid.eq(0), ld.valid.eq(0), cp.valid.eq(0), dr.valid.eq(0), cp_ends.eq(1)]
            m.d.sync += [p.eq(0) for p in pos_b0 + pos_r1 + pos_start]
        # the quantities' first stages (:meth:`ahead`, spread over the device) read copies of the
        # positions, so the odometer's own comparisons read registers that stay beside them
        def copies(regs, nxts):
            return [kept_copy(m, f"{r.name}_a", COORD, [(start, 0), (shift_odo, n)]) for r, n in zip(regs, nxts)]
        self.pos = Desc(self.pos.valid, copies(pos_b0, nxt_b0), copies(pos_r1, nxt_r1),
                        *[Signal(name=f"pos_{f}") for f in ("bank_in", "bank_w", "bank_ps", "ld_in", "ld_w", "ends")],
                        start=copies(pos_start, nxt_start))

    #: How many copies of the shift the stages of :meth:`ahead` share out: one for each quantity
    #: (its few registers sit together) up to this many, then in turn.
    STAGE_SHIFTS = 48
    #: Kept copies of the engines' three "busy next cycle" registers: each shift copy reads one
    #: of them, in turn, so its decode is one LUT of its own (its ``ready`` and the three), not a
    #: LUT after one OR whose net reaches the fifty copies across the device.
    CONTINUE_COPIES = 4

    def connect_engines(self, m: Module, continues_next: list) -> None:
        """Drive the copies of the engines' "busy next cycle" registers from their next values
        (loader, compute engine, drain): each copy has the value of ``engines_continue``'s terms."""
        for i, copy in enumerate(self._continue_copies):
            m.d.comb += copy.eq(pipe(m, Cat(*continues_next), f"engines_continue{i}_r"))

    def shift_copy(self, key: str, also=None) -> Signal:
        """The shift, decoded for one group of the registers it enables (``key``): a kept copy
        of ``ready`` and the engines' registers.  The copy is a register of ``ready_next``
        worked out from its own shift: every copy has the same value as ``shift_desc`` (the
        first of them; the same terms, and all start at 0), and no one net of ``ready_next``
        reaches the fifty copies across the device.  Given ``also`` (a register that changes
        only at a shift or start, when ``ready`` is 0), it is a register of ``shift_desc``'s
        ``ready_next`` and ``also``."""
        if key not in self._shifts:
            m = self._m
            d = Signal(name=f"ready_{key}_next")
            busy = self._continue_copies[len(self._shifts) % self.CONTINUE_COPIES]
            shift = wire(m, pipe(m, d, f"ready_{key}") & ~busy.any(), f"shift_{key}")
            m.d.comb += d.eq(self._ready_terms & ~shift if also is None else self._ready_next & also)
            self._shifts[key] = shift
        return self._shifts[key]

    def running_copy(self, m: Module, name: str) -> Signal:
        """A kept register of ``running`` a cycle late, for one group of its readers (an L2
        bank's port choices), so no one register drives them all across the device: the cycle
        late is harmless, since the engines touch L2 only well inside ``running`` and the host
        only while not ``busy``, which lasts that cycle too."""
        return pipe(m, self.running & ~ResetSignal("sync"), name)

    def ahead(self, m: Module, which: str, name: str, a1, a2=None, b1=None, b2=None):
        """A quantity of the step of descriptor ``which`` (``"ld"``, ``"cp"``, ``"dr"``), as a
        register (or a dict of them, named ``name_key``, when the stages give dicts), computed
        before the step reaches ``ld`` in four stages, each a function of the last one's
        registers (``None``: passed on as it is):

        - ``a1(desc)``: from the odometer's positions (``desc``: the step two ahead of ``ld``) and
          the configuration and its first-level static registers (:meth:`Geometry.static`),
          a register computed in every cycle (the positions hold still from the cycle after a
          shift to the next, at least two cycles later: ``hold``);
        - ``a2``: taken at the shift, with the step into ``pre``;
        - ``b1``: a register computed in every cycle from ``a2``'s;
        - ``b2``: taken at the shift, with the step into ``ld``.

        So every stage has a cycle; a quantity of ``cp`` or ``dr`` is the ``ld`` one, moved along
        with its step at the next shifts."""
        assert self.shift is not None, "ahead() needs the controller elaborated"
        shift = self._stage_shift()
        value = self._stage(m, a1(self.pos), f"{name}_a1", True, shift)
        value = self._stage(m, a2(value) if a2 else value, f"{name}_pre", False, shift)
        if b1 is not None:
            value = self._stage(m, b1(value), f"{name}_b1", True, shift)
        value = self._stage(m, b2(value) if b2 else value, name, False, shift)
        return self.later(m, value, which, shift)

    def later(self, m: Module, value, which: str, shift: Signal | None = None):
        """``value``, a register (or dict of them) of the step in ``ld``, moved along with it to
        ``cp`` (one shift later) or ``dr`` (two)."""
        shift = self._stage_shift() if shift is None else shift
        for level in ("cp", "dr")[:("ld", "cp", "dr").index(which)]:
            value = self._stage(m, value, None, False, shift, level=level)
        return value

    def _stage_shift(self) -> Signal:
        """The copy of the shift for the next quantity's stages (in turn)."""
        self._n_staged += 1
        return self.shift_copy(f"stage{self._n_staged % self.STAGE_SHIFTS}")

    def _stage(self, m: Module, value, name: str | None, settle: bool, shift: Signal, level: str | None = None):
        if isinstance(value, dict):
            return {key: self._stage(m, v, f"{name}_{key}" if name else None, settle, shift, level)
                    for key, v in value.items()}
        if isinstance(value, Product):
            _, a_value, a_settled = self._taken[id(value.a)]
            assert a_value is not None, "a product's operand is a product"
            # (the multipliers, in the device's multiplier columns, have a copy of their own)
            mul_shift = self.shift_copy("mul")
            reg = multiply(m, a_value, value.b, value.width, name, ce_a=1 if a_settled else mul_shift,
                           ce_p=1 if settle else mul_shift)
            self._taken[id(reg)] = (reg, None, settle)
            return reg
        value = Value.cast(value)
        reg_name = name if name is not None else f"{level}_{getattr(value, 'name', 'q')}"
        # (no reset: a stage computed every cycle is its inputs' a cycle later, one taken at a
        # shift is read only while its step is valid (ld, cp, dr), a flag the reset clears, and
        # the step took it when it moved in; on small, thousands of registers off the reset)
        reg = Signal(value.shape(), name=reg_name, reset_less=True)
        m.d.sync += reg.eq(value if settle else Mux(shift, value, reg))
        self._taken[id(reg)] = (reg, value, settle)
        return reg
