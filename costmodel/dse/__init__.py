"""Design-space exploration: which accelerator to build for a network under a budget.

    from costmodel.dse import load_space, make_plan, run_search
    plan = make_plan(load_space("configs/space/demo.yaml"), get_model("resnet50"),
                     objectives=("runtime_cycles", "energy_pj"), constraints=(), preset="maestro")
    state = run_search(plan)            # state.front: the Pareto front (ids, flat indices, objectives)

`space` reads and validates space files; `plan` enumerates a space for a model; `evaluate` turns
chunks of points into runtime / energy / area / feasibility (vectorised for ``maestro``, exactly
the scalar model's numbers); `pareto` filters fronts; `search` streams chunks over a backend with
checkpoints; `output` and `plot` write what ``accelgen explore`` leaves behind.
"""

from .evaluate import Metrics, ScalarEvaluator, VectorEvaluator, metric
from .hwgen_eval import HwgenEvaluator
from .pareto import Front, merge, nondominated
from .plan import METRICS, OBJECTIVES, Constraint, Plan, make_plan, parse_constraint, parse_objectives
from .search import BACKENDS, EVALUATORS, SearchState, evaluator_for, run_search
from .space import Space, load_space, space_from_dict

__all__ = [
    "EVALUATORS", "HwgenEvaluator", "Metrics", "ScalarEvaluator", "VectorEvaluator", "evaluator_for", "metric",
    "Front", "merge", "nondominated",
    "METRICS", "OBJECTIVES", "Constraint", "Plan", "make_plan", "parse_constraint", "parse_objectives",
    "BACKENDS", "SearchState", "run_search",
    "Space", "load_space", "space_from_dict",
]
