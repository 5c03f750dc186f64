"""The per-layer mapping search (``accelgen map``, :mod:`costmodel.dse.mapping`): an enumerated
space's best is brute force's, a sampled one is reproducible and its best is the best of its
sample, the best mapping re-analysed gives what the search reported, and bad input is one line."""

from __future__ import annotations

import itertools
import json

import pytest

from accelgen.cli import main
from costmodel import AccelgenError, Conv2D, GEMM, analyze_layer, builtin_hardware
from costmodel.dataflow.library import library_dataflow
from costmodel.dse.mapping import (MAPPING_OBJECTIVES, MAX_DRAWS_PER_BUDGET, draw_order, mapping_space, search_mappings,
                                   tile_candidates)

TINY = builtin_hardware("tiny")
CONV = Conv2D("c", K=8, C=6, Y=6, X=7, R=3, S=3, padding=1)
GEMM_LAYER = GEMM("g", M=6, N=10, K=12)


def _brute(layer, family, hw, preset, objective):
    """Every mapping of the space, enumerated here on its own: (score, feasible, params) of each
    that the preset takes."""
    space = mapping_space(layer, family, hw.num_pes)
    out = []
    for values in itertools.product(*(v for _, v in space.params), space.orders):
        params = dict(zip([n for n, _ in space.params], values[:-1]))
        if values[-1]:
            params["order"] = values[-1]
        try:
            r = analyze_layer(layer, library_dataflow(family, layer, hw.num_pes, **params), hw, preset)
        except AccelgenError:
            continue
        out.append((not r.feasible, MAPPING_OBJECTIVES[objective](r), params))
    return space.size, out


@pytest.mark.parametrize("layer,family,preset,objective", [
    (CONV, "kcp", "hwgen", "runtime"), (CONV, "cp", "hwgen", "edp"), (CONV, "xp", "maestro", "energy"),
    (GEMM_LAYER, "nmk", "hwgen", "runtime")])
def test_an_enumerated_space_finds_what_brute_force_finds(layer, family, preset, objective):
    size, every = _brute(layer, family, TINY, preset, objective)
    found = search_mappings(layer, family, TINY, preset=preset, objective=objective, budget=size, keep=3)
    assert found.space_size == size == found.evaluated and found.refused == size - len(every)
    best = min(every, key=lambda e: (e[0], e[1]))
    assert (not found.best[0].result.feasible, found.best[0].score) == best[:2]
    # the three kept are the three best of the space
    assert [(not m.result.feasible, m.score) for m in found.best] == sorted((e[0], e[1]) for e in every)[:3]


def test_a_sampled_space_is_reproducible_and_keeps_its_samples_best():
    """A sampled search draws in its seed's order until the preset has accepted the budget:
    refused mappings do not use it, and its best are the best of exactly what it drew."""
    layer = Conv2D("c", K=16, C=12, Y=10, X=10, R=3, S=3, padding=1)
    space = mapping_space(layer, "kcp", TINY.num_pes)
    budget = 150
    assert space.size > 4 * budget
    a = search_mappings(layer, "kcp", TINY, budget=budget, seed=4, keep=5)
    b = search_mappings(layer, "kcp", TINY, budget=budget, seed=4, keep=5)
    c = search_mappings(layer, "kcp", TINY, budget=budget, seed=5, keep=5)
    assert a.accepted == budget and a.refused > 0 and a.evaluated == budget + a.refused
    assert [m.index for m in a.best] == [m.index for m in b.best] and (a.evaluated, a.refused) == (b.evaluated, b.refused)
    assert [m.index for m in a.best] != [m.index for m in c.best]
    drawn = list(itertools.islice(draw_order(space.size, budget, 4), a.evaluated))
    assert len(set(drawn)) == len(drawn) and sorted(drawn) != drawn
    scores, refused = [], 0
    for i in drawn:
        try:
            r = analyze_layer(layer, library_dataflow("kcp", layer, TINY.num_pes, **space.at(i)), TINY, "hwgen")
        except AccelgenError:
            refused += 1
            continue
        scores.append((not r.feasible, float(r.runtime_cycles), i))
    assert refused == a.refused and len(scores) == budget      # (the last one drawn was accepted)
    assert [m.index for m in a.best] == [i for _, _, i in sorted(scores)[:5]]


def test_a_space_with_fewer_valid_mappings_than_the_budget_is_drawn_whole():
    layer = Conv2D("c", K=16, C=12, Y=10, X=10, R=3, S=3, padding=1)
    space = mapping_space(layer, "kcp", TINY.num_pes)
    every = search_mappings(layer, "kcp", TINY, budget=space.size, keep=1)
    assert every.evaluated == space.size and every.refused > 0
    budget = every.accepted + 1          # (more than the space holds, less than its size: drawn until it runs out)
    assert budget < space.size <= MAX_DRAWS_PER_BUDGET * budget
    found = search_mappings(layer, "kcp", TINY, budget=budget, seed=2, keep=1)
    assert (found.evaluated, found.accepted, found.refused) == (space.size, every.accepted, every.refused)
    assert found.best[0].score == every.best[0].score


def test_draw_order_covers_the_space_once():
    assert list(draw_order(5, 5, 0)) == list(range(5))
    for size in (7, 1000):
        order = list(draw_order(size, 3, 1))
        assert sorted(order) == list(range(size)) and order != sorted(order)
        assert order == list(draw_order(size, 3, 1)) != list(draw_order(size, 3, 2))
    big = list(itertools.islice(draw_order(3 << 20, 10, 0), 1000))     # (over a million: seeded draws)
    assert len(set(big)) == 1000 and all(0 <= i < 3 << 20 for i in big)


def test_the_best_mapping_runs_as_reported_from_its_label():
    found = search_mappings(CONV, "kcp", TINY, budget=400, seed=1)
    best = found.best[0]
    again = analyze_layer(CONV, best.label, TINY, "hwgen")
    assert again.runtime_cycles == best.result.runtime_cycles and again.energy_pj == best.result.energy_pj
    default = analyze_layer(CONV, "kcp", TINY, "hwgen")
    assert best.result.runtime_cycles <= default.runtime_cycles


@pytest.mark.parametrize("extent", [1, 2, 7, 12, 16, 28, 30])
def test_tile_candidates(extent):
    got = tile_candidates(extent)
    assert got == sorted(set(got)) and got[0] == 1 and got[-1] == extent
    assert all(d in got for d in range(1, extent + 1) if extent % d == 0)
    assert all(1 << i in got for i in range(extent.bit_length()) if 1 << i <= extent)


def test_map_prints_the_best_mapping_per_layer(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")             # (the mappings unfolded, on one line each)
    model = tmp_path / "m.yaml"
    model.write_text("name: m\nlayers:\n  - {name: a, type: conv2d, K: 8, C: 6, Y: 6, X: 7, R: 3, S: 3, padding: 1}\n"
                     "  - {name: fc, type: gemm, M: 6, N: 10, K: 12}\n")
    assert main(["map", "--model", str(model), "--hw", "tiny", "--dataflow", "kcp,cp", "--budget", "60",
                 "--no-progress"]) == 0
    out, err = capsys.readouterr()
    best = search_mappings(CONV, "kcp", TINY, budget=60)
    assert best.best[0].label.split(",")[0] in out and "fc" in out and "nmk(" in out
    assert "mapped with nmk" in err and "mappings/s" in err
    assert main(["map", "--model", str(model), "--layer", "a", "--hw", "tiny", "--budget", "40", "--top", "2",
                 "--format", "json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (entry,) = doc["layers"]
    assert entry["layer"] == "a" and entry["accepted"] == 40 == entry["evaluated"] - entry["refused"]
    assert len(entry["best"]) == 2
    assert entry["best"][0]["runtime_cycles"] <= entry["best"][1]["runtime_cycles"]


@pytest.mark.parametrize("argv,message", [
    (["--dataflow", "foo"], "unknown dataflow 'foo'"),
    (["--layer", "a", "--dataflow", "nmk"], "no dataflow of --dataflow is for conv2d layers"),
    (["--layer", "zz"], "has no layer 'zz'"),
    (["--objective", "speed"], "invalid choice"),
    (["--budget", "0"], "expected a positive integer"),
    (["--format", "csv"], "expected --format table or json"),
])
def test_map_bad_input_is_one_line(argv, message, capsys, tmp_path):
    model = tmp_path / "m.yaml"
    model.write_text("name: m\nlayers:\n  - {name: a, type: conv2d, K: 8, C: 6, Y: 6, X: 7, R: 3, S: 3}\n")
    try:
        status = main(["map", "--model", str(model), "--hw", "tiny", "--no-progress", *argv])
    except SystemExit as exc:            # (a usage error: argparse exits with status 2)
        status = exc.code
    assert status in (1, 2)
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
