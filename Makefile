# The two commands of the README: `make bench` (the main job) and `make test`.
# Each installs what it needs first; everything after the venv is idempotent.
PY := .venv/bin/python

.PHONY: setup test bench
setup: .venv/.installed
	$(PY) -m ckptbench.install

.venv/.installed: requirements.txt pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -r requirements.txt
	# The repo's packages (ckptbench, ckpt_impls, infra) importable from anywhere, as they are.
	$(PY) -c 'import site, pathlib; pathlib.Path(site.getsitepackages()[0], "ckptbench.pth").write_text("$(CURDIR)\n")'
	touch $@

test: setup
	.venv/bin/ruff check .
	$(PY) -m pytest

bench: setup
	$(PY) -m ckptbench bench
