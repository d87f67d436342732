# Two commands on a fresh machine: `make run` (demo) and `make test`.
# Both create .venv and install the project (editable) with its dev tools first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist workers (see the test target)
WORKERS ?= 8
STAMP := $(VENV)/.installed-stamp

.PHONY: run test test-compat test-cluster style lint bench clean kafka kafka-matrix

# decoder/_wire.h: the wire readers two accelerators include; a change to it must rebuild them
$(STAMP): pyproject.toml setup.py decoder/_speedups.c exporter/state/_ingest_speedups.c \
    exporter/judge/_snapshot_speedups.c decoder/_wire.h
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/offsetwatch demo

style: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

lint: style
	$(BIN)/mypy

# $(WORKERS) workers on 2 cores: most tests wait (real brokers of their own starting and
# crashing, rebalances, streaming triggers, JVM start-up, child processes); tests/conftest.py
# keeps the CPU-bound Spark tests in two workers (one JVM each) and a module's tests together
# (with 4 workers a green clean-clone run took 13:41 with two thirds of the CPU idle). mypy
# (single-threaded, ~8 s on a clean clone) runs beside the tests' start-up instead of before
# it; its verdict is printed after the tests' and either failing fails the target.
# Bytecode is written for this run (__pycache__ is ignored by git) even where the environment
# says not to: one collection first caches the test modules as pytest rewrites their asserts,
# which each of the workers would otherwise do again (collecting took 5.2 CPU s, cached 2.8).
# The real-broker tests run Kafka's default release (scripts/kafka/versions.toml), fetched
# first from Maven Central; where that fails, a local run falls back to the vendored 4.0.0 of
# ../shared/kafka with a note, and a CI run (CI=true) stops.
test: style
	@if ! scripts/kafka/broker fetch > .kafka-fetch.out 2>&1; then \
	  cat .kafka-fetch.out >&2; rm -f .kafka-fetch.out; \
	  if [ "$$CI" = true ]; then exit 1; fi; \
	  if [ -x ../shared/kafka/broker ]; then \
	    echo "note: the real-broker tests run on the vendored Kafka 4.0.0 of ../shared/kafka" >&2; \
	    export OFFSETWATCH_TEST_KAFKA_HOME=$${OFFSETWATCH_TEST_KAFKA_HOME:-$$(cd ../shared/kafka && pwd)}; \
	  fi; \
	fi; rm -f .kafka-fetch.out; \
	$(BIN)/mypy > .mypy.out 2>&1 & typing=$$!; \
	export PYTHONDONTWRITEBYTECODE=; \
	$(BIN)/pytest -q --collect-only -p no:cacheprovider > /dev/null 2>&1 || true; \
	$(BIN)/pytest -q -n $(WORKERS) --dist loadgroup --durations=25 -m "not cluster"; tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy:"; cat .mypy.out; rm -f .mypy.out; \
	test $$tests -eq 0 && test $$typed -eq 0

# The version matrix (scripts/kafka/versions.toml): the release-dependent real-broker tests
# once per release but the default (which `test` runs), two releases at a time; fetches them
# all first (scripts/compat_matrix.py)
test-compat: $(STAMP)
	$(BIN)/python scripts/compat_matrix.py

# The long tier (tests marked `cluster`), kept out of `test`, whose time it would add to:
# tests/exporter/test_three_brokers_real.py, the exporter through a leader kill, a controller
# kill, a rolling restart, two of three nodes down and a hung node, on the default release; and
# tests/spark_jobs/test_cluster.py, the Spark jobs on Spark's local-cluster (five JVMs); and
# tests/exporter/test_fleet_real.py and test_fleet_sinks_real.py, a fleet of exporters through
# its faults, with and without sinks (docs/fleet.md); and the two Spark modules over a real
# broker: the mission's path end to end (tests/spark_jobs/test_path_matrix_live.py) and a
# streaming query through a broker kill (test_stream_kafka_outage.py); and
# tests/offsetwatch/test_spark_quiet.py, `offsetwatch spark` in JVMs of its own; and the
# single-broker faults on brokers of their own (test_broker_faults_real.py: killed and hung;
# test_cluster_change.py: wiped and replaced)
test-cluster: $(STAMP)
	scripts/kafka/broker fetch
	$(BIN)/pytest -q -p no:cacheprovider -m cluster -rP

# Apache Kafka from Maven Central into ~/.cache/offsetwatch/kafka (scripts/kafka/broker fetch):
# the default release, or every release of the version matrix (scripts/kafka/versions.toml)
kafka:
	scripts/kafka/broker fetch

kafka-matrix:
	scripts/kafka/broker fetch --all

bench: $(STAMP)
	$(BIN)/python benchmarks/decode.py
	$(BIN)/python benchmarks/exporter.py
	$(BIN)/python benchmarks/lag_history.py
	$(BIN)/python benchmarks/offset_ops.py
	$(BIN)/python benchmarks/real_broker.py
	$(BIN)/python benchmarks/diagnosis.py
	$(BIN)/python benchmarks/console.py
	$(BIN)/python benchmarks/spark_sources.py
	$(BIN)/python benchmarks/spark_kafka_source.py
	$(BIN)/python benchmarks/spark_history.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
