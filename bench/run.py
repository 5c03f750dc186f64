"""Benchmarks (``make bench``).  Each result is one line ``name: value unit``; ratios against
the published reference figures follow as their own lines.  Timings are best-of-N wall clock on
this machine, single process, no result caching between evaluations."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodel import AccelgenError, LIBRARY, analyze_layer, builtin_hardware, get_model  # noqa: E402

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


def main() -> int:
    rate = bench_model_layer_eval()
    print(f"model_layer_eval: {rate:.0f} evals/s")
    print(f"model_layer_eval_latency: {1e3 / rate:.3f} ms")
    lo, hi = MAESTRO_MS_PER_EVAL
    print(f"model_layer_eval_vs_maestro_O2: {rate * lo / 1e3:.2f}x to {rate * hi / 1e3:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
