# pmcvl: the two commands users need are `make demo` and `make test`; the rest are their parts.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo-output
DEMO_N ?= 40

.PHONY: install demo test lint format bench bench-detector bench-classifier bench-llm bench-build bench-scale eval-subcaptions clean \
	docker-build docker-push tools

$(STAMP): pyproject.toml setup.py ray_jobs/pmc/_ctext.pyx requirements/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=25"
	$(BIN)/pip install --quiet -c requirements/constraints.txt -e ".[dev]"
	$(BIN)/pip check
	touch $(STAMP)

install: $(STAMP)

# The main job as production runs it: the pmc_dataset DAG (`airflow dags test`, SQLite home under
# DEMO_DIR) submitting the build to a local Ray head (dashboard on loopback), stopped at the end;
# then the report. The corpus is generated once (same seed); a rerun finds nothing new to build.
demo: install
	DEMO_DIR=$(DEMO_DIR) DEMO_N=$(DEMO_N) bash scripts/demo_airflow.sh
	@echo "shards:   $(DEMO_DIR)/dataset/shards/  (index: $(DEMO_DIR)/dataset/index/, manifest: $(DEMO_DIR)/dataset/manifest.json)"
	@echo "report:   $(DEMO_DIR)/dataset/report/index.html"

test: install lint
	bash scripts/ensure_chromium.sh
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

# End to end at N and 10N articles (with and without the LLM stage), memory, shard writer.
bench-build: install
	$(BIN)/python benchmarks/bench_build.py

# Requests/s against a fake vLLM server with a fixed latency, versus the bound C/L.
bench-llm: install
	$(BIN)/python benchmarks/bench_llm.py

# Planning at whole-PMC size (7M listed against a 6M ledger) against the previous planner.
bench-scale: install
	$(BIN)/python benchmarks/bench_scale.py
	$(BIN)/python benchmarks/bench_dedup.py
	$(BIN)/python benchmarks/bench_e2e.py

eval-subcaptions: install
	$(BIN)/python benchmarks/eval_subcaptions.py

# Container images (docker/): the build commands for users; nothing in the tests runs Docker.
# REGISTRY and TAG must match the chart's images.* values (helm/pmcvl/values.yaml).
REGISTRY ?= pmcvl
TAG ?= 0.1.0
IMAGES := pipeline airflow vllm trainer fetch modeldev

docker-build: $(addprefix docker-build-,$(IMAGES))

docker-build-%:
	docker build -f docker/$*.Dockerfile -t $(REGISTRY)/$*:$(TAG) .

# pipeline + modeldev/, from the pipeline image of the same tag (a named build context)
docker-build-modeldev: docker-build-pipeline
	docker build -f docker/modeldev.Dockerfile -t $(REGISTRY)/modeldev:$(TAG) \
		--build-context pipeline=docker-image://$(REGISTRY)/pipeline:$(TAG) .

docker-push: $(addprefix docker-push-,$(IMAGES))

docker-push-%:
	docker push $(REGISTRY)/$*:$(TAG)

# The real helm binary the chart tests use, into .tools/ (the tests fetch it too when missing).
tools: install
	$(BIN)/python tests/helm_tool.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .ruff_cache
