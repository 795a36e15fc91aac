# pmcvl: the two commands users need are `make demo` and `make test`; the rest are their parts.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo
DEMO_N ?= 40

.PHONY: install demo test lint format bench bench-detector bench-classifier eval-subcaptions clean

$(STAMP): pyproject.toml requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=25"
	$(BIN)/pip install --quiet -c requirements/constraints.txt -e ".[dev]"
	$(BIN)/pip check
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/pmcvl sample-corpus --out $(DEMO_DIR)/corpus --n $(DEMO_N) --layout folders --seed 0
	$(BIN)/pmcvl ingest --config configs/demo.yaml

test: install lint
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The parse benchmark compares with pubmed_parser, which only the benchmark needs.
bench: install
	$(BIN)/pip install --quiet -c requirements/constraints.txt pubmed-parser==0.5.1
	$(BIN)/python benchmarks/bench_parse.py

bench-detector: install
	$(BIN)/python benchmarks/bench_detector.py

bench-classifier: install
	$(BIN)/python benchmarks/bench_classifier.py

eval-subcaptions: install
	$(BIN)/python benchmarks/eval_subcaptions.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .ruff_cache
