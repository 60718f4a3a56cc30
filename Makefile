# bespec developer tasks. `make demo` and `make test` bootstrap .venv themselves.
PYTHON ?= python3
# The torch the venv gets. The default venv is .venv; another supported version gets its own
# (`make test TORCH=2.14.1` -> .venv-2.14.1), so the two never share packages.
TORCH  ?= 2.13.0
VENV   := $(if $(filter 2.13.0,$(TORCH)),.venv,.venv-$(TORCH))
# Where pip finds torch's CPU build: torch's own CPU index by default (on plain PyPI a Linux
# torch is the CUDA build, gigabytes of nvidia packages). It is an extra index, so PyPI and any
# local wheels (pip's find-links, a mirror) still count, and pip prefers 2.13.0+cpu over
# PyPI's 2.13.0. A machine that cannot reach it costs one quick retry, then pip goes on without
# it; a machine with its own CPU wheel may set TORCH_INDEX= (empty) to skip it.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
PY     := $(VENV)/bin/python
BESPEC := $(VENV)/bin/bespec
STAMP  := $(VENV)/.installed
BUILTINS := native fbgemm qnnpack x86 onednn executorch tensorrt
# The repository's specs point editors at the top-level copy of the schema (`make schema`).
SCHEMA_REF := ../schemas/backend-spec.schema.json

.PHONY: demo test lint fmt specs schema docs aten-table bench clean

# pip runs twice quiet (errors still show). The editable install uses setuptools' "compat"
# mode: a .pth file with the checkout, the layout this repository has anyway.
PIP := $(PY) -m pip install --quiet --quiet

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	# The CPU wheel: torch==2.13.0 by default (TORCH=2.14.1 for the second venv), from
	# TORCH_INDEX; --retries 1 bounds the wait for an index this machine cannot reach.
	$(PIP) --retries 1 torch==$(TORCH) $(if $(strip $(TORCH_INDEX)),--extra-index-url $(TORCH_INDEX))
	# torchao (the pt2e extra) is pinned; pip keeps the torch installed above.
	$(PIP) --config-settings editable_mode=compat -e '.[dev,pt2e]'
	# XNNPACKQuantizer for tests/test_parity.py: --no-deps keeps torch 2.13.0 (executorch 1.5.1
	# pins another torch); flatbuffers and tabulate are the imports it needs. The tests skip
	# with the reason when it is missing.
	$(PIP) --no-deps executorch==1.5.1 flatbuffers tabulate
	$(PY) -c "import executorch.backends.xnnpack.quantizer.xnnpack_quantizer"
	# Vendor quantizers that `bespec export` is tested against (tests/fixtures/quantizers):
	# LiteRT's pt2e quantizer needs only torch and torchao (its fixture loads it without
	# litert_torch/__init__, which wants the converter stack).
	$(PIP) --no-deps litert-torch==0.10.0
	# Bytecode now, as a wheel install has it: else the first command of a fresh checkout
	# (a pre-commit lint, say) pays for compiling bespec's sources.
	$(PY) -m compileall -q backend_spec cli.py
	touch $(STAMP)

demo: $(STAMP)
	$(BESPEC) compile specs/tutorial.yaml
	$(BESPEC) show specs/tutorial.yaml
	$(BESPEC) check specs/tutorial.yaml

# worksteal: a worker that runs out of tests takes some of the other's queue, so the slow
# export tests do not end the run on one worker.
test: $(STAMP)
	$(PY) -m ruff check backend_spec tests benchmarks cli.py
	$(PY) -m pytest -n 2 --dist worksteal -q --durations=15

lint: $(STAMP)
	$(PY) -m ruff check backend_spec tests benchmarks cli.py
	$(PY) -m ruff format --check backend_spec tests benchmarks cli.py

fmt: $(STAMP)
	$(PY) -m ruff format backend_spec tests benchmarks cli.py
	$(PY) -m ruff check --fix backend_spec tests benchmarks cli.py

schema: $(STAMP)
	$(PY) -m backend_spec.specfile.schema

docs: $(STAMP)
	$(PY) -m backend_spec.cli.render.reference docs

# The ATen chains of the built-in backends' ops for this torch minor version (see
# backend_spec/pt2e/aten.py): `make aten-table TORCH=2.14.1` writes the 2.14 table.
aten-table: $(STAMP)
	$(PY) -m backend_spec.pt2e.aten

specs: $(STAMP)
	for n in $(BUILTINS); do $(BESPEC) export $$n -o specs/$$n.yaml --schema-ref $(SCHEMA_REF) || exit 1; done

# The benchmarks' figures, as ratios against their baselines (see benchmarks/_bench.py; add
# BENCH_STRICT=1 to fail over budget). `make test` runs every benchmark in quick mode.
bench: $(STAMP)
	$(PY) benchmarks/bench_load.py
	$(PY) benchmarks/bench_lint.py
	$(PY) benchmarks/bench_pt2e.py
	$(PY) benchmarks/bench_startup.py
	$(PY) benchmarks/bench_export.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
