"""Benchmarks (``make bench``).  Each result is one line ``name: value unit``; ratios against
the published reference figures follow as their own lines.  Timings are best-of-N wall clock on
this machine, single process, no result caching between evaluations."""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel import LIBRARY, AccelgenError, analyze_layer, builtin_hardware, get_model  # noqa: E402

# MAESTRO's C++ binary (maestro-project/maestro @4eb08d1, -O2) per single-layer evaluation.
MAESTRO_MS_PER_EVAL = (0.6, 2.9)


def _pairs():
    model = get_model("resnet50")
    return [(layer, name) for layer in model.layers for name, t in LIBRARY.items()
            if t.layer_kind == layer.kind]


def bench_model_layer_eval(repeats: int = 3, min_seconds: float = 1.0) -> float:
    """Single-layer evaluations per second: ResNet-50's layers x the built-in dataflows of
    their kind on the 64-PE ``small`` hardware (evaluations the analysis refuses are skipped
    and not counted)."""
    hw = builtin_hardware("small")
    pairs = []
    for layer, name in _pairs():
        try:
            analyze_layer(layer, name, hw)
            pairs.append((layer, name))
        except AccelgenError:
            pass
    best = 0.0
    for _ in range(repeats):
        count, start = 0, time.perf_counter()
        while True:
            for layer, name in pairs:
                analyze_layer(layer, name, hw)
            count += len(pairs)
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = max(best, count / elapsed)
    return best


# MAESTRO's published design-space exploration rate (Kwon et al., MICRO 2019: 0.17 M designs/s)
# and what its public binary manages when driven design by design (~1,500 designs/s).
MAESTRO_PAPER_DESIGNS_PER_S = 170_000
MAESTRO_BINARY_DESIGNS_PER_S = 1_500
SPACE = Path(__file__).resolve().parents[1] / "configs" / "space" / "resnet50.yaml"


def bench_dse(one_layer: bool, workers: int) -> tuple[float, int]:
    """Design points per second of a whole search (structures built inside the timing, no
    caching across runs) over ``configs/space/resnet50.yaml``: for ResNet-50's layer2.0.conv2
    alone, or for the whole network (one hardware for all layers, sums over layers)."""
    from costmodel import Model
    from costmodel.dse import load_space, make_plan, run_search

    model = get_model("resnet50")
    if one_layer:
        layer = next(l for l in model.layers if l.name == "layer2.0.conv2")
        model = Model("resnet50.layer2.0.conv2", (layer,))
    plan = make_plan(load_space(SPACE), model, ("runtime_cycles", "energy_pj"), (), "maestro")
    start = time.perf_counter()
    state = run_search(plan, workers=workers)
    return state.evaluated / (time.perf_counter() - start), state.evaluated


def bench_hwgen_layer_eval(min_seconds: float = 1.0) -> dict:
    """The ``hwgen`` preset on ResNet-50's convolutions (``kcp``) and its GEMM (``nmk``) on the
    64-PE ``small`` hardware, with nothing cached: layers evaluated per second (structure, tiles
    and the closed-form schedule), the structure and tiles alone, and the step walk's rate
    (:func:`costmodel.hwgen_preset.walk.schedule_summary`, the reference the closed form is
    tested equal to) from its first steps of the same layers, for the ratio."""
    from costmodel.analysis import resolve_dataflow
    from costmodel.hwgen_preset.closed import closed_summary
    from costmodel.hwgen_preset.preset import hwgen_structure
    from costmodel.hwgen_preset.rules import TIMING
    from costmodel.hwgen_preset.structure import tiles_of
    from costmodel.hwgen_preset.walk import step_costs, steps as walk_steps

    hw = builtin_hardware("small")
    layers = [(layer, resolve_dataflow("nmk" if layer.kind == "gemm" else "kcp", layer, hw))
              for layer in get_model("resnet50").layers]

    def rate(fn) -> float:
        n, start = 0, time.perf_counter()
        while True:
            for layer, df in layers:
                fn(layer, df)
                n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                return n / elapsed

    def structure(layer, df):
        s = hwgen_structure(df, layer, hw, fit=[layer])
        return s, tiles_of(s, df, layer)

    evals = rate(lambda layer, df: closed_summary(*structure(layer, df)))
    structures = rate(structure)
    total_steps = 0
    walked, start = 0, time.perf_counter()
    for layer, df in layers:
        s, t = structure(layer, df)
        total_steps += closed_summary(s, t)["steps"]
        for i, st in zip(range(200), walk_steps(s, t)):      # (200 steps a layer: the walk's rate)
            step_costs(s, t, st, ("input", "weight"), TIMING)
            walked += 1
    walk_steps_per_s = walked / (time.perf_counter() - start)
    walk_evals = walk_steps_per_s / (total_steps / len(layers))
    return {"evals": evals, "structures": structures, "walk_evals": walk_evals,
            "steps_per_layer": total_steps / len(layers), "walk_steps": walk_steps_per_s}


def bench_hwgen_dse(one_layer: bool, samples: int | None = None, workers: int = 1) -> tuple[float, int]:
    """Design points per second of a search with the ``hwgen`` preset (the generated design's own
    timing, :class:`costmodel.dse.HwgenEvaluator`) over ``configs/space/resnet50.yaml`` with
    ``workers`` processes (each with its own caches), nothing cached before: ResNet-50's layer2.0.conv2 alone or the whole network, every point
    enumerated as the space says (as ``dse_resnet50`` runs the ``maestro`` preset), or only
    ``samples`` points drawn at random (seed 1: few share what the preset reads, the worst case)."""
    from dataclasses import replace

    from costmodel import Model
    from costmodel.dse import load_space, make_plan, run_search

    model = get_model("resnet50")
    space = load_space(SPACE)
    if one_layer:
        layer = next(l for l in model.layers if l.name == "layer2.0.conv2")
        model = Model("resnet50.layer2.0.conv2", (layer,))
    if samples is not None:
        space = replace(space, mode="random", samples=samples, seed=1)
    plan = make_plan(space, model, ("runtime_cycles", "energy_pj"), (), "hwgen")
    start = time.perf_counter()
    state = run_search(plan, workers=workers)
    return state.evaluated / (time.perf_counter() - start), state.evaluated


# ZigZag's LOMA mapper on one layer (measured by its authors: 70-146 mappings/s).
LOMA_MAPPINGS_PER_S = (70, 146)


def bench_mapping_search(budget: int = 3000):
    """``accelgen map``'s search (``kcp``'s tiles and orders of ResNet-50's layer2.0.conv2 on
    ``small``, ``hwgen`` preset, seed 0) with a budget of ``budget`` accepted mappings: the search
    object and its wall time.  Refused mappings (PE tiles larger than ``small``'s 512 B of L1:
    most of the space) are drawn but do not use the budget; tiles too large for L1 are refused
    once for all their loop orders."""
    from costmodel.dse.mapping import search_mappings

    hw = builtin_hardware("small")
    layer = next(l for l in get_model("resnet50").layers if l.name == "layer2.0.conv2")
    start = time.perf_counter()
    found = search_mappings(layer, "kcp", hw, budget=budget, seed=0)
    return found, time.perf_counter() - start


def _emit_kcp(hardware: str, out: Path):
    """``kcp``'s design on ``hardware``, made for the bench's default layer (a 3x3 convolution, the
    library's default tile) and emitted in ``out``: the hardware and the top's Verilog."""
    from costmodel.dataflow.spec import resolve_dataflow
    from costmodel.workload import parse_layer_spec
    from hwgen.emit import emit_design
    hw = builtin_hardware(hardware)
    layer = parse_layer_spec("conv2d:K=8,C=8,Y=8,X=8,R=3,S=3", name="default")
    emit_design(hw, lambda l: resolve_dataflow("kcp", l, hw), [layer], out)
    return hw, out / "accelgen_top.v"


def bench_rtl_resources(hardware: str, target: str = "ecp5", place_top: bool = False) -> None:
    """FPGA resources of the generated ``kcp`` design on ``hardware`` (Yosys ``synth_<target>``:
    one PE and the shared parts), the time to emit its Verilog, and its Fmax by nextpnr on the
    smallest ECP5 the whole design fits with room (``accelgen.synth.smallest_device``: tiny on an
    LFE5U-25F, small on none, so the LFE5U-85F) where installed: the PE module alone with its ports
    registered (it is what the array replicates, and its ports would not fit the package), and
    with ``place_top`` the whole top level too (its host-bus ports fit; only the clock's pin
    constrained; tiny: synthesis ~1 min, placement
    and routing by router2 ~4 min on the 2-core machine; ``ACCELGEN_BENCH_PNR_TOP=0`` skips it), the
    median of ``ACCELGEN_BENCH_PNR_SEEDS`` placements (3; two run at a time)."""
    import tempfile

    from accelgen.pnr import nextpnr_missing, place_and_route
    from accelgen.synth import smallest_device, synthesize_design, yosys_missing
    from hwgen.emit import TOP
    from hwgen.pe import PE_MODULE
    missing = yosys_missing()
    if missing:
        print(f"rtl_resources_{hardware}: skipped ({missing})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        hw, verilog = _emit_kcp(hardware, Path(tmp) / "design")
        print(f"rtl_emit_seconds_{hardware}: {time.perf_counter() - start:.1f} s")
        r = synthesize_design(verilog, hw.num_pes, target)
        label = f"({target}, kcp on {hardware}, {hw.num_pes} PEs)"
        print(f"rtl_luts_per_pe: {r.pe.lut} LUT4 {label}")
        print(f"rtl_lutram_per_pe: {r.pe.lutram} distributed-RAM cells (16x4 each: the L1 banks) {label}")
        print(f"rtl_dsps_per_pe: {r.pe.dsp} {label}")
        print(f"rtl_ffs_per_pe: {r.pe.ff} {label}")
        print(f"rtl_overhead_luts: {r.shared.lut} LUT4 {label}: host bus, L2, controller, loader, NoC, drain")
        print(f"rtl_overhead_dsps: {r.shared.dsp} {label}")
        print(f"rtl_bram: {r.total.bram} {label}")
        print(f"rtl_total_luts: {r.total.lut} LUT4 {label}")
        print(f"rtl_luts_per_pe_vs_goal: {r.pe.lut / 200:.1f}x the 200 LUT4 goal")
        missing = nextpnr_missing()
        if missing:
            print(f"rtl_fmax_mhz: not measured ({missing})")
            return
        # (one placement's Fmax moves by about +-10 % with the seed: the whole top is placed
        # with several, two at a time, and the median printed with the range)
        seeds = max(1, int(os.environ.get("ACCELGEN_BENCH_PNR_SEEDS", "3")))
        # (on the smallest ECP5 the whole design fits with room, as an engineer would pick it)
        device = smallest_device(r.total)
        placed = [("rtl_fmax_mhz", PE_MODULE, True, f"kcp on {hardware}: {PE_MODULE} alone, ports registered", (1,))]
        whole = f"kcp on {hardware}: whole {TOP}, {hw.num_pes} PEs, only the clock pin constrained"
        top_wanted = place_top and os.environ.get("ACCELGEN_BENCH_PNR_TOP", "1") != "0"
        if top_wanted:
            placed.append(("rtl_fmax_mhz_top", TOP, False, whole, tuple(range(1, seeds + 1))))
        for name, top, registered, what, run_seeds in placed:
            def run(seed, top=top, registered=registered):
                return place_and_route(verilog, top, "ecp5", device=device, freq_mhz=hw.clock_mhz,
                                       registered_io=registered, seed=seed)
            try:
                with ThreadPoolExecutor(max_workers=min(2, len(run_seeds))) as pool:
                    runs = list(pool.map(run, run_seeds))
            except AccelgenError as exc:
                print(f"{name}: not measured ({what}: {exc})")
                continue
            pr = sorted(runs, key=lambda r: r.fmax_mhz)[len(runs) // 2]        # the median run
            used, available = pr.utilisation.get("TRELLIS_COMB", (0, 0))
            spread = (f"median of seeds {run_seeds[0]}-{run_seeds[-1]}: "
                      + ", ".join(f"{r.fmax_mhz:.1f}" for r in runs) + "; " if len(runs) > 1 else "")
            print(f"{name}: {pr.fmax_mhz:.1f} MHz (ecp5 {pr.part}, {what}; {spread}target {pr.freq_mhz:g} MHz; "
                  f"{used / max(available, 1):.1%} of LUT cells; synthesis + P&R {pr.seconds:.0f} s)")
        if place_top and not top_wanted:
            print(f"rtl_fmax_mhz_top: not measured ({whole}: ACCELGEN_BENCH_PNR_TOP=0)")


def bench_rtl_ice40(hardware: str = "tiny", seeds: int = 3) -> None:
    """The PE of the ``kcp`` design on ``hardware`` on an iCE40HX8K (Yosys ``synth_ice40``: the
    product in logic cells, L1 in block RAM), placed with its ports registered by nextpnr-ice40:
    its LUT4s and FFs, and the median Fmax of ``seeds`` placements."""
    import tempfile

    from accelgen.pnr import nextpnr_missing, place_and_route
    from accelgen.synth import synthesize_module
    from hwgen.pe import PE_MODULE
    missing = nextpnr_missing("ice40")
    if missing:
        print(f"rtl_fmax_mhz_ice40: not measured ({missing})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        hw, verilog = _emit_kcp(hardware, Path(tmp) / "design")
        r = synthesize_module(verilog, PE_MODULE, "ice40")
        print(f"rtl_luts_per_pe_ice40: {r.lut} LUT4, {r.ff} FFs, {r.bram} block RAMs (kcp on {hardware}; the "
              f"8x8 product in logic cells)")
        fmax = sorted(place_and_route(verilog, PE_MODULE, "ice40", freq_mhz=hw.clock_mhz, registered_io=True,
                                      seed=k).fmax_mhz for k in range(1, seeds + 1))
    print(f"rtl_fmax_mhz_ice40: {fmax[len(fmax) // 2]:.1f} MHz (iCE40HX8K, kcp on {hardware}: {PE_MODULE} alone, "
          f"ports registered; median of seeds 1-{seeds}: " + ", ".join(f"{f:.1f}" for f in fmax) + ")")


def bench_rtl_busy_pes(target: str = "ecp5") -> None:
    """The PE that keeps the MACs busy: LUT4s and FFs (Yosys ``synth_<target>``) of one PE of each
    3x3 convolution and GEMM design of ``make validate-rtl``'s efficiency table on ``small``,
    with the template tiles that table uses, whose L1 holds a whole output row (the ``kcp``
    design above is the library's default tile, one output)."""
    import tempfile

    from accelgen.synth import synthesize_module, yosys_missing
    from costmodel.analysis import resolve_dataflow
    from costmodel.workload import parse_layer_spec
    from hwgen.emit import emit_design
    from hwgen.pe import PE_MODULE
    from sim_tests import matrix
    missing = yosys_missing()
    if missing:
        print(f"rtl_luts_per_pe_busy: skipped ({missing})")
        return
    seen = set()
    for dataflow, array, spec, _ in matrix.EFFICIENCY:
        family, layer = dataflow.split("(")[0], parse_layer_spec(spec, name="busy")
        if not array.startswith("small") or family in seen or getattr(layer, "R", 0) * getattr(layer, "S", 0) == 1:
            continue                            # (one design a dataflow: its 3x3 convolution, or the GEMM)
        seen.add(family)
        hw = matrix.array(array)
        with tempfile.TemporaryDirectory() as tmp:
            emit_design(hw, lambda l: resolve_dataflow(matrix.dataflow_spec(dataflow), l, hw), [layer],
                        Path(tmp) / "design")
            r = synthesize_module(Path(tmp) / "design" / "accelgen_top.v", PE_MODULE, target)
        print(f"rtl_luts_per_pe_busy_{family}: {r.lut} LUT4, {r.lutram} LUT RAM, {r.ff} FFs, {r.dsp} DSP ({target}, {dataflow} on "
              f"{array} for `{spec}`, the efficiency table's tile)")


def bench_rtl_256pe() -> None:
    """Wall time to generate, build (fresh, in Verilator) and run one layer on the 256-PE design
    of ``sim_tests/test_large_array.py``; the issue's goal is a build under 2 minutes."""
    import os
    import subprocess
    import tempfile
    code = ("import json; from sim_tests import matrix; from sim_tests.test_large_array import DATAFLOW, LAYER; "
            "from sim_tests.runner import PHASE_SECONDS, verify_layer; from costmodel.workload import parse_layer_spec; "
            "r = verify_layer(matrix.dataflow_spec(DATAFLOW), matrix.array('pe256'), "
            "parse_layer_spec(LAYER, name='big'), 'verilator', seed=3); "
            "print(json.dumps([r['measured_cycles'] == r['predicted_cycles'] and r['bit_exact'], PHASE_SECONDS]))")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ACCELGEN_SIM_BUILD=tmp, OBJCACHE="")
        start = time.perf_counter()
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if run.returncode != 0:
        print(f"rtl_build_256pe_s: failed ({(run.stderr.strip().splitlines() or ['?'])[-1]})")
        return
    import json
    exact, phases = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"rtl_build_256pe_s: {phases['build']:.0f} s (fresh Verilator build of 256 PEs, no ccache; "
          f"goal < 120 s)")
    print(f"rtl_256pe_detail: generate {phases['generate']:.0f} s, build {phases['build']:.0f} s, "
          f"run {phases['run']:.0f} s, {seconds:.0f} s in all; {'exact' if exact else 'NOT exact'}")


def main() -> int:
    for name, one_layer in (("dse_one_layer", True), ("dse_resnet50", False)):
        rates = {w: bench_dse(one_layer, w) for w in (1, 2)}
        workers = max(rates, key=lambda w: rates[w][0])
        rate, points = rates[workers]
        print(f"{name}: {rate:.0f} designs/s")
        print(f"{name}_detail: {points} points, best with {workers} worker(s); "
              + ", ".join(f"{w} worker(s) {r:.0f}/s" for w, (r, _) in rates.items()))
        print(f"{name}_vs_maestro: {rate / MAESTRO_PAPER_DESIGNS_PER_S:.1f}x the paper's 0.17M designs/s, "
              f"{rate / MAESTRO_BINARY_DESIGNS_PER_S:.0f}x its binary's ~1,500 designs/s")
    rate = bench_model_layer_eval()
    print(f"model_layer_eval: {rate:.0f} evals/s")
    print(f"model_layer_eval_latency: {1e3 / rate:.3f} ms")
    lo, hi = MAESTRO_MS_PER_EVAL
    print(f"model_layer_eval_vs_maestro_O2: {rate * lo / 1e3:.2f}x to {rate * hi / 1e3:.2f}x")
    h = bench_hwgen_layer_eval()
    print(f"hwgen_layer_eval: {h['evals']:.0f} evals/s (ResNet-50 layers, kcp / nmk on small, nothing cached)")
    print(f"hwgen_layer_eval_detail: structure and tiles alone {h['structures']:.0f}/s; "
          f"{h['steps_per_layer']:.0f} steps a layer on average")
    print(f"hwgen_layer_eval_vs_walk: {h['evals'] / h['walk_evals']:.0f}x the step walk "
          f"({h['walk_steps']:.0f} steps/s, {h['walk_evals']:.3f} layers/s)")
    for name, one_layer in (("hwgen_dse_one_layer", True), ("hwgen_dse_resnet50", False)):
        rates = {w: bench_hwgen_dse(one_layer, workers=w) for w in (1, 2)}
        workers = max(rates, key=lambda w: rates[w][0])
        rate, points = rates[workers]
        print(f"{name}: {rate:.0f} designs/s")
        print(f"{name}_detail: {points} points (the whole space), best with {workers} worker(s): "
              + ", ".join(f"{w} worker(s) {r:.0f}/s" for w, (r, _) in rates.items())
              + "; hwgen preset (each layer once per distinct PE count, dataflow, lanes, NoC width and hops, L1; "
              "L2 and area vectorised)")
        print(f"{name}_vs_maestro: {rate / MAESTRO_PAPER_DESIGNS_PER_S:.2f}x the paper's 0.17M designs/s")
    rate, points = bench_hwgen_dse(False, samples=10_000)
    print(f"hwgen_dse_resnet50_random: {rate:.0f} designs/s ({points} points drawn at random from the same space: "
          f"few share what the preset reads, so nearly every one is analysed layer by layer)")
    found, seconds = bench_mapping_search()
    lo, hi = LOMA_MAPPINGS_PER_S
    rate, analysed = found.evaluated / seconds, found.accepted / seconds
    print(f"mapping_search: {rate:.0f} mappings/s (kcp on layer2.0.conv2, small, hwgen: {found.evaluated} drawn of "
          f"{found.space_size}, {found.refused} refused, {found.accepted} analysed; budget 3000 analysed)")
    print(f"mapping_search_analysed: {analysed:.0f} analysed mappings/s (those the hardware holds)")
    print(f"mapping_search_vs_loma: {rate / hi:.1f}x to {rate / lo:.1f}x ZigZag LOMA's 70-146 mappings/s; "
          f"analysed ones {analysed / hi:.1f}x to {analysed / lo:.1f}x")
    bench_rtl_resources("tiny", place_top=True)
    bench_rtl_resources("small")
    bench_rtl_ice40()
    bench_rtl_busy_pes()
    bench_rtl_256pe()
    return 0


if __name__ == "__main__":
    sys.exit(main())
