"""Rendering a :class:`~costmodel.ModelResult` for people (a rich table) and for programs (JSON,
CSV).  Every renderer is deterministic: same result, same text."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from costmodel.analysis import LayerResult, ModelResult
from costmodel.hardware.hardware import Hardware

__all__ = ["ReportContext", "json_safe", "result_json", "result_csv", "print_table", "humanize_bytes",
           "infeasible_summary"]


@dataclass(frozen=True)
class ReportContext:
    """What the table's header says beyond the result: where the model came from, the hardware as
    analysed, what was overridden and which dataflows were asked for."""

    hardware: Hardware
    model_source: str = ""          # e.g. "zoo", "configs/workloads/tiny_cnn.yaml"
    overrides: tuple[str, ...] = ()  # e.g. ("--num-pes 8",)
    dataflows: str = ""             # e.g. "conv kcp, GEMM nmk (library default)"
    import_notes: tuple[str, ...] = ()  # e.g. an ONNX import's "not modelled (no MACs here): 12 Relu"


# --- JSON / CSV -----------------------------------------------------------------------------------

def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``"inf"``, ``"-inf"`` or ``"nan"``:
    strict JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def result_json(result: ModelResult, extra: dict[str, Any] | None = None) -> str:
    """The result as strict JSON; ``extra`` adds top-level keys (an ONNX import's ``not_modelled``)."""
    doc = {**result.to_dict(), **(extra or {})}
    return json.dumps(json_safe(doc), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def _flatten(d: dict[str, Any]) -> dict[str, Any]:
    """``{"l2_reads": {"input": 3}}`` -> ``{"l2_reads_input": 3}``; lists become ``"; "``-joined."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update({f"{key}_{sub}": v for sub, v in _flatten(value).items()})
        elif isinstance(value, (list, tuple)):
            out[key] = "; ".join(str(v) for v in value)
        else:
            out[key] = value
    return out


def result_csv(result: ModelResult) -> str:
    """A header, one row per layer, then a ``TOTAL`` row holding the totals that have a column."""
    rows = [_flatten(json_safe(r.to_dict())) for r in result.layers]
    columns = list(rows[0]) if rows else ["layer"]
    total = _flatten(json_safe(result.total))
    total_row = {k: v for k, v in total.items() if k in columns and k != "layer"}
    total_row["layer"] = "TOTAL"
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    writer.writerow(total_row)
    return buffer.getvalue()


# --- numbers for people ---------------------------------------------------------------------------

def _num(value: float) -> str:
    """Three significant digits or more, thousands separators, no exponent."""
    if not math.isfinite(value):
        return "inf" if value > 0 else "nan"
    if value == 0:
        return "0"
    magnitude = abs(value)
    digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 0.01 else 4
    return f"{value:,.{digits}f}"


def humanize_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size:,} {unit}"
    return f"{n:,} B"


def _words_per_cycle(value: float) -> str:
    return "unlimited" if math.isinf(value) else f"{value:g} words/cycle"


#: No verticals; a rule under the header and above the TOTAL footer.
_RULED = box.Box("    \n    \n ── \n    \n    \n ── \n    \n    \n")
_RULED_ASCII = box.Box("    \n    \n -- \n    \n    \n -- \n    \n    \n", ascii=True)


class _Symbols:
    """Glyphs for the output's encoding: a Latin-1 terminal gets ASCII stand-ins."""

    def __init__(self, encoding: str | None) -> None:
        try:
            "µ✓✗×…".encode(encoding or "ascii")
            fancy = True
        except (UnicodeEncodeError, LookupError):
            fancy = False
        self.micro, self.ok, self.bad, self.times, self.more = (
            ("µ", "✓", "✗", "×", "…") if fancy else ("u", "yes", "NO", "x", "..."))
        self.box = _RULED if fancy else _RULED_ASCII


# --- the table ------------------------------------------------------------------------------------

_BOUND = {"compute": "compute", "noc-ingress": "NoC in", "noc-egress": "NoC out"}


def _dataflow_groups(result: ModelResult) -> list[tuple[str, str, list[str]]]:
    """``(name, filled-in directives, layers)`` per distinct dataflow, in order of first use."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in result.layers:
        groups.setdefault((r.dataflow_name, r.dataflow), []).append(r.layer)
    return [(name, text, layers) for (name, text), layers in groups.items()]


def _layer_list(names: list[str], width: int, more: str) -> str:
    """As many names as fit in ``width``, then ``… (N layers)``."""
    if len(", ".join(names)) <= width:
        return ", ".join(names)
    tail = f", {more} ({len(names)} layers)"
    shown: list[str] = []
    for name in names:
        if len(", ".join(shown + [name])) + len(tail) > width and shown:
            break
        shown.append(name)
    return ", ".join(shown) + tail


def _wrap_directives(text: str, width: int) -> list[str]:
    """One line per cluster level, each wrapped between directives (never inside one)."""
    lines: list[str] = []
    for directive in (d.strip() for d in text.split(";")):
        starts_level = directive.startswith("Cluster(")
        if lines and not starts_level and len(lines[-1]) + 2 + len(directive) <= width:
            lines[-1] += "; " + directive
        else:
            lines.append(directive if starts_level or not lines else "  " + directive)
    return lines


def _header(result: ModelResult, ctx: ReportContext, sym: _Symbols) -> list[tuple[str, str]]:
    hw = ctx.hardware
    macs = result.total.get("macs", 0)
    source = f"{ctx.model_source}, " if ctx.model_source else ""
    lanes = f"{hw.simd_lanes} SIMD lane{'s' if hw.simd_lanes > 1 else ''}"
    overridden = f" ({', '.join(ctx.overrides)})" if ctx.overrides else ""
    levels = [f"{_words_per_cycle(level.bandwidth_words_per_cycle)}, latency {level.latency_cycles} cycle"
              f"{'s' if level.latency_cycles != 1 else ''}" + (f" {sym.times} {level.hops} hops" if level.hops > 1 else "")
              for level in hw.noc]
    noc = levels[0] if len(levels) == 1 else "; ".join(f"level {i}: {t}" for i, t in enumerate(levels))
    lines = [
        ("Model", f"{result.model} ({source}{len(result.layers)} layers, {macs:,} MACs)"),
        ("Hardware", f"{hw.name}{overridden}: {hw.num_pes:,} PEs {sym.times} {lanes}, "
                     f"L1 {humanize_bytes(hw.l1_bytes_per_pe)}/PE, L2 {humanize_bytes(hw.l2_bytes)}, "
                     f"{hw.clock_mhz:g} MHz"),
        ("", f"NoC {noc}; off-chip {_words_per_cycle(hw.offchip_bw_words_per_cycle)}"),
    ]
    if ctx.dataflows:
        lines.append(("Dataflow", ctx.dataflows))
    lines.append(("Preset", result.preset))
    return lines


def print_table(result: ModelResult, ctx: ReportContext, console: Console) -> None:
    """The header, the per-layer table with a TOTAL row, the dataflows used and why any layer
    does not fit."""
    sym = _Symbols(console.encoding)
    for label, value in _header(result, ctx, sym):
        console.print(Text.assemble((f"{label:<9}", "bold"), value))

    t = result.total
    bad = len(t.get("infeasible_layers", ()))
    columns: list[tuple[str, str, str | Text]] = [  # header (its lines), justify, TOTAL
        ("layer", "left", "TOTAL"), ("type", "left", ""),
        ("MACs", "right", f"{t['macs']:,}"),
        ("runtime\n(cycles)", "right", f"{t['runtime_cycles']:,}"),
        (f"runtime\n({sym.micro}s)", "right", _num(t["runtime_us"])),
        ("util\n(%)", "right", _num(100 * t["utilization"])),
        ("MACs/\ncycle", "right", _num(t["throughput_macs_per_cycle"])),
        ("L1\n(B/PE)", "right", f"{t['l1_bytes_per_pe']:,}"),
        ("L2\n(B)", "right", f"{t['l2_bytes']:,}"),
        ("NoC peak\n(words/\ncycle)", "right", _num(t["noc_bw_peak_words_per_cycle"])),
        (f"energy\n({sym.micro}J)", "right", _num(t["energy_pj"]["total"] / 1e6)),
        ("bound", "left", ""),
        ("fits", "center", Text(sym.ok, style="green") if not bad else Text(f"{sym.bad} {bad}", style="bold red")),
    ]
    rows = [
        [Text(r.layer), Text(r.layer_type.lower()), f"{r.macs:,}", f"{r.runtime_cycles:,}", _num(r.runtime_us),
         _num(100 * r.utilization), _num(r.throughput_macs_per_cycle), f"{r.l1_bytes_per_pe:,}",
         f"{r.l2_bytes:,}", _num(r.noc_bw_peak_words_per_cycle), _num(r.energy_pj["total"] / 1e6),
         Text(_BOUND.get(r.bound, r.bound)),
         Text(sym.ok, style="green") if r.feasible else Text(sym.bad, style="bold red")]
        for r in result.layers]
    # Widths are set here, not left to rich: figures must never be cut.  Two spaces between
    # columns when they fit the console, else one; only the layer names fold if still too wide.
    widths = [max(max(len(line) for line in header.split("\n")), len(str(footer)),
                  max((len(str(row[i])) for row in rows), default=0))
              for i, (header, _, footer) in enumerate(columns)]
    gap = 2 if sum(widths) + 2 * (len(widths) - 1) <= console.width else 1
    widths[0] = max(min(widths[0], 8), min(widths[0], console.width - sum(widths[1:]) - gap * (len(widths) - 1)))
    table = Table(box=sym.box, padding=(0, 0, 0, gap - 1), pad_edge=False, show_edge=False,  # + 1 from the box
                  show_footer=True, header_style="bold", footer_style="bold")
    tallest = max(header.count("\n") for header, _, _ in columns)
    for (header, justify, footer), width in zip(columns, widths):
        header = "\n" * (tallest - header.count("\n")) + header  # headers sit on the rule
        table.add_column(header, footer=footer, justify=justify, width=width,  # type: ignore[arg-type]
                         overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print()
    console.print(table, width=max(console.width, sum(widths) + gap * (len(widths) - 1)))
    console.print(Text("TOTAL: sums of MACs, runtime and energy; maxima of L1, L2 and NoC peak. "
                       f"util = MACs / (PEs {sym.times} lanes {sym.times} cycles).", style="dim"))
    if ctx.import_notes:
        console.print()
        console.print(Text(f"Imported from {ctx.model_source or 'the model file'}:", style="bold"))
        for line in ctx.import_notes:
            console.print(Text("  " + line))

    console.print()
    console.print(Text("Dataflows (filled-in directives, outermost cluster level first):", style="bold"))
    width = max(40, console.width)
    for i, (name, text, layers) in enumerate(_dataflow_groups(result), start=1):
        head = f"[{i}] {name}"
        console.print(Text.assemble((head, "bold"), " used by ",
                                    _layer_list(layers, width - len(head) - 9, sym.more)))
        for line in _wrap_directives(text, width - 2):
            console.print(Text("  " + line), soft_wrap=True)

    infeasible = [r for r in result.layers if not r.feasible]
    if infeasible:
        console.print()
        console.print(Text(f"Does not fit ({len(infeasible)} of {len(result.layers)} layers):", style="bold red"))
        for r in infeasible:
            console.print(Text.assemble(f"  {sym.bad} ", (r.layer, "bold"), ": ", "; ".join(r.infeasible_reasons)))


def infeasible_summary(layers: Iterable[LayerResult], limit: int = 5) -> str:
    """``fc6, fc7 (off-chip traffic needs ...)``: the names, and the first reason."""
    bad = [r for r in layers if not r.feasible]
    names = ", ".join(r.layer for r in bad[:limit]) + (f" and {len(bad) - limit} more" if len(bad) > limit else "")
    return f"{names} ({bad[0].infeasible_reasons[0]})" if bad else ""
