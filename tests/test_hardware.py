"""Hardware description: NoC delay rule, YAML validation, overrides, tables, area."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.base import AccelgenError
from costmodel.hardware.hardware import (
    BUILTIN_HARDWARE,
    Hardware,
    NoCLevel,
    builtin_hardware,
    hardware_from_dict,
    hardware_from_yaml,
    hardware_to_dict,
    load_hardware,
)
from costmodel.hardware.tables import (
    AREA_45NM_HOROWITZ,
    AREA_TABLES,
    ENERGY_45NM_HOROWITZ,
    ENERGY_MAESTRO_RELATIVE,
    ENERGY_TABLES,
    AreaTable,
    EnergyTable,
)

SMALL: dict[str, Any] = {
    "name": "t",
    "num_pes": 64,
    "l1_bytes_per_pe": 512,
    "l2_bytes": 1 << 20,
    "noc": [{"bandwidth_words_per_cycle": 64, "latency_cycles": 1}],
    "offchip_bw_words_per_cycle": 16,
}


def small(**changes: Any) -> dict[str, Any]:
    return {**SMALL, **changes}


def error_of(data: object, where: str = "x.yaml") -> str:
    with pytest.raises(AccelgenError) as info:
        hardware_from_dict(data, where)
    return str(info.value)


# --- NoC delay ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("bw", "latency", "hops", "words", "cycles"), [
    (64, 1, 1, 0, 0),            # nothing to move costs nothing, not the latency
    (64, 1, 1, 1, 1),            # 1*1 + ceil(1/64) - 1
    (64, 1, 1, 64, 1),
    (64, 1, 1, 65, 2),
    (64, 0, 1, 128, 1),
    (4, 2, 3, 9, 6 + 3 - 1),
    (64.0, 1, 1, 65, 2),         # integral float bandwidth
    (1.5, 0, 1, 3, 1),           # ceil(3/1.5) - 1
    (1.5, 0, 1, 4, 2),           # ceil(2.67) - 1
    (math.inf, 1, 1, 10**30, 1),
    (math.inf, 0, 1, 5, 0),
    (math.inf, 2, 4, 0, 0),
])
def test_noc_delay_rule(bw: float, latency: int, hops: int, words: int, cycles: int) -> None:
    assert NoCLevel(bw, latency, hops).delay_cycles(words) == cycles


def test_noc_delay_exact_for_huge_counts() -> None:
    words = 10**30 + 1
    assert NoCLevel(64, 1).delay_cycles(words) == 1 + (words + 63) // 64 - 1
    assert NoCLevel(3, 0).delay_cycles(3 * 10**25) == 10**25 - 1      # float division would drift
    # 0.1 is exactly 3602879701896397 / 2**55: the ceiling follows that exact value.
    assert NoCLevel(0.1, 0).delay_cycles(10**20) == -(-(10**20) * 2**55 // 3602879701896397) - 1
    assert isinstance(NoCLevel(1.5, 0).delay_cycles(10**20), int)


@pytest.mark.parametrize(("args", "message"), [
    ((0, 1), "NoCLevel: bandwidth_words_per_cycle must be a positive number or 'inf', not 0"),
    ((math.nan, 1), "NoCLevel: bandwidth_words_per_cycle must be a positive number or 'inf', not nan"),
    ((1, -1), "NoCLevel: latency_cycles must be a non-negative integer, not -1"),
    ((1, 1, 0), "NoCLevel: hops must be a positive integer, not 0"),
    ((1, True), "NoCLevel: latency_cycles must be a non-negative integer, not True"),
])
def test_noc_level_validation(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(AccelgenError) as info:
        NoCLevel(*args)
    assert str(info.value) == message


@pytest.mark.parametrize("words", [-1, 1.0, True, "3"])
def test_noc_delay_rejects_bad_word_counts(words: Any) -> None:
    with pytest.raises(AccelgenError, match="words must be a non-negative integer"):
        NoCLevel(8, 1).delay_cycles(words)


def test_noc_at_reuses_last_level() -> None:
    hw = hardware_from_dict(small(noc=[{"bandwidth_words_per_cycle": 8, "latency_cycles": 1},
                                       {"bandwidth_words_per_cycle": 2, "latency_cycles": 3, "hops": 2}]))
    assert hw.noc_at(0) == NoCLevel(8, 1)
    assert hw.noc_at(1) == hw.noc_at(7) == NoCLevel(2, 3, 2)
    with pytest.raises(AccelgenError, match="NoC level must be a non-negative integer, not -1"):
        hw.noc_at(-1)


# --- YAML: good -----------------------------------------------------------------------------------

def test_defaults_are_filled() -> None:
    hw = hardware_from_dict(SMALL, "x.yaml")
    assert (hw.simd_lanes, hw.multicast, hw.spatial_reduction) == (1, True, True)
    assert (hw.input_bits, hw.weight_bits, hw.psum_bits, hw.clock_mhz) == (8, 8, 32, 1000.0)
    assert hw.energy is ENERGY_45NM_HOROWITZ and hw.area is AREA_45NM_HOROWITZ
    assert hw.noc == (NoCLevel(64, 1, 1),)


@pytest.mark.parametrize("text", ["inf", ".inf", "Inf", "'inf'", ".Inf"])
def test_inf_bandwidth_spellings(text: str) -> None:
    hw = hardware_from_yaml(
        "name: t\nnum_pes: 4\nl1_bytes_per_pe: 64\nl2_bytes: 1024\n"
        f"noc: [{{bandwidth_words_per_cycle: {text}, latency_cycles: 2}}]\n"
        f"offchip_bw_words_per_cycle: {text}\n", "x.yaml")
    assert hw.noc[0].bandwidth_words_per_cycle == math.inf == hw.offchip_bw_words_per_cycle
    assert hw.noc_at(0).delay_cycles(10**9) == 2


def test_builtin_presets() -> None:
    tiny, small_hw, large, ref = (builtin_hardware(n) for n in ("tiny", "small", "large", "maestro_ref"))
    assert (tiny.num_pes, small_hw.num_pes, large.num_pes, ref.num_pes) == (8, 64, 1024, 256)
    assert len(tiny.noc) == 2
    assert ref.noc == (NoCLevel(64, 1, 1),)
    assert (ref.l1_bytes_per_pe, ref.l2_bytes, ref.offchip_bw_words_per_cycle) == (512, 1 << 20, 70000)
    assert ref.multicast and ref.spatial_reduction and ref.energy is ENERGY_MAESTRO_RELATIVE
    assert small_hw.clock_mhz == 100 and small_hw.offchip_bw_words_per_cycle == 16


@pytest.mark.parametrize("name", BUILTIN_HARDWARE)
def test_round_trip_and_pickle(name: str) -> None:
    hw = builtin_hardware(name)
    assert hardware_from_yaml(yaml.safe_dump(hardware_to_dict(hw)), "dump") == hw
    assert pickle.loads(pickle.dumps(hw)) == hw
    assert hash(hw) == hash(pickle.loads(pickle.dumps(hw)))


def test_builtin_falls_back_to_a_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    assert builtin_hardware(str(path)).name == "t"
    with pytest.raises(AccelgenError) as info:
        builtin_hardware("nope")
    assert str(info.value) == "nope: no such file (built-in hardware: tiny, small, large, maestro_ref)"


def test_inline_energy_with_base_and_round_trip() -> None:
    hw = hardware_from_dict(small(energy={
        "base": "horowitz45",
        "l2_read_pj": {"value": 5, "source": "my SRAM compiler, 22 nm"},
        "word_bits": 16,
    }))
    assert hw.energy.l2_read_pj == 5 and hw.energy.sources["l2_read_pj"] == "my SRAM compiler, 22 nm"
    assert hw.energy.mac_pj == ENERGY_45NM_HOROWITZ.mac_pj and hw.energy.word_bits == 16
    assert hardware_from_dict(hardware_to_dict(hw)) == hw


def test_inline_energy_without_base_needs_everything() -> None:
    full = {name: {"value": 1.0, "source": "s"} for name in EnergyTable.coefficient_names()}
    hw = hardware_from_dict(small(energy={**full, "word_bits": None}))
    assert hw.energy.word_bits is None and hw.energy.per_word_pj("l1_read_pj", 32) == 1.0
    del full["dram_pj_per_word"]
    assert error_of(small(energy={**full, "word_bits": 8})) == "x.yaml: energy.dram_pj_per_word is required"


# --- YAML: bad ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "message"), [
    (small(noc=[{"bandwidth_words_per_cycle": -3, "latency_cycles": 1}]),
     "noc[0].bandwidth_words_per_cycle must be a positive number or 'inf', not -3"),
    (small(noc=[{"bandwidth_words_per_cycle": "fast", "latency_cycles": 1}]),
     "noc[0].bandwidth_words_per_cycle must be a positive number or 'inf', not 'fast'"),
    (small(noc=[{"bandwidth_words_per_cycle": 1, "latency_cycles": 1.5}]),
     "noc[0].latency_cycles must be a non-negative integer, not 1.5"),
    (small(noc=[{"bandwidth_words_per_cycle": 1, "latency_cycles": 1, "hops": 0}]),
     "noc[0].hops must be a positive integer, not 0"),
    (small(noc=[{"bandwidth_words_per_cycle": 1}]), "noc[0].latency_cycles is required"),
    (small(noc=[{"bw": 1, "latency_cycles": 1}]),
     "unknown field 'bw' in noc[0] (allowed: bandwidth_words_per_cycle, latency_cycles, hops)"),
    (small(noc=[]), "noc must be a non-empty list of {bandwidth_words_per_cycle, latency_cycles, hops}, "
                    "not []"),
    (small(noc=[7]), "noc[0] must be a mapping {bandwidth_words_per_cycle, latency_cycles, hops}, not 7"),
    (small(num_pes=0), "num_pes must be a positive integer, not 0"),
    (small(num_pes=64.0), "num_pes must be a positive integer, not 64.0"),
    (small(num_pes=True), "num_pes must be a positive integer, not True"),
    (small(num_pes=2**60), "num_pes must be a positive integer no larger than 2**53, not 1152921504606846976"),
    (small(simd_lanes="4"), "simd_lanes must be a positive integer, not '4'"),
    (small(l2_bytes=-1), "l2_bytes must be a positive integer, not -1"),
    (small(multicast="yes"), "multicast must be true or false, not 'yes'"),
    (small(offchip_bw_words_per_cycle=0), "offchip_bw_words_per_cycle must be a positive number or 'inf', not 0"),
    (small(clock_mhz=math.inf), "clock_mhz must be a positive number, not inf"),
    (small(data_widths={"input_bits": 0}), "data_widths.input_bits must be an integer from 1 to 64, not 0"),
    (small(data_widths={"acc_bits": 8}),
     "unknown field 'acc_bits' in data_widths (allowed: input_bits, weight_bits, psum_bits)"),
    (small(data_widths=8), "data_widths must be a mapping {input_bits, weight_bits, psum_bits}, not 8"),
    (small(energy="horowitz"),
     "energy must be one of 'horowitz45', 'maestro' or a mapping of coefficients, not 'horowitz'"),
    (small(area="maestro"), "area must be one of 'horowitz45' or a mapping of coefficients, not 'maestro'"),
    (small(energy={"base": "horowitz45", "mac_pj": 0.5}),
     "energy.mac_pj must be a mapping {value: <number>, source: <citation>}, not 0.5"),
    (small(energy={"base": "horowitz45", "mac_pj": {"value": 0.5}}), "energy.mac_pj.source is required"),
    (small(energy={"base": "horowitz45", "mac_pj": {"value": 0.5, "source": " "}}),
     "energy.mac_pj.source must be a non-empty string, not ' '"),
    (small(energy={"base": "horowitz45", "mac_pj": {"value": -1, "source": "s"}}),
     "energy.mac_pj.value must be a non-negative number, not -1"),
    (small(energy={"base": "horowitz45", "word_bits": 0}),
     "energy.word_bits must be an integer from 1 to 64 or null, not 0"),
    (small(energy={"base": "nope"}), "energy.base must be one of 'horowitz45', 'maestro', not 'nope'"),
    (small(area={"base": "horowitz45", "word_bits": 8}),
     "unknown field 'word_bits' in area (allowed: base, mac_um2, l1_um2_per_byte, l2_um2_per_byte, "
     "noc_um2_per_pe, controller_um2)"),
    (small(name=""), "name must be a non-empty string, not ''"),
    (small(pes=4), "unknown field 'pes' (allowed: name, num_pes, simd_lanes, pe_drain_words, l1_bytes_per_pe, "
                   "l2_bytes, noc, multicast, spatial_reduction, offchip_bw_words_per_cycle, data_widths, clock_mhz, "
                   "energy, area)"),
    ({k: v for k, v in SMALL.items() if k != "l2_bytes"}, "l2_bytes is required"),
    ([1, 2], "the top level must be a mapping of hardware fields, not [1, 2]"),
])
def test_bad_fields(data: object, message: str) -> None:
    assert error_of(data) == f"x.yaml: {message}"


def test_long_values_are_shortened() -> None:
    message = error_of(small(name=None, num_pes="p" * 500))
    assert message.startswith("x.yaml: name must be a non-empty string, not None")
    message = error_of(small(num_pes="p" * 500))
    assert message == f"x.yaml: num_pes must be a positive integer, not '{'p' * 56}..."


def test_file_errors(tmp_path: Path) -> None:
    def load_error(path: Path) -> str:
        with pytest.raises(AccelgenError) as info:
            load_hardware(path)
        return str(info.value)

    assert load_error(tmp_path / "missing.yaml") == f"{tmp_path / 'missing.yaml'}: no such file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nnum_pes: [1, 2\n")
    assert load_error(bad).startswith(f"{bad}: not valid YAML (line 3: ")
    bad.write_text("name: t\nname: u\n")
    assert load_error(bad) == f"{bad}: not valid YAML (line 2: duplicate key 'name')"
    bad.write_text("")
    assert load_error(bad) == f"{bad}: empty file; expected a mapping of hardware fields"
    bad.write_text("a\x01")
    assert load_error(bad) == f"{bad}: not valid YAML (line 1: unacceptable character #x0001)"
    bad.write_bytes(b"name: \xff\n")
    assert load_error(bad) == f"{bad}: not UTF-8 text (byte 6)"
    bad.write_text("when: 2001-13-45\n")
    assert load_error(bad).startswith(f"{bad}: not valid YAML (")
    bad.write_text(yaml.safe_dump(small(noc=[{"bandwidth_words_per_cycle": -3, "latency_cycles": 1}])))
    assert load_error(bad) == \
        f"{bad}: noc[0].bandwidth_words_per_cycle must be a positive number or 'inf', not -3"
    assert load_error(tmp_path).endswith("is a directory, not a hardware file")


# --- overrides ------------------------------------------------------------------------------------

def test_overrides_apply_to_every_level() -> None:
    hw = builtin_hardware("tiny")
    new = hw.with_overrides(num_pes=16, noc_bw="inf", noc_latency=0)
    assert new.num_pes == 16 and hw.num_pes == 8
    assert new.noc == (NoCLevel(math.inf, 0), NoCLevel(math.inf, 0))
    assert hw.with_overrides(noc_bw=32).noc == (NoCLevel(32, 1), NoCLevel(32, 1))
    assert hw.with_overrides() == hw
    assert hw.with_overrides(energy="maestro").energy is ENERGY_MAESTRO_RELATIVE
    assert hw.with_overrides(offchip_bw=math.inf).offchip_bw_words_per_cycle == math.inf


@pytest.mark.parametrize(("changes", "message"), [
    ({"num_pes": 0}, "num_pes must be a positive integer, not 0"),
    ({"noc_bw": -1}, "noc_bw must be a positive number or 'inf', not -1"),
    ({"noc_latency": -2}, "noc_latency must be a non-negative integer, not -2"),
    ({"energy": "nope"}, "energy must be an EnergyTable or one of 'horowitz45', 'maestro', not 'nope'"),
])
def test_bad_overrides(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(AccelgenError) as info:
        builtin_hardware("tiny").with_overrides(**changes)
    assert str(info.value) == f"hardware 'tiny': {message}"


def test_direct_construction_is_validated() -> None:
    with pytest.raises(AccelgenError) as info:
        Hardware(name="h", num_pes=4, l1_bytes_per_pe=8, l2_bytes=8, noc=(), offchip_bw_words_per_cycle=1)
    assert str(info.value) == "hardware 'h': noc must be a non-empty tuple of NoCLevel, not ()"


# --- tables and area ------------------------------------------------------------------------------

@pytest.mark.parametrize("table", [*ENERGY_TABLES.values(), *AREA_TABLES.values()])
def test_every_coefficient_has_a_source(table: EnergyTable | AreaTable) -> None:
    names = table.coefficient_names()
    assert set(table.sources) == set(names)
    for name in names:
        assert isinstance(table.sources[name], str) and table.sources[name].strip()
        assert getattr(table, name) >= 0


def test_table_values() -> None:
    h = ENERGY_45NM_HOROWITZ
    assert (h.mac_pj, h.l1_read_pj, h.l2_read_pj, h.dram_pj_per_word) == pytest.approx((0.3, 1.25, 12.5, 162.5))
    assert h.per_word_pj("l2_read_pj", 32) == pytest.approx(50.0)      # 100 pJ per 64 bit, scaled
    assert h.per_word_pj("mac_pj", 32) == pytest.approx(0.3)           # the MAC is not rescaled
    m = ENERGY_MAESTRO_RELATIVE
    assert (m.mac_pj, m.l1_read_pj, m.l1_write_pj, m.l2_read_pj, m.l2_write_pj) == (1.0, 1.68, 1.68, 18.61, 18.61)
    assert m.per_word_pj("l2_write_pj", 32) == 18.61
    assert AREA_45NM_HOROWITZ.mac_um2 == 419.0


def test_table_without_a_source_is_refused() -> None:
    sources = dict(AREA_45NM_HOROWITZ.sources)
    sources["mac_um2"] = ""
    with pytest.raises(AccelgenError) as info:
        AreaTable(mac_um2=1, l1_um2_per_byte=1, l2_um2_per_byte=1, noc_um2_per_pe=1, controller_um2=1,
                  sources=sources)
    assert str(info.value) == "AreaTable: sources['mac_um2'] must be a non-empty string, not ''"


def test_area_formula_and_monotone_in_pes() -> None:
    hw = builtin_hardware("small")
    a = hw.area
    expected = (64 * (a.mac_um2 + 512 * a.l1_um2_per_byte + a.noc_um2_per_pe)
                + (1 << 20) * a.l2_um2_per_byte + a.controller_um2) / 1e6
    assert hw.area_mm2() == pytest.approx(expected)
    areas = [hw.with_overrides(num_pes=n).area_mm2() for n in (1, 2, 8, 64, 256, 1024, 4096)]
    assert all(x > 0 for x in areas) and areas == sorted(areas) and len(set(areas)) == len(areas)
    assert hw.with_overrides(simd_lanes=4).area_mm2() > hw.area_mm2()


# --- fuzzing: only AccelgenError ever escapes ------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                     st.sampled_from(["inf", ".inf", "horowitz45", "maestro"]))
_keys = st.one_of(st.sampled_from(["name", "num_pes", "simd_lanes", "l1_bytes_per_pe", "l2_bytes", "noc",
                                   "multicast", "spatial_reduction", "offchip_bw_words_per_cycle",
                                   "data_widths", "clock_mhz", "energy", "area", "base", "word_bits",
                                   "mac_pj", "value", "source", "bandwidth_words_per_cycle",
                                   "latency_cycles", "hops", "input_bits"]),
                  st.text(max_size=5), st.integers())
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(_keys, inner, max_size=6)),
                       max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=10))
def test_random_dicts_raise_only_accelgen_errors(data: dict[Any, Any]) -> None:
    try:
        hardware_from_dict(data, "fuzz")
    except AccelgenError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz: ")


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({}, optional={k: _values for k in SMALL}))
def test_random_overrides_of_a_good_dict(changes: dict[str, Any]) -> None:
    try:
        hardware_from_dict({**SMALL, **changes}, "fuzz")
    except AccelgenError as exc:
        assert str(exc).startswith("fuzz: ")


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="{}[]:,-'\"!&*?|>#%@` \n\tabc01.", max_size=60)))
def test_random_text_raises_only_accelgen_errors(text: str) -> None:
    try:
        hardware_from_yaml(text, "fuzz.yaml")
    except AccelgenError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.yaml: ")
