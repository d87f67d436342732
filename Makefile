# Two commands on a fresh machine: `make run` (demo) and `make test`.
# Both create .venv and install the project (editable) with its dev tools first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml setup.py decoder/_speedups.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/offsetwatch demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# 4 workers on 2 cores: most tests wait (JVM start-up, mock clusters, child processes);
# tests/conftest.py keeps the Spark tests in one worker (one JVM) and a module's tests together
test: lint
	$(BIN)/pytest -q -n 4 --dist loadgroup --durations=25

bench: $(STAMP)
	$(BIN)/python benchmarks/decode.py
	$(BIN)/python benchmarks/exporter.py
	$(BIN)/python benchmarks/lag_history.py
	$(BIN)/python benchmarks/offset_ops.py
	$(BIN)/python benchmarks/diagnosis.py
	$(BIN)/python benchmarks/console.py
	$(BIN)/python benchmarks/spark_sources.py
	$(BIN)/python benchmarks/spark_kafka_source.py
	$(BIN)/python benchmarks/spark_history.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
