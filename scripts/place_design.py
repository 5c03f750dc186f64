#!/usr/bin/env python3
"""Place (and optionally route) a generated design's whole top level on an ECP5, for timing work
on designs too large for ``make bench`` to route in minutes (``small`` on an LFE5U-85F: Yosys
~6 min, placement ~9 min, routing by router2 ~40 min on the 2-core machines).

    python scripts/place_design.py --hw small --l2-bytes 262144 \\
        --dataflow "kcp(cluster=8,x_tile=14)" --layer conv2d:K=64,C=64,Y=14,X=14,R=3,S=3,pad=1 \\
        --out build/place-small [--route] [--seed 1]

Each stage writes its file in ``--out`` and is skipped when that file is there (so an interrupted
run goes on where it stopped; remove the folder to start over): ``design/`` (the emitted
Verilog), ``netlist.json`` (``synth_ecp5``), ``placed.json`` (nextpnr with ``--no-route``; then
``sta.txt``, the worst path of each group of late endpoints by ``scripts/placed_sta.py``, and its
first line printed), ``routed.json`` and ``report.json`` with ``--route`` (router2, from the
placement; nextpnr's Fmax printed; then ``routed_sta.txt``, the same list with the routed
wires' delays; router2 is stopped, with a one-line error, when it climbs back from its fewest
overused wires: :func:`diverging`).  nextpnr runs with the flags ``accelgen.pnr`` uses for
``rtl_fmax_mhz`` (only the clock's pin constrained) and, by default, ``--effort heap``
(:data:`accelgen.pnr.PNR_HEAP`: the analytic placer weighing timing, and no timing-driven
rip-up in routing), with which ``small``'s whole top routes best (docs/fpga.md); nextpnr keeps
its settings in ``placed.json``, so the routing takes the placement's."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.base import AccelgenError  # noqa: E402
from accelgen.pnr import (PNR_DENSE, PNR_HEAP, PNR_TIMING_EFFORT, constraints, nextpnr, nextpnr_args,  # noqa: E402
                          nextpnr_missing, yosys_script)

EFFORTS = {"heap": PNR_HEAP, "dense": PNR_DENSE, "timing": PNR_TIMING_EFFORT}

#: router2 is stopped when its overused wires have not come to a new fewest for this many
#: iterations and are twice the fewest and more: on ``small`` it came within 25-342 wires of
#: routing on some placements and then climbed back to thousands over the next hundred
#: iterations (an hour and more), never converging (docs/fpga.md).
ROUTER_PATIENCE = 40
_ROUTER2_ITER = re.compile(r"iter=(\d+) wires=\d+ overused=(\d+)")


def diverging(history: list[tuple[int, int]], patience: int = ROUTER_PATIENCE) -> bool:
    """Whether router2's (iteration, overused wires) so far say it will not converge: no new
    fewest for ``patience`` iterations, and now at least twice the fewest (and 10 more)."""
    if not history or patience <= 0:
        return False
    best = min(over for _, over in history)
    first_best = next(i for i, over in history if over == best)
    now_iter, now = history[-1]
    return now_iter - first_best >= patience and now >= 2 * best + 10


def _route(out: Path, cmd: list[str], patience: int) -> None:
    """nextpnr's routing (router2), its log in ``route.log``, stopped if it diverges."""
    start = time.perf_counter()
    print("place_design: nextpnr routing (router2) ...", flush=True)
    history: list[tuple[int, int]] = []
    with open(out / "route.log", "w") as f, open(out / "route.log") as log:
        proc = subprocess.Popen(cmd, cwd=out, stdout=f, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                time.sleep(2)
                history += [(int(a), int(b)) for a, b in _ROUTER2_ITER.findall(log.read())]
                if diverging(history, patience):
                    proc.terminate()
                    proc.wait()
                    best = min(over for _, over in history)
                    raise AccelgenError(
                        f"router2 did not converge: {history[-1][1]} overused wires at its iteration {history[-1][0]}, "
                        f"the fewest {best} at {next(i for i, o in history if o == best)}; the placement is kept "
                        f"(try another --seed, or --router-patience 0 to wait) (log: {out / 'route.log'})")
        except BaseException:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
            raise
    if proc.returncode != 0:
        raise _failed("nextpnr routing", out / "route.log")
    print(f"place_design: nextpnr routing (router2) done in {time.perf_counter() - start:.0f} s", flush=True)


def _stage(what: str, out: Path, cmd: list[str], cwd: Path, log: str) -> None:
    start = time.perf_counter()
    print(f"place_design: {what} ...", flush=True)
    with open(out / log, "w") as f:
        proc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise _failed(what, out / log)
    print(f"place_design: {what} done in {time.perf_counter() - start:.0f} s", flush=True)


def _failed(what: str, log: Path) -> AccelgenError:
    """A tool's failure in one line: its log's last ERROR line (or last line)."""
    lines = [l for l in log.read_text().splitlines() if l.strip()]
    last = next((l for l in reversed(lines) if "ERROR" in l), lines[-1] if lines else "no output")
    return AccelgenError(f"{what} failed: {last.strip()} (log: {log})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hw", default="small", help="hardware name or YAML (default: small)")
    parser.add_argument("--l2-bytes", type=int, help="override the L2 size (small's 1 MiB fits no ECP5)")
    parser.add_argument("--dataflow", default="kcp(cluster=8,x_tile=14)", help="the dataflow (default: %(default)s)")
    parser.add_argument("--layer", default="conv2d:K=64,C=64,Y=14,X=14,R=3,S=3,pad=1",
                        help="the layer that fixes the dataflow's shape (default: %(default)s)")
    parser.add_argument("--device", default="85k", help="nextpnr-ecp5's device flag (default: 85k)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--route", action="store_true", help="route the placement too (router2)")
    parser.add_argument("--effort", choices=tuple(EFFORTS), default="heap",
                        help="nextpnr's options: 'heap' (the analytic placer weighing timing, no timing-driven "
                             "rip-up: what routes small's whole top best; accelgen.pnr.PNR_HEAP), 'dense' (the "
                             "electrostatic placer, no rip-up; PNR_DENSE) or 'timing' (the analytic placer and "
                             "timing-driven rip-up, as make bench places tiny; PNR_TIMING_EFFORT)")
    parser.add_argument("--router-patience", type=int, default=ROUTER_PATIENCE, metavar="N",
                        help="stop router2 when its overused wires have had no new fewest for N iterations and "
                             "are twice the fewest (default: %(default)s; 0: never)")
    parser.add_argument("--nextpnr-args", default="", metavar="ARGS",
                        help="more nextpnr options for placement and routing, one string "
                             "(e.g. \"--placer-heap-beta 0.7\")")
    parser.add_argument("--out", required=True, type=Path, help="work folder")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except AccelgenError as exc:
        print(f"place_design: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"place_design: interrupted; finished stages are kept in {args.out}", file=sys.stderr)
        return 130


def _run(args) -> int:
    from costmodel.dataflow.spec import resolve_dataflow
    from costmodel.hardware import builtin_hardware
    from costmodel.workload import parse_layer_spec
    from hwgen.emit import TOP, emit_design

    hw = builtin_hardware(args.hw)          # (the input first, then the tools)
    if args.l2_bytes:
        hw = hw.with_overrides(l2_bytes=args.l2_bytes)
    layer = parse_layer_spec(args.layer, name="layer")
    resolve_dataflow(args.dataflow, layer, hw)
    missing = nextpnr_missing()
    if missing:
        raise AccelgenError(missing)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    verilog = out / "design" / f"{TOP}.v"
    if not verilog.exists():
        tmp = out / "design.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        summary = emit_design(hw, lambda l: resolve_dataflow(args.dataflow, l, hw), [layer], tmp)
        tmp.rename(out / "design")
        print(f"place_design: {summary.replace(str(tmp), str(out / 'design'))}")
    if not (out / "netlist.json").exists():
        script = yosys_script("ecp5", [str(verilog)], TOP, "netlist.partial.json") + "; tee -o yosys_stat.txt stat"
        _stage("yosys synth_ecp5", out, ["yosys", "-q", "-p", script], out, "yosys.log")
        (out / "netlist.partial.json").rename(out / "netlist.json")
    lpf, text = constraints("ecp5", args.device)
    (out / lpf).write_text(text)
    tool = nextpnr("ecp5")
    effort = EFFORTS[args.effort]
    common = nextpnr_args("ecp5", args.device, lpf, 100, args.seed, effort) + shlex.split(args.nextpnr_args)
    if not (out / "placed.json").exists():
        _stage("nextpnr placement", out, [tool, "--json", "netlist.json", *common, "--no-route",
                                          "--write", "placed.partial.json"], out, "place.log")
        (out / "placed.partial.json").rename(out / "placed.json")
    if not (out / "sta.txt").exists():
        _sta(out, "placed.json", "sta.txt")
    print(f"place_design: placed: {(out / 'sta.txt').read_text().splitlines()[0]} (rough: scripts/placed_sta.py)")
    if args.route and not (out / "report.json").exists():
        _route(out, [tool, "--json", "placed.json", *common, "--no-place", "--report", "report.partial.json",
                     "--detailed-timing-report", "--write", "routed.json"], args.router_patience)
        (out / "report.partial.json").rename(out / "report.json")
    if (out / "report.json").exists():
        fmax = json.loads((out / "report.json").read_text()).get("fmax", {})
        print("place_design: routed: " + ", ".join(f"{k} {v.get('achieved', 0):.1f} MHz" for k, v in fmax.items()))
        if not (out / "routed_sta.txt").exists():
            _sta(out, "routed.json", "routed_sta.txt", "--report", "report.json")
        print(f"place_design: routed: {(out / 'routed_sta.txt').read_text().splitlines()[0]} "
              "(scripts/placed_sta.py with the routed delays)")
    return 0


def _sta(out: Path, netlist: str, to: str, *more: str) -> None:
    """``scripts/placed_sta.py`` on ``netlist`` in ``out``, its list written to ``to``."""
    sta = subprocess.run([sys.executable, str(ROOT / "scripts" / "placed_sta.py"), netlist, "--groups", "40", *more],
                         cwd=out, capture_output=True, text=True, check=False)
    if sta.returncode != 0:
        raise AccelgenError(f"placed_sta.py failed: {(sta.stderr.strip().splitlines() or ['no output'])[-1]}")
    (out / to).write_text(sta.stdout)


if __name__ == "__main__":
    sys.exit(main())
