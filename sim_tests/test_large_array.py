"""A 256-PE accelerator (16 clusters of 16 PEs, a 64-word NoC) generates, builds in Verilator and
runs a layer bit-exact and cycle-exact: the array size is not limited by the generator.  This
one runs on Verilator alone: Icarus, an event-driven interpreter, needs over 15 minutes of CPU
for these 3,000 cycles of 256 PEs, while every design of the RTL matrix runs on both.  (How long
the Verilator build takes is a benchmark figure, ``make bench``: ``rtl_build_256pe_s``.)"""

import pytest

from costmodel.workload import parse_layer_spec

from . import matrix, simenv
from .runner import verify_layer

DATAFLOW = "kcp(cluster=16)"            # K across 16 clusters, C across the 16 PEs of each
LAYER = "conv2d:K=32,C=16,Y=6,X=5,R=3,S=3,pad=1"


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["verilator"])
def test_256_pe_array_runs_a_layer_exactly(sim):
    simenv.require_simulator(sim)
    hw = matrix.array("pe256")
    assert hw.num_pes == 256
    got = verify_layer(matrix.dataflow_spec(DATAFLOW), hw, parse_layer_spec(LAYER, name="big"), sim, seed=3)
    assert got["bit_exact"], got
    assert got["measured_cycles"] == got["predicted_cycles"], got
