# Two entry points for a fresh machine: `make demo` and `make test`. Both create .venv themselves.
# `make docs` builds the documentation site into site/ (strict: a warning fails it).
# Packages come from pip's configured index. GPU users: `make install CUDA=cu128 TORCH_INDEX=<index URL of
# PyTorch's cu128 wheels>` (docs/gpu.md) installs the CUDA builds of torch and fbgemm-gpu matching the pinned
# torchrec instead of the CPU ones; without CUDA nothing changes.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CUDA ?=
TORCH_INDEX ?=
# test processes (pytest-xdist): one per logical CPU; TEST_WORKERS=0 runs the tests in this process. Each worker
# takes whole files (a module's fixtures are built once), the longest first (tests/conftest.py: SLOW_FIRST).
TEST_WORKERS ?= logical
STAMP := $(VENV)/.installed$(if $(CUDA),-$(CUDA))
ifneq ($(CUDA),)
ifeq ($(TORCH_INDEX),)
$(error CUDA=$(CUDA) needs TORCH_INDEX=<index URL of PyTorch's $(CUDA) wheels>; see docs/gpu.md)
endif
endif

.PHONY: demo test docs install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,ray,docs]'
ifneq ($(CUDA),)
	# fbgemm-gpu and fbgemm-gpu-cpu share the folder fbgemm_gpu/: remove the CPU build before the CUDA one.
	$(BIN)/pip uninstall -q -y torch fbgemm-gpu-cpu
	$(BIN)/pip install -q --extra-index-url $(TORCH_INDEX) "torch==2.13.0+$(CUDA)" "fbgemm-gpu==1.8.0"
endif
	# torchrec's metadata wants the CUDA fbgemm-gpu; install it alone (see pyproject.toml).
	$(BIN)/pip install -q --no-deps torchrec==1.8.0
	$(BIN)/python -m ctrnas.device
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/ctrnas demo --out runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests   # tests/test_layers.py runs import-linter and mypy ([tool.mypy])

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) runs site
