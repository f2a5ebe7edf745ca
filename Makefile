# Two entry points for a fresh machine: `make demo` and `make test`. Both create .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,ray]'
	# torchrec's metadata wants the CUDA fbgemm-gpu; install it alone (see pyproject.toml).
	$(BIN)/pip install -q --no-deps torchrec==1.8.0
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/ctrnas demo --out runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) runs
