"""What an analysis returns: every figure of one layer (:class:`LayerResult`) and of a model
(:class:`ModelResult`), the same for both presets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .hardware.hardware import Hardware

__all__ = ["TENSORS", "LayerResult", "ModelResult", "model_totals"]

TENSORS = ("input", "weight", "output")


@dataclass(frozen=True)
class LayerResult:
    """Every figure of one layer.  Counts are words (one element of the tensor's width)."""

    layer: str
    layer_type: str
    shape: str
    preset: str
    dataflow_name: str
    dataflow: str                          # the filled-in directives actually analysed
    num_pes: int
    used_pes: int                          # PEs the cluster structure can use
    macs: int                              # exact: N*K*(C/groups)*R*S*Y'*X'
    step_macs: int                         # the same, summed over the step model's steps and PEs
    runtime_cycles: int
    runtime_us: float
    throughput_macs_per_cycle: float
    utilization: float                     # macs / (num_pes * simd_lanes * runtime_cycles)
    avg_active_pes: float
    bound: str                             # what most steps wait on: compute, noc-ingress, noc-egress
    l1_reads: dict[str, int]
    l1_writes: dict[str, int]
    l2_reads: dict[str, int]
    l2_writes: dict[str, int]
    dram_reads: int
    dram_writes: int
    l1_words_per_pe: dict[str, int]        # double-buffered tiles of one PE
    l2_words: dict[str, int]
    l1_bytes_per_pe: int
    l2_bytes: int
    noc_bw_peak_words_per_cycle: float
    noc_bw_avg_words_per_cycle: float
    offchip_bw_avg_words_per_cycle: float
    reuse_factor: dict[str, float]         # L1 reads per L1 write
    multicast_factor: dict[str, float]     # words landing in L1s per word read from L2
    energy_pj: dict[str, float]            # mac, l1, l2, noc, dram, total
    area_mm2: float
    feasible: bool
    infeasible_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["infeasible_reasons"] = list(self.infeasible_reasons)
        return d


@dataclass(frozen=True)
class ModelResult:
    model: str
    hardware: str
    preset: str
    layers: tuple[LayerResult, ...]
    total: dict[str, Any] = field(default_factory=dict)
    hardware_config: dict[str, Any] = field(default_factory=dict)   # as analysed, overrides applied

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "hardware": self.hardware, "preset": self.preset,
                "hardware_config": self.hardware_config,
                "layers": [r.to_dict() for r in self.layers], "total": self.total}


def model_totals(results: list[LayerResult], hw: Hardware) -> dict[str, Any]:
    macs = sum(r.macs for r in results)
    cycles = sum(r.runtime_cycles for r in results)
    energy: dict[str, float] = {}
    for r in results:
        for k, v in r.energy_pj.items():
            energy[k] = energy.get(k, 0.0) + v
    return {
        "layers": len(results),
        "macs": macs,
        "runtime_cycles": cycles,
        "runtime_us": cycles / hw.clock_mhz,
        "throughput_macs_per_cycle": macs / cycles if cycles else 0.0,
        "utilization": macs / (hw.num_pes * hw.simd_lanes * cycles) if cycles else 0.0,
        "l1_bytes_per_pe": max((r.l1_bytes_per_pe for r in results), default=0),
        "l2_bytes": max((r.l2_bytes for r in results), default=0),
        "noc_bw_peak_words_per_cycle": max((r.noc_bw_peak_words_per_cycle for r in results), default=0.0),
        "energy_pj": energy,
        "area_mm2": hw.area_mm2(),
        "feasible": all(r.feasible for r in results),
        "infeasible_layers": [r.layer for r in results if not r.feasible],
    }
