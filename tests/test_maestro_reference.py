"""The ``maestro`` preset against figures printed by MAESTRO itself (costmodel/data)."""

from __future__ import annotations

import pytest

from costmodel import AccelgenError, analyze_layer, parse_dataflow
from costmodel.maestro.validate import compare, reference_hardware, reference_layer, reference_rows

ROWS = reference_rows()
OK_ROWS = [r for r in ROWS if r["status"] == "ok"]


def _id(row: dict[str, str]) -> str:
    return f"{row['model']}.{row['layer']}-{row['dataflow']}-{row['num_pes']}"


def _analyze(row: dict[str, str], *, ideal: bool):
    dataflow = parse_dataflow(row["dataflow_directives"], name=row["dataflow"])
    return analyze_layer(reference_layer(row), dataflow, reference_hardware(row, ideal_noc=ideal), "maestro")


def test_reference_covers_every_dataflow_and_array_size() -> None:
    assert len(OK_ROWS) >= 100
    assert {r["dataflow"] for r in OK_ROWS} >= {"KC-P", "YR-P", "YX-P", "X-P", "C-P", "NMK-64", "NMK-100"}
    assert {r["num_pes"] for r in OK_ROWS} == {"64", "256", "1024"}


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_macs_are_exact(row: dict[str, str]) -> None:
    layer = reference_layer(row)
    assert layer.macs == int(row["true_macs"])
    if row["status"] == "ok":
        result = _analyze(row, ideal=True)
        assert result.macs == int(row["true_macs"])
        assert result.step_macs == int(row["true_macs"])


@pytest.mark.parametrize("row", [r for r in OK_ROWS if r["num_macs"] == r["true_macs"]], ids=_id)
def test_ideal_noc_runtime_matches_maestro_exactly(row: dict[str, str]) -> None:
    assert _analyze(row, ideal=True).runtime_cycles == int(row["runtime_cycles_ideal_noc"])


@pytest.mark.parametrize("row", [r for r in OK_ROWS if r["num_macs"] == r["true_macs"]], ids=_id)
def test_constrained_noc_runtime_matches_maestro_exactly(row: dict[str, str]) -> None:
    assert _analyze(row, ideal=False).runtime_cycles == int(row["runtime_cycles"])


def test_row_maestro_crashed_on_is_refused_with_a_reason() -> None:
    failed = [r for r in ROWS if r["status"] != "ok"]
    assert failed, "the reference keeps MAESTRO's crash on Cluster(100) over 64 PEs"
    for row in failed:
        with pytest.raises(AccelgenError, match=r"Cluster\(100\) needs 100 PEs .* has 64"):
            _analyze(row, ideal=True)


def test_every_compared_column_agrees_except_documented_ones() -> None:
    columns, _ = compare(ROWS)
    documented = {"output_l1_size_req", "l1_size_req_total", "mcast_factor_input", "mcast_factor_weight"}
    for column in columns:
        if column["column"] in documented or not column["rows"]:
            continue
        assert column["exact"] == column["rows"], column
    by_name = {c["column"]: c for c in columns}
    # Output L1 is counted in output coordinates, so it differs exactly where tiles carry a halo.
    assert 0 < by_name["output_l1_size_req"]["exact"] < by_name["output_l1_size_req"]["rows"]
