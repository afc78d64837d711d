# polyprof developer entry points. Only Python >= 3.11 is needed on the machine.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
DEMO    = examples/demo.pb.gz

.PHONY: demo test install-test bench clean

$(BIN)/polyprof: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.test-installed: $(BIN)/polyprof
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/polyprof
	$(BIN)/polyprof info $(DEMO)
	$(BIN)/polyprof top $(DEMO)

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q

bench: $(VENV)/.test-installed
	$(BIN)/python benchmarks/bench_pprof.py
	@if [ -f benchmarks/bench_perfetto.py ]; then $(BIN)/python benchmarks/bench_perfetto.py; fi
	$(BIN)/python benchmarks/bench_formats.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
