# `make demo` and `make test` each set everything up on a fresh Debian/Ubuntu
# machine: system build libraries, a virtual environment, an editable install.

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# The editable install rebuilds the extensions on import: meson and ninja
# must be found on PATH, so every recipe runs with the venv first.
export PATH := $(BIN):$(PATH)

APT_PACKAGES := pkg-config libturbojpeg0-dev libpng-dev libwebp-dev
PKG_CONFIG_MODULES := libturbojpeg libpng libwebp
BUILD_REQUIREMENTS := "meson-python>=0.16" "meson>=1.4" ninja "Cython>=3.0.10" "numpy>=2.0"
# The CPU build of torch, for the interoperability tests and the benchmarks.
TORCH_REQUIREMENT := torch==2.13.0

.PHONY: demo test bench docs soak sysdeps clean

demo: $(VENV)/.installed-demo
	$(BIN)/python examples/demo.py

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not soak" $(PYTEST_ARGS)

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/loader_overhead.py

# The documentation, into site/. `make test` builds it too (tests/test_docs.py).
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

sysdeps:
	@if pkg-config --exists $(PKG_CONFIG_MODULES) 2>/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing system build libraries: $(APT_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES); \
	else \
		echo "Missing system libraries. Install them first, for example:"; \
		echo "    sudo apt-get install $(APT_PACKAGES)"; \
		exit 1; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | sysdeps $(VENV)/bin/python
	$(BIN)/python -m pip install -q $(BUILD_REQUIREMENTS)
	$(BIN)/python -m pip install -q --no-build-isolation -e .
	touch $@

# The demo's generated images need Pillow and scikit-image, its progress bar
# tqdm: all in the bench extra.
$(VENV)/.installed-demo: $(VENV)/.installed
	$(BIN)/python -m pip install -q --no-build-isolation -e ".[bench]"
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install -q $(TORCH_REQUIREMENT)
	$(BIN)/python -m pip install -q --no-build-isolation -e ".[test,torch,bench,docs]"
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/python -m pip install -q --no-build-isolation -e ".[docs]"
	touch $@

clean:
	rm -rf build $(VENV) .pytest_cache site docs/images/transforms docs/images/kernels_chart.svg
