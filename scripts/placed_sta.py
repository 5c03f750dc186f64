#!/usr/bin/env python3
"""A rough static timing analysis of a design placed by nextpnr-ecp5, for timing work on designs
too large to route in a session (``small`` on an LFE5U-85F): nextpnr prints critical paths only
after routing, and this lists the worst path of every group of endpoints from a placement alone.

    nextpnr-ecp5 ... --no-route --write placed.json
    python scripts/placed_sta.py placed.json [--groups N] [--period NS] [--report report.json]

Delays are nextpnr's ECP5 figures as its routed reports give them (LUT 0.24 ns, carry 0.45 ns,
FF clock-to-Q 0.53 ns, block RAM clock-to-output without its output register 5.6 ns); a wire's
delay is fitted on distance from the routed arcs of ``tiny``'s critical paths: 0.55 + 0.07 d ns
for the first 40 tiles of Manhattan distance d, 0.03 ns a tile beyond.  On tiny's routed
placements it comes within 0-5 % of nextpnr's routed figure (pessimistic); congestion in a full
device can make real wires longer.  Paths from and to the ports are left out (nextpnr times them
as ``<async>``).

After routing, ``--report report.json`` (nextpnr's ``--report`` with ``--detailed-timing-report``)
takes every wire's routed delay from it (each sink's arrival less its driver's), so the list is
of the routed design's late endpoints, where nextpnr reports only the worst path of each clock."""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading

LUT, CARRY_IN, CARRY, OFX, MUX = 0.236, 0.42, 0.447, 0.401, 0.256
CLK_TO_Q = {"TRELLIS_FF": 0.525, "DP16KD": 5.7, "MULT18X18D": 1.5}


def wire_delay(a, b, port: str) -> float:
    if a is None or b is None:
        return 0.0
    d = abs(a[0] - b[0]) + abs(a[1] - b[1])
    if port == "FCI":                       # (the carry chain's own wires)
        return 0.0 if d == 0 else 0.07
    if d == 0 and port in ("F1", "FXA", "FXB"):
        return 0.0
    return 0.55 + 0.07 * min(d, 40) + 0.03 * max(d - 40, 0)


def comb_arcs(cell: dict, port: str) -> list:
    """The outputs a cell's input ``port`` reaches in the same cycle, with their delays."""
    if cell["type"] == "TRELLIS_COMB":
        if port in ("A", "B", "C", "D"):
            return [("F", LUT), ("OFX", OFX), ("FCO", CARRY)]
        if port == "FCI":
            return [("F", CARRY_IN), ("FCO", 0.04)]
        if port in ("M", "F1", "FXA", "FXB"):
            return [("OFX", MUX)]
        return []                           # (a LUT RAM's write port: an endpoint)
    if cell["type"] == "TRELLIS_RAMW":
        return [(f"{o}{i}", 0.1) for o in ("WADO", "WDO") for i in range(4)]
    return []


def is_endpoint(cell: dict, port: str) -> bool:
    t = cell["type"]
    return ((t == "TRELLIS_FF" and port in ("DI", "CE", "LSR", "M")) or (t in ("DP16KD", "MULT18X18D")
            and not port.startswith("CLK")) or (t == "TRELLIS_COMB" and port[:3] in ("WAD", "WD", "WRE", "DI0", "DI1")))


def routed_arrivals(report: dict) -> dict:
    """The latest arrival at each routed net's sinks, by (cell, port), from nextpnr's
    ``--report`` written with ``--detailed-timing-report`` (it gives each sink's (earliest,
    latest) arrival: the path to the net's driver and the routed wire)."""
    return {(e["cell"], e["port"]): max(e["delay"]) if isinstance(e["delay"], list) else e["delay"]
            for n in report.get("detailed_net_timings", []) for e in n.get("endpoints", [])}


def analyse(doc: dict, routed: dict | None = None):
    """The endpoints, latest first, and a function giving the path to one.  A wire's delay is
    estimated from the placement, or, where ``routed`` (:func:`routed_arrivals`) has its sink's
    arrival, that less the arrival at its driver's output (a register's clock-to-output, or the
    latest of a logic cell's routed inputs and the cell's delay): the routed wire's own delay."""
    routed = routed or {}
    m = next(iter(doc["modules"].values()))
    cells = m["cells"]
    loc = {}
    for name, c in cells.items():
        found = re.match(r"X(\d+)/Y(\d+)/", c["attributes"].get("NEXTPNR_BEL", ""))
        loc[name] = (int(found.group(1)), int(found.group(2))) if found else None
    driver = {}
    for name, c in cells.items():
        for port, bits in c["connections"].items():
            if c["port_directions"][port] == "output":
                driver.update({b: (name, port) for b in bits if not isinstance(b, str)})
    net = {}
    for name, n in m["netnames"].items():
        for b in n["bits"]:
            if isinstance(b, int) and (b not in net or len(name) < len(net[b])):
                net[b] = name
    memo: dict = {}

    def routed_out(bit):
        """The routed arrival at net ``bit``'s driver output (None if the report lacks one)."""
        name, out = driver[bit]
        c = cells[name]
        if c["type"] in CLK_TO_Q and out not in ("F", "OFX"):
            return CLK_TO_Q[c["type"]]
        got = [routed[(name, p)] + delay for p, d in c["port_directions"].items() if d == "input"
               and (name, p) in routed for o, delay in comb_arcs(c, p) if o == out]
        return max(got) if got else None

    def wire(bit, sink: str, port: str) -> float:
        got = routed.get((sink, port))
        out = routed_out(bit) if got is not None else None
        return got - out if out is not None else wire_delay(loc[driver[bit][0]], loc[sink], port)

    def arrival(bit):
        """The latest arrival at net ``bit``'s driver output, and the input it came through."""
        if bit in memo:
            return memo[bit][0]
        memo[bit] = (None, None)            # (a loop, or a port: no arrival)
        if bit not in driver:
            return None
        name, out = driver[bit]
        c = cells[name]
        best = (CLK_TO_Q[c["type"]], None) if c["type"] in CLK_TO_Q and out not in ("F", "OFX") else (None, None)
        if best[0] is None:
            for port, bits in c["connections"].items():
                if c["port_directions"][port] != "input":
                    continue
                for b in bits:
                    for o, delay in comb_arcs(c, port):
                        a = arrival(b) if o == out and not isinstance(b, str) else None
                        if a is not None:
                            t = a + wire(b, name, port) + delay
                            if best[0] is None or t > best[0]:
                                best = (t, b)
        memo[bit] = best
        return best[0]

    ends = []
    for name, c in cells.items():
        for port, bits in c["connections"].items():
            if c["port_directions"][port] != "input" or not is_endpoint(c, port):
                continue
            for b in bits:
                a = None if isinstance(b, str) else arrival(b)
                if a is not None:
                    setup = 0.424 if port == "LSR" else 0.0
                    ends.append((a + wire(b, name, port) + setup, name, port, b))
    ends.sort(reverse=True)

    def path(bit):
        steps = []
        while bit is not None:
            name, port = driver[bit]
            steps.append((memo[bit][0], name, port, net.get(bit, "?"), loc[name]))
            bit = memo[bit][1]
        return steps[::-1]
    return ends, path, loc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("placed", help="nextpnr-ecp5's --write JSON (placed, or placed and routed)")
    parser.add_argument("--groups", type=int, default=30, help="endpoint groups to show (default 30)")
    parser.add_argument("--period", type=float, default=10.0, help="the clock period, ns (default 10)")
    parser.add_argument("--report", help="nextpnr's --report of the routed design, written with "
                                         "--detailed-timing-report: its wires' routed delays instead of estimates")
    args = parser.parse_args(argv)
    routed = None
    for path, what in ((args.placed, "placed"), (args.report, "report")):
        if path is None:
            continue
        try:
            with open(path) as f:
                got = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"placed_sta: {path}: {exc}", file=sys.stderr)
            return 2
        if what == "placed":
            doc = got
        else:
            routed = routed_arrivals(got)
            if not routed:
                print(f"placed_sta: {path}: no detailed_net_timings (nextpnr's --detailed-timing-report "
                      "with routing)", file=sys.stderr)
                return 2
    sys.setrecursionlimit(1_000_000)
    threading.stack_size(512 * 1024 * 1024)      # (the recursion follows the longest logic path)
    out = {}
    worker = threading.Thread(target=lambda: out.update(result=analyse(doc, routed)))
    worker.start()
    worker.join()
    ends, path, loc = out["result"]
    late = sum(e[0] > args.period for e in ends)
    print(f"{len(ends)} endpoints; worst {ends[0][0]:.2f} ns ({1000 / ends[0][0]:.1f} MHz); "
          f"{late} over {args.period:g} ns, {sum(e[0] > 1.2 * args.period for e in ends)} over {1.2 * args.period:g} ns")
    seen = set()
    for t, name, port, bit in ends:
        key = (re.sub(r"\d+", "#", name)[:50], re.sub(r"\d+", "", port))
        if key in seen:
            continue
        seen.add(key)
        print(f"== {t:.2f} ns -> {name} {port} @{loc[name]}")
        for at, cell, out_port, net_name, where in path(bit):
            print(f"   {at:6.2f}  {cell[:60]:60s} {out_port:5s} {net_name[:60]} @{where}")
        if len(seen) >= args.groups:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
