"""The report of ``accelgen flow``: ``report.json`` (what programs read, ``docs/flow.md`` lists its
fields) and ``report.html``, one self-contained page (inline SVG plots, inline CSS, no scripts)
made from the same document."""

from __future__ import annotations

import datetime
import html
import io
import json
from pathlib import Path
from typing import Any, Sequence

from costmodel.hardware.hardware import hardware_to_dict

__all__ = ["build_report", "render_html"]

_ENERGY = ("mac", "l1", "l2", "noc", "dram")
_RESOURCES = ("lut", "ff", "dsp", "bram", "lutram")
#: The generator's files (hwgen/) by the part of the design they make.
_PARTS = {"accelerator": "top level", "controller": "controller (the loop nest)", "compute": "compute engine",
          "loader": "loader and NoC", "drain": "drain and reduction", "geometry": "tile geometry (addresses)",
          "hostbus": "host bus", "l2": "L2", "common": "shared helpers", "pe": "PE ports", "other": "not attributed"}


def build_report(flow: Any) -> dict[str, Any]:
    """The report document from the flow's stages (its folder and record)."""
    from costmodel.analysis import analyze_model

    from importlib.metadata import PackageNotFoundError, version
    try:
        release = version("accelgen")
    except PackageNotFoundError:
        release = "unknown"
    out, done = flow.out, flow.record.done
    design = flow.design()
    hw = design.hardware
    model = flow.model
    result = analyze_model(model, hw, per_layer=[design.dataflow_for(l) for l in model.layers], preset="hwgen")
    manifests = {d["kind"]: json.loads((out / d["folder"] / "manifest.json").read_text())
                 for d in done["emit"]["designs"]}
    design_cycles = {}
    for kind, manifest in manifests.items():
        for p in manifest["layers"]:
            design_cycles[p["layer"]] = p["predicted_cycles_per_run"] * p["runs"]
    layers = []
    for layer, r in zip(model.layers, result.layers):
        layers.append({"layer": layer.name, "kind": "gemm" if layer.kind == "gemm" else "conv2d",
                       "shape": r.shape, "macs": r.macs, "predicted_cycles": r.runtime_cycles,
                       "design_cycles": design_cycles.get(layer.name), "utilization": r.utilization,
                       "bound": r.bound, "energy_pj": {k: r.energy_pj[k] for k in (*_ENERGY, "total")}})
    verified = []
    if (out / "verify.json").exists():
        verified = json.loads((out / "verify.json").read_text())["results"]
    synth = json.loads((out / "synth.json").read_text())["designs"] if (out / "synth.json").exists() else {}
    fpga: dict[str, Any] = {"target": flow.args.target, **{k: None for k in _RESOURCES}, "fmax_mhz": None,
                            "fmax_scope": None, "fmax_note": None, "fmax_part": None, "device": None, "device_note": None,
                            "designs": synth}
    if synth:
        for k in _RESOURCES:
            fpga[k] = sum(d["total"][k] for d in synth.values())
        fmax = [d["fmax_mhz"] for d in synth.values()]
        if all(f is not None for f in fmax):
            fpga["fmax_mhz"] = min(fmax)
            fpga["fmax_scope"] = "pe" if all(d["fmax_scope"] == "pe" for d in synth.values()) else "design"
            fpga["fmax_part"] = min(synth.values(), key=lambda d: d["fmax_mhz"]).get("fmax_part")
        else:
            fpga["fmax_note"] = next(d["fmax_note"] for d in synth.values() if d["fmax_mhz"] is None)
        if flow.args.target == "ecp5":
            from .synth import ECP5_CAPACITY, ECP5_DEVICES, Resources, fits_capacity, smallest_device
            total = Resources(**{k: fpga[k] for k in _RESOURCES})
            device = smallest_device(total)
            fits = fits_capacity(total, ECP5_CAPACITY[device])
            fpga["device"] = ECP5_DEVICES[device] if fits else None
            fpga["device_note"] = None if fits else f"larger than the largest ECP5 ({ECP5_DEVICES[device]})"
    fpga["model_estimate"] = _model_estimate(design, flow.args.target, [d["kind"] for d in done["emit"]["designs"]])
    pick = done["pick"]
    chosen = {"rank": pick["rank"], "picked_by": pick["how"], "file": "chosen.yaml", "objectives": pick["objectives"],
              "search_runtime_cycles": pick["runtime_cycles"], "energy_pj": pick["energy_pj"],
              "area_mm2": pick["area_mm2"], "dataflow": pick["dataflow"], "hardware": hardware_to_dict(hw),
              "dataflows": {k: {"family": f, "params": dict(p)} for k, (f, p) in design.dataflows.items()},
              "designs": done["emit"]["designs"]}
    return {
        "accelgen": release, "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model": model.name, "space": str(flow.args.space), "target": flow.args.target,
        "clock_mhz": hw.clock_mhz,
        "explore": done["explore"], "chosen": chosen,
        "totals": {k: result.total[k] for k in ("macs", "runtime_cycles", "utilization", "area_mm2")}
        | {"energy_pj": result.total["energy_pj"]["total"]},
        "layers": layers, "verified": verified, "fpga": fpga,
        "stages": {s: {"seconds": v.get("seconds")} for s, v in done.items()},
    }


def _model_estimate(design: Any, target: str, kinds: Sequence[str]) -> dict[str, Any] | None:
    """What the resource model (:mod:`costmodel.fpga`, the search's FPGA figures) estimated for the
    design's accelerators (one per layer kind in ``kinds``, each of the family the design gives
    that kind: ``dataflows``, kind -> (family, params)), or None where ``target`` has no model."""
    from costmodel.base import AccelgenError
    from costmodel.fpga import FPGA_METRICS, FPGA_TARGETS, estimate, load_model
    if target not in FPGA_TARGETS:
        return None
    try:
        model = load_model(target)
    except AccelgenError:
        return None
    figures = dict.fromkeys(FPGA_METRICS, 0.0)
    for kind in kinds:
        for k, v in estimate(design.hardware, target, family=design.dataflows[kind][0]).items():
            figures[k] += v
    return {**figures, "families": {kind: design.dataflows[kind][0] for kind in kinds},
            "lutram_luts": model.lutram_luts, "source": Path(model.source).name}


# --- HTML -----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;
padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} td,th{padding:.25em .7em;border-bottom:1px solid #eee;
text-align:right} th{background:#f6f6f6} td.l,th.l{text-align:left} .ok{color:#1a7f37;font-weight:600}
.bad{color:#c62828;font-weight:600} .muted{color:#777} figure{margin:1em 0} svg{max-width:100%;height:auto}
code{background:#f3f3f3;padding:0 .25em;border-radius:3px}
"""


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _plots(doc: dict[str, Any], front: Sequence[dict[str, Any]], objectives: list[str]) -> dict[str, str]:
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "accelgen"
    out: dict[str, str] = {}
    names = {"runtime_cycles": "runtime (cycles)", "energy_pj": "energy (pJ)", "edp_pj_cycles": "EDP (pJ·cycles)",
             "area_mm2": "area (mm²)", "power_mw": "power (mW)"}
    # the front, the chosen point marked
    x_name = objectives[0]
    y_name = objectives[1] if len(objectives) > 1 else ("energy_pj" if x_name != "energy_pj" else "runtime_cycles")
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    xs = [float(r[x_name]) for r in front]
    ys = [float(r[y_name]) for r in front]
    ax.scatter(xs, ys, s=22, color="tab:blue", label="Pareto front", zorder=3)
    chosen = next(r for r in front if int(r["rank"]) == doc["chosen"]["rank"])
    ax.scatter([float(chosen[x_name])], [float(chosen[y_name])], s=140, facecolors="none", edgecolors="tab:red",
               linewidths=2, label=f"chosen (point {doc['chosen']['rank']}, {doc['chosen']['picked_by']})", zorder=4)
    for values, scale in ((xs, ax.set_xscale), (ys, ax.set_yscale)):
        if min(values) > 0 and max(values) > 20 * min(values):
            scale("log")
    ax.set_xlabel(names.get(x_name, x_name))
    ax.set_ylabel(names.get(y_name, y_name))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    out["front"] = _svg(fig)
    # predicted vs measured cycles of the layers run
    v = doc["verified"]
    if v:
        fig, ax = plt.subplots(figsize=(6.5, 0.9 + 0.35 * len(v)))
        pos = range(len(v))
        ax.barh([p + 0.2 for p in pos], [r["predicted_cycles"] for r in v], height=0.4, color="tab:blue",
                label="predicted (model)")
        ax.barh([p - 0.2 for p in pos], [r["measured_cycles"] for r in v], height=0.4, color="tab:orange",
                label="measured (RTL)")
        ax.set_yticks(list(pos), [r["layer"] + (" (scaled)" if r["scaled"] else "") for r in v], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("cycles (one run of the simulated shape)")
        ax.legend(fontsize=8)
        out["cycles"] = _svg(fig)
    # utilisation and energy per layer
    layers = doc["layers"]
    fig, ax = plt.subplots(figsize=(6.5, 0.9 + 0.3 * len(layers)))
    ax.barh(range(len(layers)), [100 * l["utilization"] for l in layers], color="tab:green")
    ax.set_yticks(range(len(layers)), [l["layer"] for l in layers], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MAC utilisation (% of PEs × lanes × cycles), hwgen preset")
    ax.set_xlim(0, 100)
    out["utilization"] = _svg(fig)
    fig, ax = plt.subplots(figsize=(6.5, 0.9 + 0.3 * len(layers)))
    left = [0.0] * len(layers)
    for part in _ENERGY:
        vals = [l["energy_pj"][part] for l in layers]
        ax.barh(range(len(layers)), vals, left=left, label=part)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_yticks(range(len(layers)), [l["layer"] for l in layers], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("energy (pJ)")
    ax.legend(fontsize=8, ncol=5, loc="lower right")
    out["energy"] = _svg(fig)
    # resources: the PEs against the shared parts, per design
    designs = doc["fpga"]["designs"]
    if designs:
        kinds = ["lut", "ff", "dsp", "bram"]
        fig, axes = plt.subplots(1, len(kinds), figsize=(8, 2.6))
        for ax, k in zip(axes, kinds):
            labels = list(designs)
            pe = [d["pe"][k] * d["num_pes"] for d in designs.values()]
            shared = [d["shared"][k] for d in designs.values()]
            ax.bar(labels, pe, color="tab:blue", label="PEs")
            ax.bar(labels, shared, bottom=pe, color="tab:gray", label="shared")
            ax.set_title(k.upper(), fontsize=9)
            ax.tick_params(labelsize=8)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        out["resources"] = _svg(fig)
    return out


def _table(heads: Sequence[str], rows: Sequence[Sequence[Any]], left: Sequence[int] = (0,)) -> str:
    def cell(tag: str, i: int, v: Any) -> str:
        cls = ' class="l"' if i in left else ""
        return f"<{tag}{cls}>{v}</{tag}>"
    out = ["<table><tr>" + "".join(cell("th", i, html.escape(h)) for i, h in enumerate(heads)) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>")
    return "".join(out) + "</table>"


def _n(v: Any) -> str:
    if v is None:
        return '<span class="muted">—</span>'
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def render_html(doc: dict[str, Any], front: Sequence[dict[str, Any]], objectives: list[str]) -> str:
    plots = _plots(doc, front, objectives)
    e = html.escape
    ch = doc["chosen"]
    hw = ch["hardware"]
    noc = " / ".join(f"{lvl['bandwidth_words_per_cycle']}" for lvl in hw["noc"])
    name = f"{doc['model']} on {hw['num_pes']} PEs × {hw['simd_lanes']} lanes, {ch['dataflow']}"
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>accelgen flow: {e(name)}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>accelgen flow: {e(doc['model'])}</h1>",
             f"<p class=muted>accelgen {e(doc['accelgen'])}, {e(doc['generated'])}; "
             f"space <code>{e(doc['space'])}</code>"
             f", target {e(doc['target'])}.</p>"]
    ex = doc["explore"]
    parts.append(f"<h2>Chosen design</h2><p><b>{e(name)}</b>: front point {ch['rank']} of {ex['front']} "
                 f"(picked by {e(ch['picked_by'])}) among {ex['feasible']:,} feasible of {ex['evaluated']:,} points "
                 f"searched with the <code>hwgen</code> preset ({ex['designs_per_s']:,} designs/s). "
                 f"Design file: <code>chosen.yaml</code> (hardware <code>{e(hw['name'])}</code>); RTL: "
                 + ", ".join(f"<code>{e(d['folder'])}</code> ({e(d['design'])})" for d in ch["designs"]) + ".</p>")
    parts.append(_table(["parameter", "value"], [
        ("PEs", _n(hw["num_pes"])), ("SIMD lanes", _n(hw["simd_lanes"])), ("L1 per PE", f"{hw['l1_bytes_per_pe']:,} B"),
        ("L2", f"{hw['l2_bytes']:,} B"), ("NoC (words/cycle, per level)", e(noc)),
        ("clock (assumed)", f"{hw['clock_mhz']} MHz"),
        *((f"dataflow ({k})", e(f"{d['family']} {d['params']}")) for k, d in ch["dataflows"].items()),
        *((e(o), _n(v)) for o, v in ch["objectives"].items()),
    ]))
    parts.append(f"<h2>Pareto front</h2><figure>{plots['front']}</figure>")
    v = doc["verified"]
    parts.append("<h2>Verification</h2>")
    if v:
        ok = all(r["bit_exact"] and r["measured_cycles"] == r["predicted_cycles"] for r in v)
        parts.append(f"<p class={'ok' if ok else 'bad'}>{len(v)} layer shapes run on {e(v[0]['sim'])}: "
                     + ("every one bit-exact against numpy and in exactly the predicted cycles." if ok
                        else "SOME DIFFER (see the table).") + "</p>")
        rows = []
        for r in v:
            exact = r["bit_exact"] and r["measured_cycles"] == r["predicted_cycles"]
            rows.append((e(r["layer"]) + (f" <span class=muted>(+{len(r['also'])} alike)</span>" if r["also"] else ""),
                         e(r["simulated_shape"]) + (" <span class=muted>(scaled down)</span>" if r["scaled"] else ""),
                         _n(r["runs"]), _n(r["predicted_cycles"]), _n(r["measured_cycles"]),
                         f"<span class={'ok' if r['bit_exact'] else 'bad'}>{'yes' if r['bit_exact'] else 'NO'}</span>",
                         f"<span class={'ok' if exact else 'bad'}>{'exact' if exact else 'DIFFERS'}</span>",
                         f"{100 * r['rtl_utilization']:.1f} %"))
        parts.append(_table(["layer", "simulated", "runs", "predicted", "measured", "bit-exact", "cycles", "MAC util."],
                            rows, left=(0, 1)))
        if "cycles" in plots:
            parts.append(f"<figure>{plots['cycles']}</figure>")
    else:
        parts.append("<p class=muted>No layer was run (--verify none).</p>")
    f = doc["fpga"]
    parts.append("<h2>FPGA resources</h2>")
    if f["designs"]:
        if f["fmax_mhz"] is None:
            fmax = e(f["fmax_note"] or "not measured")
        elif f["fmax_scope"] == "pe":
            fmax = (f"{f['fmax_mhz']} MHz for the PE alone on an {e(f.get('fmax_part') or '?')}, its ports registered "
                    "(what the array replicates; the whole design was not placed: <code>--fmax top</code>)")
        else:
            fmax = f"{f['fmax_mhz']} MHz, the whole design placed and routed on an {e(f.get('fmax_part') or '?')}"
        where = (f", device {e(f['device'])}" if f.get("device") else
                 f" (<span class=bad>{e(f['device_note'])}</span>)" if f.get("device_note") else "")
        parts.append(f"<p>Yosys, target <b>{e(f['target'])}</b>{where}"
                     + f": {_n(f['lut'])} LUT, {_n(f['ff'])} FF, {_n(f['dsp'])} DSP, {_n(f['bram'])} BRAM"
                     + (f", {_n(f['lutram'])} LUT-RAM cells" if f["lutram"] else "") + f". Fmax: {fmax}.</p>")
        est = f.get("model_estimate")
        if est:
            measured = {"luts": f["lut"] + est["lutram_luts"] * f["lutram"], "ffs": f["ff"], "dsps": f["dsp"],
                        "brams": f["bram"]}
            parts.append(f"<p>The resource model the search used (<code>{e(est['source'])}</code>, docs/fpga.md) "
                         "estimated, against synthesis (LUTs with LUT RAM as the LUTs it takes): "
                         + ", ".join(f"{k} {_n(est[k])} / {_n(measured[k])}"
                                     + (f" ({100 * (est[k] - measured[k]) / measured[k]:+.1f} %)" if measured[k] else "")
                                     for k in ("luts", "ffs", "dsps", "brams")) + ".</p>")
        rows = []
        for kind, d in f["designs"].items():
            for part, res, n in (("one PE", d["pe"], 1), (f"PEs (× {d['num_pes']})", d["pe"], d["num_pes"]),
                                 ("shared parts", d["shared"], 1), ("total", d["total"], 1)):
                rows.append((e(f"{kind}: {part}"), *(_n(res[k] * n) for k in _RESOURCES)))
        parts.append(_table(["part", "LUT", "FF", "DSP", "BRAM", "LUT-RAM"], rows))
        split = {kind: d["shared_by_source"] for kind, d in f["designs"].items() if d.get("shared_by_source")}
        if split:
            parts.append("<p>The shared parts by the part of the generator that made them: registers, carry "
                         "cells, multipliers and memories by their <code>src</code>; a LUT (mapped by ABC, "
                         "which keeps none) by the registers, memories and PE ports it feeds, split evenly "
                         "where it feeds several parts. LUTs count a carry cell's.</p>")
            rows = [(e(f"{kind}: {_PARTS.get(part, part)}"), *(_n(c.get(k, 0)) for k in ("lut", "ff", "carry", "dsp",
                                                                                       "bram", "lutram")))
                    for kind, by in split.items()
                    for part, c in sorted(by.items(), key=lambda kv: -(kv[1].get("lut", 0) + kv[1]["ff"]))]
            parts.append(_table(["part", "LUT", "FF", "carry cells", "DSP", "BRAM", "LUT-RAM"], rows))
        if "resources" in plots:
            parts.append(f"<figure>{plots['resources']}</figure>")
    else:
        parts.append("<p class=muted>Not synthesised.</p>")
    parts.append("<h2>Layers (model, on the chosen design)</h2>")
    parts.append(_table(["layer", "shape", "MACs", "cycles", "MAC util.", "bound", "energy (pJ)"], [
        (e(l["layer"]), e(l["shape"]), _n(l["macs"]), _n(l["predicted_cycles"]), f"{100 * l['utilization']:.1f} %",
         e(l["bound"]), _n(l["energy_pj"]["total"])) for l in doc["layers"]], left=(0, 1, 5)))
    parts.append(f"<figure>{plots['utilization']}</figure><figure>{plots['energy']}</figure>")
    stages = ", ".join(f"{s} {v['seconds']} s" for s, v in doc["stages"].items() if v.get("seconds") is not None)
    parts.append(f"<p class=muted>Stage times: {e(stages)}. Machine-readable: <code>report.json</code>.</p>"
                 "</body></html>\n")
    return "\n".join(parts)
