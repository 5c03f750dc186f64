"""scripts/placed_sta.py on a hand-made placement (its delays by hand) and
scripts/place_design.py's one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import placed_sta  # noqa: E402


def _cell(kind, bel, conns, dirs):
    return {"type": kind, "attributes": {"NEXTPNR_BEL": bel}, "connections": conns, "port_directions": dirs}


def _placement(lut_at: tuple[int, int], far: tuple[int, int]) -> dict:
    """FF a (bit 2) -> LUT (bit 3) -> FF b, and FF a -> FF c straight."""
    ff = {"DI": "input", "Q": "output", "CLK": "input"}
    cells = {
        "a": _cell("TRELLIS_FF", "X10/Y10/FF0", {"DI": [9], "Q": [2], "CLK": [1]}, ff),
        "lut": _cell("TRELLIS_COMB", f"X{lut_at[0]}/Y{lut_at[1]}/SLICEA", {"A": [2], "F": [3]},
                     {"A": "input", "F": "output"}),
        "b": _cell("TRELLIS_FF", f"X{far[0]}/Y{far[1]}/FF0", {"DI": [3], "Q": [4], "CLK": [1]}, ff),
        "c": _cell("TRELLIS_FF", "X10/Y10/FF1", {"DI": [2], "Q": [5], "CLK": [1]}, ff),
    }
    nets = {n: {"bits": [b]} for n, b in (("clk", 1), ("q_a", 2), ("lut_out", 3), ("q_b", 4), ("q_c", 5), ("d_a", 9))}
    return {"modules": {"top": {"cells": cells, "netnames": nets}}}


@pytest.mark.parametrize("lut_at,far", [((10, 10), (10, 10)), ((13, 14), (60, 14)), ((10, 10), (10, 80))])
def test_placed_sta_sums_cell_and_wire_delays(lut_at, far):
    ends, path, _ = placed_sta.analyse(_placement(lut_at, far))
    wire = lambda p, q, port: placed_sta.wire_delay(p, q, port)   # noqa: E731
    expected = {"b": placed_sta.CLK_TO_Q["TRELLIS_FF"] + wire((10, 10), lut_at, "A") + placed_sta.LUT
                + wire(lut_at, far, "DI"),
                "c": placed_sta.CLK_TO_Q["TRELLIS_FF"] + wire((10, 10), (10, 10), "DI")}
    assert {name: t for t, name, _, _ in ends} == pytest.approx(expected, abs=1e-9)
    assert ends[0][1] == max(expected, key=expected.get)
    # the wire model: 0.55 ns + 0.07 a tile for 40 tiles, 0.03 beyond
    assert wire((0, 0), (0, 50), "A") == pytest.approx(0.55 + 0.07 * 40 + 0.03 * 10)
    assert [step[1] for step in path(ends[0][3])][0] == "a"


def test_placed_sta_cli_prints_the_worst_path(tmp_path):
    placed = tmp_path / "placed.json"
    placed.write_text(json.dumps(_placement((13, 14), (60, 14))))
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "placed_sta.py"), str(placed), "--period", "2"],
                         capture_output=True, text=True, check=True)
    first = run.stdout.splitlines()[0]
    assert first.startswith("2 endpoints; worst ") and "1 over 2 ns" in first
    assert "-> b DI @(60, 14)" in run.stdout


def test_placed_sta_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "placed.json"
    bad.write_text("{not json")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "placed_sta.py"), str(bad)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and str(bad) in run.stderr


def test_place_design_bad_hardware_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "place_design.py"), "--hw", "nosuch.yaml",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "nosuch.yaml" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out" / "design").exists()


def test_placed_sta_takes_routed_delays_where_the_report_has_them(tmp_path):
    """With a routed report (each sink's (earliest, latest) arrival, as nextpnr's
    --detailed-timing-report gives them), a wire's delay is its sink's latest arrival less its
    driver's output's (the LUT's input and b's here); an arc it leaves out (c's) keeps the
    estimate."""
    q, lut = placed_sta.CLK_TO_Q["TRELLIS_FF"], placed_sta.LUT
    at_lut, at_b = q + 3.25, q + 3.25 + lut + 1.5
    report = {"detailed_net_timings": [
        {"net": "q_a", "driver": "a", "port": "Q", "endpoints": [{"cell": "lut", "port": "A", "delay": [1.0, at_lut]}]},
        {"net": "lut_out", "driver": "lut", "port": "F", "endpoints": [{"cell": "b", "port": "DI", "delay": [2.0, at_b]}]}]}
    routed = placed_sta.routed_arrivals(report)
    ends, path, _ = placed_sta.analyse(_placement((13, 14), (60, 14)), routed)
    assert {name: t for t, name, _, _ in ends} == pytest.approx(
        {"b": at_b, "c": q + placed_sta.wire_delay((10, 10), (10, 10), "DI")}, abs=1e-9)
    assert [round(step[0], 6) for step in path(ends[0][3])] == [round(q, 6), round(at_lut + lut, 6)]
    placed, rep = tmp_path / "placed.json", tmp_path / "report.json"
    placed.write_text(json.dumps(_placement((13, 14), (60, 14))))
    rep.write_text(json.dumps(report))
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "placed_sta.py"), str(placed), "--report", str(rep)],
                         capture_output=True, text=True, check=True)
    assert run.stdout.startswith(f"2 endpoints; worst {at_b:.2f} ns")
    rep.write_text(json.dumps({"fmax": {}}))        # (routed without --detailed-timing-report)
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "placed_sta.py"), str(placed), "--report", str(rep)],
                         capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "detailed-timing-report" in run.stderr


def test_place_design_stops_router2_only_when_it_climbs_back():
    """router2's overused wires by iteration: converging (even slowly, or on a plateau) goes on;
    no new fewest for the patience and twice the fewest stops it (small on ccd40ef, seed 1: 140
    at iteration 50, 383 at 80, 1,227 at 89)."""
    import place_design

    converging = [(i, 40000 // (i + 1)) for i in range(200)]
    assert not any(place_design.diverging(converging[:n]) for n in range(1, 201))
    plateau = [(i, 5000 // (i + 1)) for i in range(30)] + [(i, 150 + i % 7) for i in range(30, 300)]
    assert not any(place_design.diverging(plateau[:n]) for n in range(1, 301))
    climb = [(i, 40000 // (i + 1)) for i in range(50)] + [(50 + i, 800 + 100 * i) for i in range(60)]
    stops = [n for n in range(1, len(climb) + 1) if place_design.diverging(climb[:n])]
    best_at = 49                                  # (the fewest, 800, at iteration 49)
    assert stops and climb[stops[0] - 1][0] - best_at == place_design.ROUTER_PATIENCE
    assert not place_design.diverging(climb, patience=0)


def test_place_design_stops_a_diverging_router_with_one_line(tmp_path):
    """A stand-in for nextpnr that logs router2's iterations climbing back and then hangs: the
    routing stage stops it and says so in one line, naming the fewest overused wires."""
    import place_design
    from costmodel.base import AccelgenError

    fake = tmp_path / "fake_nextpnr.py"
    fake.write_text("import sys, time\n"
                    "for i in range(100):\n"
                    "    print(f'Info:     iter={i} wires=600000 overused={40000 // (i + 1) if i < 50 else 800 + 100 * i} "
                    "overuse=0 archfail=NA')\n"
                    "sys.stdout.flush()\n"
                    "time.sleep(120)\n")
    start = time.monotonic()
    with pytest.raises(AccelgenError) as err:
        place_design._route(tmp_path, [sys.executable, str(fake)], place_design.ROUTER_PATIENCE)
    assert time.monotonic() - start < 60                     # (stopped, not waited for)
    message = str(err.value)
    assert "\n" not in message and "did not converge" in message and "the fewest 800 at 49" in message
    assert "iter=99" in (tmp_path / "route.log").read_text()
