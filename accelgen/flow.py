"""``accelgen flow``: from a network to a verified, synthesised accelerator and a report, in one
command (``docs/flow.md``).

Six stages, each of which leaves its results in the output folder before the next starts:

1. ``explore``: the ``hwgen`` preset's search of the space (``DIR/explore/``, checkpointed);
2. ``pick``: the knee of the front, or its best point by ``--pick`` (``DIR/chosen.yaml``);
3. ``emit``: one accelerator per layer kind of the model (``DIR/rtl/conv2d``, ``DIR/rtl/gemm``);
4. ``verify``: layers of the model run on the emitted designs in a simulator, bit-exact against
   numpy and cycle-exact against the manifest's prediction (``DIR/verify.json``, one layer at a
   time);
5. ``synth``: Yosys per PE and for the shared parts, nextpnr for Fmax (``DIR/synth.json``);
6. ``report``: ``DIR/report.json`` and a self-contained ``DIR/report.html``.

``DIR/flow.json`` records the options and the stages done.  An interrupt leaves every finished
stage (and every finished layer of ``verify``, and the search's checkpoint) in place; the same
command with ``--resume`` goes on from there, and refuses if an option that decides a result has
changed.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from costmodel.base import AccelgenError, write_atomically
from costmodel.workload import Layer

from .flow_choices import PICKS, layer_kind, one_run, pick_point, sample_layers, verification_layer
from .options import PROG, note, positive_int

__all__ = ["flow_arguments", "run_flow", "STAGES"]

STAGES = ("explore", "pick", "emit", "verify", "synth", "report")
FLOW_FILE = "flow.json"
#: Options that decide a stage's result: ``--resume`` refuses a run whose values differ.
_DECIDING = ("model", "input_shape", "layer", "space", "objectives", "constraint", "seed", "samples", "max_points",
             "time_budget", "pick", "target", "fpga_target", "part", "verify", "verify_layers", "max_sim_cycles",
             "sim", "sim_seed", "fmax")


def flow_arguments(parser: argparse.ArgumentParser) -> None:
    from .explore import explore_arguments
    explore_arguments(parser, flow=True)
    group = parser.add_argument_group("what to build and check")
    group.add_argument("--target", choices=("ecp5", "ice40", "xilinx", "generic"),
                       help="synthesis target (default: the family of --part or --fpga-target, else ecp5; Fmax is "
                            "measured on ecp5)")
    group.add_argument("--pick", default="knee", choices=PICKS,
                       help="the front point built: the knee (nearest the ideal point, objectives on log "
                            "scales) or the best by one metric (default: knee)")
    group.add_argument("--verify", default="sample", choices=("all", "sample", "none"),
                       help="layers run in the simulator: every distinct layer shape, a sample (default), or none")
    group.add_argument("--verify-layers", type=positive_int, default=6, metavar="N",
                       help="with --verify sample: how many distinct layer shapes per accelerator (default: 6)")
    group.add_argument("--max-sim-cycles", type=positive_int, default=200_000, metavar="N",
                       help="a layer predicted to take longer is scaled down (channels, then rows and columns, "
                            "halved) until it takes at most N cycles and fits L2 (default: 200000)")
    group.add_argument("--sim", default="verilator", choices=("verilator", "icarus"),
                       help="simulator (default: verilator)")
    group.add_argument("--sim-seed", type=int, default=0, metavar="N", help="seed of the random operands")
    group.add_argument("--fmax", default="auto", choices=("auto", "top", "pe", "none"),
                       help="place and route for Fmax (ecp5): each whole design (top: minutes for a few PEs, "
                            "an hour or more for 64), the PE alone with its ports registered (pe: what the array "
                            "replicates), none; auto (default): top where the design fits an LFE5U-25F, else pe")
    run = parser.add_argument_group("how to run")
    run.add_argument("--out", required=True, metavar="DIR", help="output folder")
    run.add_argument("--resume", action="store_true", help="go on with the flow interrupted in --out")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")


def _figure(v: float) -> str:
    """A figure for people: whole numbers with thousands separators, others to 4 digits."""
    return f"{v:,.0f}" if v == int(v) or abs(v) >= 1e4 else f"{v:.4g}"


# --- the flow's record ----------------------------------------------------------------------------

@dataclass
class _Record:
    path: Path
    options: dict[str, Any]
    done: dict[str, Any]

    def save(self) -> None:
        write_atomically(self.path, json.dumps({"version": 1, "options": self.options, "done": self.done}, indent=1))

    def finish(self, stage: str, result: Any) -> None:
        self.done[stage] = result
        self.save()


def _options(args: argparse.Namespace) -> dict[str, Any]:
    opts = {name: getattr(args, name, None) for name in _DECIDING}
    space = Path(args.space)
    try:
        opts["space_sha256"] = hashlib.sha256(space.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise AccelgenError(f"cannot read ({exc.strerror or exc})", where=str(space)) from None
    model = Path(args.model)
    if model.is_file():
        opts["model_sha256"] = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    return opts


def _open_record(out: Path, args: argparse.Namespace) -> _Record:
    options = _options(args)
    path = out / FLOW_FILE
    if args.resume:
        if not path.exists():
            raise AccelgenError(f"there is no flow to resume here (no {FLOW_FILE})", where=str(out))
        try:
            doc = json.loads(path.read_text())
            old, done = doc["options"], doc["done"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AccelgenError(f"unreadable ({exc}); run without --resume to start afresh", where=str(path)) from None
        for key in options:
            if old.get(key) != options[key]:
                flag = "--" + key.replace("_", "-")
                raise AccelgenError(f"--resume: the flow in {out} was run with {flag} {old.get(key)!r}, not "
                                    f"{options[key]!r} (run without --resume to start afresh)", where=str(out))
        return _Record(path, options, done)
    if path.exists():
        note(f"starting afresh; the results of the flow in {out} are replaced (use --resume to go on with it)")
    record = _Record(path, options, {})
    record.save()
    return record


# --- the stages -----------------------------------------------------------------------------------

class _Flow:
    def __init__(self, args: argparse.Namespace, out: Path, record: _Record) -> None:
        from .explore import plan_from_args
        self.args, self.out, self.record = args, out, record
        self.err = Console(file=sys.stderr, highlight=False, emoji=False)
        self.plan = plan_from_args(args, "hwgen", False)
        self.model = self.plan.model
        self.show_progress = not args.no_progress and self.err.is_terminal

    def say(self, stage: str, text: str) -> None:
        i = STAGES.index(stage) + 1
        self.err.print(f"[{i}/{len(STAGES)}] {stage}: {text}", markup=False, highlight=False, soft_wrap=True)

    def run(self) -> None:
        for stage in STAGES:
            if stage in self.record.done:
                self.say(stage, "done before (--resume)")
                continue
            started = time.monotonic()
            result = getattr(self, f"_{stage}")()
            result["seconds"] = round(time.monotonic() - started, 1)
            self.record.finish(stage, result)

    # 1. explore
    def _explore(self) -> dict[str, Any]:
        from costmodel.dse import evaluator_for
        from costmodel.dse.output import front_rows, write_outputs
        from costmodel.dse.search import CHECKPOINT

        from .explore import search_with_progress
        folder = self.out / "explore"
        folder.mkdir(parents=True, exist_ok=True)
        resume = self.args.resume and (folder / CHECKPOINT).exists()
        self.say("explore", f"{self.model.name} ({len(self.model.layers)} layers) over {self.plan.space.name}, "
                            f"{self.plan.total_points:,} points, hwgen preset" + (" (resuming)" if resume else ""))
        a = self.args
        state, elapsed = search_with_progress(self.plan, folder, backend=a.backend, workers=a.workers,
                                              ray_address=a.ray_address, max_points=a.max_points,
                                              time_budget_s=a.time_budget, resume=resume,
                                              show_progress=self.show_progress)
        rows = front_rows(self.plan, state.front, evaluator_for(self.plan))
        if not rows:
            raise AccelgenError(f"no point of the space is feasible for {self.model.name} ({state.evaluated:,} "
                                f"evaluated, {state.valid:,} valid, none within L2 and the constraints)",
                                where=str(a.space))
        write_outputs(folder, self.plan, state, rows, a.model)
        rate = state.evaluated / elapsed if elapsed > 0 else 0.0
        self.say("explore", f"{state.evaluated:,} points in {elapsed:.1f} s ({rate:,.0f} designs/s), "
                            f"{state.feasible:,} feasible, {len(rows)} on the front"
                 + (f"; stopped by the {state.stopped} budget" if state.stopped else ""))
        return {"evaluated": state.evaluated, "valid": state.valid, "feasible": state.feasible, "front": len(rows),
                "designs_per_s": round(rate), "stopped": state.stopped or None, "total_points": self.plan.total_points,
                "objectives": list(self.plan.objectives)}

    def _front(self) -> list[dict[str, Any]]:
        with open(self.out / "explore" / "pareto.csv", newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    # 2. pick
    def _pick(self) -> dict[str, Any]:
        from costmodel.design import load_design
        row = pick_point(self._front(), self.plan.objectives, self.args.pick)
        source = self.out / "explore" / row["file"]
        text = source.read_text(encoding="utf-8")
        write_atomically(self.out / "chosen.yaml", f"# accelgen flow: picked by {self.args.pick}\n" + text)
        design = load_design(self.out / "chosen.yaml")
        hw = design.hardware
        objectives = {o: float(row[o]) for o in self.plan.objectives}
        self.say("pick", f"front point {row['rank']} ({self.args.pick}): {hw.num_pes} PEs x {hw.simd_lanes} lanes, "
                         f"NoC {row['noc_bw_words_per_cycle']} words/cycle, L2 {hw.l2_bytes} B, {row['dataflow']}; "
                 + ", ".join(f"{o} {_figure(v)}" for o, v in objectives.items()))
        return {"rank": int(row["rank"]), "how": self.args.pick, "file": "chosen.yaml", "objectives": objectives,
                "runtime_cycles": int(float(row["runtime_cycles"])), "energy_pj": float(row["energy_pj"]),
                "area_mm2": float(row["area_mm2"]), "dataflow": row["dataflow"], "hardware": hw.name}

    def design(self) -> Any:
        from costmodel.design import load_design
        return load_design(self.out / "chosen.yaml")

    def kinds(self) -> dict[str, list[Layer]]:
        """The model's layers by the kind of accelerator that runs them."""
        out: dict[str, list[Layer]] = {}
        for layer in self.model.layers:
            out.setdefault(layer_kind(layer), []).append(layer)
        return out

    # 3. emit
    def _emit(self) -> dict[str, Any]:
        from hwgen.emit import design_structure, emit_design
        design = self.design()
        designs = []
        for kind, layers in self.kinds().items():
            folder = self.out / "rtl" / kind
            emit_design(design.hardware, design.dataflow_for, layers, folder)
            manifest = json.loads((folder / "manifest.json").read_text())
            refused = [p for p in manifest["layers"] if "refused" in p]
            if refused:
                raise AccelgenError(f"the design refuses layer {refused[0]['layer']!r}: {refused[0]['refused']}",
                                    where=str(folder))
            structure = design_structure(design.hardware, design.dataflow_for, layers)[1]
            self.say("emit", f"{kind}: {folder} (design {manifest['design']}, {structure.used_pes} PEs, NoC "
                             f"{structure.noc_words_per_cycle} words/cycle; {len(layers)} layer"
                             f"{'s' if len(layers) > 1 else ''} in its manifest)")
            designs.append({"kind": kind, "folder": f"rtl/{kind}", "design": manifest["design"],
                            "dataflow": manifest["dataflow"], "used_pes": structure.used_pes,
                            "noc_words_per_cycle": structure.noc_words_per_cycle, "layers": len(layers)})
        return {"designs": designs}

    # 4. verify
    def _verify(self) -> dict[str, Any]:
        from costmodel.hwgen_preset.closed import hwgen_cycles
        from costmodel.hwgen_preset.preset import l2_split
        from costmodel.hwgen_preset.rules import l2_layout_words
        from costmodel.hwgen_preset.structure import tiles_of
        from hwgen.emit import design_structure
        from sim_tests import simenv
        from sim_tests.runner import design_sources, run_layer

        a = self.args
        if a.verify == "none":
            self.say("verify", "skipped (--verify none)")
            return {"results": []}
        simenv.apply_env()
        missing = simenv.missing_tools(a.sim)
        if missing:
            raise AccelgenError(f"{a.sim} is not installed here (missing {', '.join(missing)}); run `make tools` "
                                "or give --verify none", where="--sim")
        design = self.design()
        hw = design.hardware
        l2 = l2_split(hw)
        path = self.out / "verify.json"
        results: list[dict[str, Any]] = []
        if a.resume and path.exists():
            results = json.loads(path.read_text()).get("results", [])
        done = {(r["kind"], r["shape"]) for r in results}
        todo = []
        for kind, layers in self.kinds().items():
            structure = design_structure(hw, design.dataflow_for, layers)[1]
            for group in sample_layers(layers, a.verify, a.verify_layers):
                todo.append((kind, structure, group))
        self.say("verify", f"{len(todo)} layer shapes on {a.sim}" + (f" ({len(done)} done before)" if done else ""))

        def fits(structure: Any) -> Callable[[Layer], bool]:
            def check(v: Layer) -> bool:
                try:
                    t = tiles_of(structure, design.dataflow_for(v), v)
                except AccelgenError:
                    return False
                words = l2_layout_words(structure, t)
                return all(words[k] <= l2[k] for k in l2) and hwgen_cycles(structure, t) <= a.max_sim_cycles
            return check

        progress = None
        if self.show_progress:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            progress = Progress(TextColumn("verifying {task.fields[layer]}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=self.err, transient=True)
            task = progress.add_task("verify", total=len(todo), layer="", completed=len(done))
            progress.start()
        try:
            for kind, structure, group in todo:
                layer = group[0]
                if (kind, layer.describe()) in done:
                    continue
                if progress is not None:
                    progress.update(task, layer=layer.name)
                v, runs = verification_layer(layer, fits(structure))
                started = time.monotonic()
                r = run_layer(structure, l2, design.dataflow_for(v), v, a.sim, a.sim_seed)
                self._same_verilog(kind, design_sources(structure, l2))
                exact = r["bit_exact"] and r["cycle_difference"] == 0
                entry = {"layer": layer.name, "also": [g.name for g in group[1:]], "kind": kind,
                         "shape": layer.describe(), "simulated_shape": v.describe(),
                         "scaled": v.describe() != one_run(layer)[0].describe(), "runs": runs,
                         "predicted_cycles": r["predicted_cycles"], "measured_cycles": r["measured_cycles"],
                         "bit_exact": bool(r["bit_exact"]), "cycle_exact": r["cycle_difference"] == 0,
                         "rtl_utilization": r["rtl_utilization"], "sim": a.sim, "seed": a.sim_seed,
                         "seconds": round(time.monotonic() - started, 1)}
                results.append(entry)
                write_atomically(path, json.dumps({"results": results}, indent=1))
                if progress is not None:
                    progress.advance(task)
                how = (f"as {v.describe()}" if entry["scaled"] else "") + (f" (1 of {runs} runs)" if runs > 1 else "")
                self.say("verify", f"{layer.name}{' ' + how if how else ''}: {r['measured_cycles']:,} cycles, "
                                   f"predicted {r['predicted_cycles']:,}, "
                                   + ("bit-exact" if r["bit_exact"] else "OUTPUTS DIFFER")
                                   + ("" if exact else " — MISMATCH"))
        finally:
            if progress is not None:
                progress.stop()
        write_atomically(path, json.dumps({"results": results}, indent=1))
        bad = [r["layer"] for r in results if not (r["bit_exact"] and r["cycle_exact"])]
        return {"results": len(results), "failed": bad}

    def _same_verilog(self, kind: str, simulated: list[Path]) -> None:
        """The Verilog the simulator ran is the Verilog emitted (the same generator, the same
        structure): checked file by file, not assumed."""
        for src in simulated:
            emitted = self.out / "rtl" / kind / src.name
            if emitted.read_bytes() != src.read_bytes():
                raise AccelgenError(f"the simulated {src.name} ({src}) differs from the emitted one; "
                                    "was the output folder edited?", where=str(emitted))

    # 5. synth
    def _synth(self) -> dict[str, Any]:
        from hwgen.emit import TOP
        from hwgen.pe import PE_MODULE

        from . import pnr, synth
        a = self.args
        missing = synth.yosys_missing()
        if missing:
            raise AccelgenError(missing, where="synth")
        path = self.out / "synth.json"
        done: dict[str, Any] = {}
        if a.resume and path.exists():
            done = json.loads(path.read_text()).get("designs", {})
        for d in self.record.done["emit"]["designs"]:
            kind = d["kind"]
            if kind in done:
                continue
            verilog = self.out / d["folder"] / "accelgen_top.v"
            instances = len(re.findall(rf"^\s*{PE_MODULE}\s+\S+\s*\(", verilog.read_text(), re.MULTILINE))
            self.say("synth", f"{kind}: yosys {synth.TARGETS[a.target]}, one PE and the shared parts "
                              f"({instances} PEs)")
            with self._status(f"synthesising the {kind} design"):
                res = synth.synthesize_design(verilog, instances, a.target, by_source=True)
            entry: dict[str, Any] = {**res.as_dict(), "fmax_mhz": None, "fmax_scope": None, "fmax_note": None}
            device, fits, small = (pnr.placement(a.target, res.total) if a.target in pnr.PNR_TARGETS
                                   else (None, False, False))
            entry["device"] = synth.ECP5_DEVICES[device] if a.target == "ecp5" and fits else None
            if a.target == "ecp5" and not fits:
                lut, dsp, bram = synth.ECP5_CAPACITY[device]
                entry["device_note"] = (f"larger than the largest ECP5 ({synth.ECP5_DEVICES[device]}: {lut:,} "
                                        f"LUT4, {dsp} multipliers, {bram} block RAMs)")
            why = (None if a.fmax != "none" else "not measured (--fmax none)")
            if why is None and a.target not in pnr.PNR_TARGETS:
                why = (f"not measured: place and route runs on {' and '.join(pnr.PNR_TARGETS)} (nextpnr), "
                       f"the target is {a.target}")
            if why is None:
                why = pnr.nextpnr_missing(a.target)
                why = f"not measured: {why}" if why else None
            if why is None:
                assert device is not None
                whole = (a.fmax == "top" and fits) or (a.fmax == "auto" and small)
                if a.fmax == "top" and not fits:
                    self.say("synth", f"{kind}: the whole design does not fit one {a.target}: its PE is placed alone")
                top, registered = (TOP, False) if whole else (PE_MODULE, True)
                part = pnr.DEVICES[a.target][device].part
                self.say("synth", f"{kind}: nextpnr-{a.target} on {part}, "
                                  + ("the PE, ports registered" if registered else f"the whole {TOP}"))
                with self._status(f"placing and routing the {kind} design's {top}"):
                    pr = pnr.place_and_route(verilog, top, a.target, device=device,
                                             freq_mhz=self.design().hardware.clock_mhz, registered_io=registered)
                entry.update(fmax_mhz=round(pr.fmax_mhz, 1), fmax_scope="pe" if registered else "design",
                             fmax_part=pr.part)
            else:
                entry["fmax_note"] = why
            done[kind] = entry
            write_atomically(path, json.dumps({"designs": done}, indent=1))
            t = res.total
            self.say("synth", f"{kind}: {t.lut:,} LUT, {t.ff:,} FF, {t.dsp} DSP, {t.bram} BRAM"
                              + (f", {t.lutram} LUT-RAM" if t.lutram else "")
                              + (f"; Fmax {entry['fmax_mhz']} MHz ({entry['fmax_scope']})" if entry["fmax_mhz"]
                                 else f"; Fmax {why}"))
        write_atomically(path, json.dumps({"designs": done}, indent=1))
        return {"designs": sorted(done)}

    def _status(self, text: str) -> Any:
        import contextlib
        return self.err.status(text) if self.show_progress else contextlib.nullcontext()

    # 6. report
    def _report(self) -> dict[str, Any]:
        from .flow_report import build_report, render_html
        doc = build_report(self)
        write_atomically(self.out / "report.json", json.dumps(doc, indent=1))
        write_atomically(self.out / "report.html", render_html(doc, self._front(), list(self.plan.objectives)))
        self.say("report", f"wrote {self.out / 'report.html'} and report.json")
        return {"files": ["report.html", "report.json"]}


def run_flow(args: argparse.Namespace) -> int:
    from costmodel.fpga import FPGA_TARGETS

    from .options import fpga_from_args
    family = fpga_from_args(args)[0] if (args.part or args.fpga_target) else None
    if args.target is None:
        args.target = family or "ecp5"
    if args.fpga_target is None and args.target in FPGA_TARGETS:
        args.fpga_target = args.target          # (the search's FPGA figures are the synthesised target's)
    elif family is not None and args.target != family:
        raise AccelgenError(f"the search's FPGA is {family} (--part / --fpga-target), the synthesis target "
                            f"{args.target}: give one family", where="--target")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AccelgenError(f"cannot create the output folder ({exc.strerror or exc})", where=str(out)) from None
    if getattr(args, "per_layer_dataflow", None):
        raise AccelgenError("the flow builds one accelerator per layer kind", where="--per-layer-dataflow")
    record = _open_record(out, args)
    flow = _Flow(args, out, record)
    try:
        flow.run()
    except KeyboardInterrupt:
        done = [s for s in STAGES if s in record.done]
        note(f"interrupted; stages done: {', '.join(done) or 'none'}; the same command with --resume goes on")
        raise
    doc = json.loads((out / "report.json").read_text())
    bad = [v["layer"] for v in doc["verified"]
           if not (v["bit_exact"] and v["measured_cycles"] == v["predicted_cycles"])]
    checked = (f"{len(doc['verified'])} layer shapes run, every one exact" if doc["verified"] else "no layer run")
    print(f"{PROG} flow: {out / 'report.html'}; " + (checked if not bad else f"MISMATCH on {', '.join(bad)}"))
    return 1 if bad else 0
