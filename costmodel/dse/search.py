"""The search loop: stream the space in chunks, filter each chunk's front, merge, checkpoint.

Points are visited by *stream position*: in an exhaustive search the position is the flat index;
in a random search position ``j`` is the ``j % chunk``-th draw of chunk ``j // chunk``'s generator
``numpy.random.default_rng([seed, j // chunk])`` — so every chunk is reproducible alone, on any
worker, in any order.  Chunks are evaluated by a backend (in this process, a local process pool,
or Ray tasks) and merged strictly in stream order; since the front of a union is the front of its
parts' fronts (see `pareto`), the result does not depend on the backend, the number of workers or
interruptions.  The checkpoint (``checkpoint.json``, written atomically) holds the position up to
which everything is merged and the front so far; ``resume`` continues from it.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..base import AccelgenError, write_atomically
from .evaluate import Evaluator, ScalarEvaluator, VectorEvaluator, metric
from .hwgen_eval import HwgenEvaluator
from .pareto import Front, merge, nondominated
from .plan import Plan

__all__ = ["SearchState", "ChunkResult", "run_search", "chunk_ranges", "chunk_points", "process_chunk",
           "BACKENDS", "CHECKPOINT", "EVALUATORS", "evaluator_for"]

BACKENDS = ("local", "ray")
CHECKPOINT = "checkpoint.json"
_FORMAT = 1
_POOL_MIN_CHUNKS = 128

#: Presets with a vectorised evaluator; any other preset of ``analysis.PRESETS`` runs scalar.
EVALUATORS: dict[str, Callable[[Plan], Evaluator]] = {"maestro": VectorEvaluator, "hwgen": HwgenEvaluator}


def evaluator_for(plan: Plan) -> Evaluator:
    return EVALUATORS.get(plan.preset, ScalarEvaluator)(plan)


@dataclass
class ChunkResult:
    start: int
    stop: int
    front: Front
    evaluated: int
    valid: int
    feasible: int


@dataclass
class SearchState:
    fingerprint: str
    next_point: int = 0              # every position before it is merged into the front
    evaluated: int = 0
    valid: int = 0                   # the dataflows apply to every layer
    feasible: int = 0                # ... and the design fits and meets the constraints
    front: Front = field(default_factory=lambda: Front.empty(0))
    stopped: str = ""                # why the search ended early: "time", "points", or ""


def chunk_ranges(plan: Plan, start: int, end: int) -> Iterator[tuple[int, int]]:
    size = plan.space.chunk_points
    while start < end:
        stop = min((start // size + 1) * size, end)
        yield start, stop
        start = stop


def chunk_points(plan: Plan, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Stream positions and flat indices of the points in ``[start, stop)``."""
    ids = np.arange(start, stop, dtype=np.int64)
    if plan.space.mode == "exhaustive":
        return ids, ids.copy()
    size = plan.space.chunk_points
    k = start // size
    draws = np.random.default_rng([plan.space.seed, k]).integers(0, plan.size, size, dtype=np.int64)
    return ids, draws[start - k * size: stop - k * size]


def process_chunk(plan: Plan, evaluator: Evaluator, span: tuple[int, int]) -> ChunkResult:
    ids, flat = chunk_points(plan, *span)
    m = evaluator.evaluate(flat)
    ok = m.feasible.copy()
    for c in plan.constraints:
        with np.errstate(invalid="ignore"):
            ok &= c.holds(metric(plan, m, c.metric))
    objs = [metric(plan, m, o)[ok] for o in plan.objectives]
    keep = nondominated(ids[ok], objs)
    front = Front(ids[ok][keep], flat[ok][keep], [o[keep] for o in objs])
    return ChunkResult(span[0], span[1], front, len(ids), int(m.valid.sum()), int(ok.sum()))


# -- backends: each yields the chunks' results in stream order -----------------------------------

_WORKER: dict[str, Evaluator] = {}
_PLAN: list[Plan] = []


def _evaluator(plan: Plan) -> Evaluator:
    key = plan.fingerprint()
    hit = _WORKER.get(key)
    if hit is None:
        _WORKER.clear()                 # one search per worker at a time
        hit = _WORKER[key] = evaluator_for(plan)
    return hit


def _pool_init(plan: Plan) -> None:
    _PLAN[:] = [plan]


def _pool_work(span: tuple[int, int]) -> ChunkResult:
    plan = _PLAN[0]
    return process_chunk(plan, _evaluator(plan), span)


def _local(plan: Plan, spans: Iterable[tuple[int, int]], workers: int) -> Iterator[ChunkResult]:
    spans = list(spans) if workers > 1 else spans
    if workers <= 1 or len(spans) < 2 * workers:     # type: ignore[arg-type]  # not worth starting processes
        evaluator = _evaluator(plan)
        for span in spans:
            yield process_chunk(plan, evaluator, span)
        return
    import multiprocessing

    # spawn: no fork of a process that runs threads (the progress display, Ray's clients)
    with multiprocessing.get_context("spawn").Pool(workers, _pool_init, (plan,)) as pool:
        yield from pool.imap(_pool_work, spans)


def _ray_work(plan: Plan, span: tuple[int, int]) -> ChunkResult:
    return process_chunk(plan, _evaluator(plan), span)


def _ray(plan: Plan, spans: Iterable[tuple[int, int]], address: str | None) -> Iterator[ChunkResult]:
    try:
        import ray
    except ImportError:
        raise AccelgenError("the ray backend needs the 'ray' package (pip install ray)", where="--backend") from None
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds for an unreachable cluster
            raise AccelgenError(f"cannot start or reach a Ray cluster ({' '.join(str(exc).split())[:200]})",
                                where="--backend ray") from None
        started = True
    try:
        task = ray.remote(_ray_work)
        plan_ref = ray.put(plan)
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: deque[Any] = deque()
        for span in spans:
            pending.append(task.remote(plan_ref, span))
            if len(pending) >= window:
                yield ray.get(pending.popleft())
        while pending:
            yield ray.get(pending.popleft())
    finally:
        if started:
            ray.shutdown()


# -- checkpoints ----------------------------------------------------------------------------------

def _save(state: SearchState, path: Path) -> None:

    doc = {"format": _FORMAT, "fingerprint": state.fingerprint, "next_point": state.next_point,
           "evaluated": state.evaluated, "valid": state.valid, "feasible": state.feasible,
           "front": {"ids": state.front.ids.tolist(), "flat": state.front.flat.tolist(),
                     "objectives": [{"dtype": o.dtype.str, "values": o.tolist()} for o in state.front.objectives]}}
    write_atomically(str(path), json.dumps(doc) + "\n")


def _load(path: Path, plan: Plan) -> SearchState:
    where = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        front = doc["front"]
        state = SearchState(doc["fingerprint"], int(doc["next_point"]), int(doc["evaluated"]), int(doc["valid"]),
                            int(doc["feasible"]),
                            Front(np.array(front["ids"], dtype=np.int64), np.array(front["flat"], dtype=np.int64),
                                  [np.array(o["values"], dtype=np.dtype(o["dtype"])) for o in front["objectives"]]))
        if doc["format"] != _FORMAT:
            raise ValueError(f"format {doc['format']!r}")
    except FileNotFoundError:
        raise AccelgenError("no checkpoint to resume from; run without --resume first", where=where) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AccelgenError(f"not a readable checkpoint ({' '.join(str(exc).split())[:120]})", where=where) from None
    if state.fingerprint != plan.fingerprint():
        raise AccelgenError("the checkpoint is of another search (space, model, objectives, constraints, preset "
                            "or seed differ); resume with the same options or use another --out", where=where)
    return state


# -- the loop -------------------------------------------------------------------------------------

def run_search(plan: Plan, *, out_dir: str | os.PathLike[str] | None = None, backend: str = "local",
               workers: int | None = None, ray_address: str | None = None, max_points: int | None = None,
               time_budget_s: float | None = None, resume: bool = False, checkpoint_every_s: float = 10.0,
               on_chunk: Callable[[SearchState], None] | None = None) -> SearchState:
    """Search ``plan``'s space (up to ``max_points`` stream positions, or for ``time_budget_s``).
    With ``out_dir`` the state is checkpointed there; ``resume`` continues from it.  ``on_chunk``
    is called after every merged chunk (progress display; an exception there — e.g. an
    interrupt — stops the search with the checkpoint saved)."""
    ckpt = Path(out_dir) / CHECKPOINT if out_dir is not None else None
    if resume:
        if ckpt is None:
            raise AccelgenError("resuming needs the output folder of the interrupted search", where="--resume")
        state = _load(ckpt, plan)
    else:
        state = SearchState(plan.fingerprint(), front=Front.empty(len(plan.objectives)))
    total = plan.total_points
    end = total if max_points is None else min(total, max_points)
    spans = chunk_ranges(plan, state.next_point, end)
    if backend == "ray":
        results = _ray(plan, spans, ray_address)
    elif backend == "local":
        if workers is None:
            # Worker processes start in ~1 s and each builds its own structures: below a few
            # million points one process is faster (make bench measures both).
            chunks = -(-(end - state.next_point) // plan.space.chunk_points)
            workers = (os.cpu_count() or 1) if chunks >= _POOL_MIN_CHUNKS else 1
        results = _local(plan, spans, workers)
    else:
        raise AccelgenError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}", where="--backend")
    start = last = time.monotonic()
    try:
        for result in results:
            state.front = merge(state.front, result.front)
            state.next_point = result.stop
            state.evaluated += result.evaluated
            state.valid += result.valid
            state.feasible += result.feasible
            if on_chunk is not None:
                on_chunk(state)
            now = time.monotonic()
            if ckpt is not None and now - last >= checkpoint_every_s:
                _save(state, ckpt)
                last = now
            if time_budget_s is not None and now - start >= time_budget_s and state.next_point < end:
                state.stopped = "time"
                break
    except BaseException:
        if ckpt is not None:
            _save(state, ckpt)
        raise
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()
    if not state.stopped and state.next_point < total:
        state.stopped = "points"
    if ckpt is not None:
        _save(state, ckpt)
    return state
