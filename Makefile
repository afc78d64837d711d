# polyprof developer entry points. Only Python >= 3.11 is needed on the machine.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
DEMO    = examples/demo.pb.gz

.PHONY: demo test install-test bench fuzz clean

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

# The fuzz extra is atheris where a wheel exists (Linux x86_64); never fatal:
# without it the fuzz smoke run uses the plain-Python mutator.
$(VENV)/.fuzz-installed: $(VENV)/.test-installed
	$(BIN)/python -m pip install --quiet --only-binary=atheris -e '.[fuzz]' \
		|| echo "fuzz: atheris not installed; fuzz/run.py will use its plain-Python mutator"
	touch $@

test: $(VENV)/.test-installed $(VENV)/.fuzz-installed
	$(BIN)/python -m pytest -q

bench: $(VENV)/.test-installed
	$(BIN)/python benchmarks/bench_pprof.py
	@if [ -f benchmarks/bench_perfetto.py ]; then $(BIN)/python benchmarks/bench_perfetto.py; fi
	$(BIN)/python benchmarks/bench_formats.py

# Fuzz every target for FUZZ_SECONDS each (make fuzz FUZZ_SECONDS=1800 FUZZ_TARGETS=pprof).
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?=
fuzz: $(VENV)/.fuzz-installed
	@targets="$(FUZZ_TARGETS)"; [ -n "$$targets" ] || targets="$$($(BIN)/python fuzz/run.py --list)"; \
	for t in $$targets; do \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		$(BIN)/python fuzz/run.py $$t --seconds $(FUZZ_SECONDS) || exit 1; \
	done

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache fuzz/.work
