# `make demo` and `make test` each set everything up on a fresh Debian/Ubuntu
# machine: system build libraries, a virtual environment, an editable install.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# The editable install rebuilds the extensions on import: meson and ninja
# must be found on PATH, so every recipe runs with the venv first.
export PATH := $(BIN):$(PATH)

# libturbojpeg: the tests write YCCK JPEGs with the TurboJPEG API (Pillow cannot).
# FFmpeg's libraries: video and audio decoding (an optional part of the build);
# the ffmpeg command makes the test videos (tests/media_files.py).
APT_PACKAGES := pkg-config libjpeg62-turbo-dev libturbojpeg0-dev libpng-dev libwebp-dev \
	libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev ffmpeg
PKG_CONFIG_MODULES := libjpeg libturbojpeg libpng libwebp \
	libavformat libavcodec libavutil libswscale libswresample
BUILD_REQUIREMENTS := "meson-python>=0.16" "meson>=1.4" ninja "Cython>=3.0.10" "numpy>=2.0"
# The CPU build of torch, for the interoperability tests and the benchmarks.
TORCH_REQUIREMENT := torch==2.13.0

# Reliability checks (docs/reliability.md): a sanitizer build, fuzzers, a
# soak under faults and a free-threaded CPython, each in its own venv.
ASAN_VENV := .venv-asan
ASAN_BIN := $(CURDIR)/$(ASAN_VENV)/bin
FT_PREFIX := $(CURDIR)/.cache/python3.13t
FT_VENV := .venv-ft
FT_BIN := $(CURDIR)/$(FT_VENV)/bin
TEST_REQUIREMENTS := pytest pytest-timeout "hypothesis>=6.100" pillow scikit-image
# The newest hypothesis needs Rust to build for cp313t; this one is py3-none-any.
FT_TEST_REQUIREMENTS := pytest pytest-timeout hypothesis==6.155.7 pillow aiohttp
# The loader-overhead race against dataloader-rs (wheels for CPython >= 3.13):
# a regular CPython 3.13, built the same way, with its own venv.
PY313_PREFIX := $(CURDIR)/.cache/python3.13
PY313_VENV := .venv-313
PY313_BIN := $(CURDIR)/$(PY313_VENV)/bin
RS_REQUIREMENT := dataloader-rs==0.2.0
FUZZ_REQUIREMENTS := atheris==3.0.0
# Seconds per fuzz target.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS := decode image_info transforms native_chain media
# The sanitizer runtimes are preloaded into the (uninstrumented) interpreter.
# Leak checking is off for the Python suite (CPython's own allocations at
# exit would drown real reports); the C-only codec harness runs with it on.
SANITIZER_ENV = LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_init_order=1:detect_stack_use_after_return=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	PYTHONMALLOC=malloc
LSAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

.PHONY: demo test bench bench-photos bench-rs docs soak mutate fuzz test-asan test-ft asan-install ft-install fuzz-install fuzz-deps sysdeps pillow-simd spdl clean

demo: $(VENV)/.installed-demo
	$(BIN)/python examples/demo.py

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not soak" $(PYTEST_ARGS)

# The long soak runs, and the kernel property tests, the crash hunt and the
# differential harness with many more examples.
soak: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m soak $(PYTEST_ARGS)
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest tests/test_kernel_properties.py tests/test_crash_hunt.py \
		tests/test_differential.py $(PYTEST_ARGS)

# Mutation testing (docs/reliability.md): mutants of the Python modules of
# the loader's semantics, each run against the tests that specify it, then
# hand-written mutations of the native kernels. Not part of `make test`: it
# runs those tests hundreds of times. MUTATE_ARGS, e.g. "dataloader._sampling.state
# --jobs 1", narrows the Python part.
mutate: $(VENV)/.installed-test
	$(BIN)/python -m tools.mutation python $(MUTATE_ARGS)
	$(BIN)/python -m tools.mutation native

# Extensions built with AddressSanitizer and UndefinedBehaviorSanitizer in
# their own build directory; PYTHONSAFEPATH keeps the source tree (which has
# no compiled modules) off sys.path, in subprocesses too.
test-asan: asan-install build/asan-harness/codecs_fuzzer fuzz/corpus/.made
	$(LSAN_ENV) build/asan-harness/codecs_fuzzer fuzz/corpus/*/* fuzz/regressions/*
	PYTHONSAFEPATH=1 $(SANITIZER_ENV) $(ASAN_BIN)/python fuzz/targets.py replay fuzz/corpus fuzz/regressions
	PYTHONSAFEPATH=1 $(SANITIZER_ENV) $(ASAN_BIN)/python -m pytest -m "not soak" -p no:cacheprovider \
		-o addopts="-ra --strict-markers" $(PYTEST_ARGS) tests

$(ASAN_VENV)/bin/python:
	$(PYTHON) -m venv $(ASAN_VENV)
	$(ASAN_BIN)/python -m pip install -q --upgrade pip

$(ASAN_VENV)/.installed: pyproject.toml meson.build dataloader/_core/meson.build | sysdeps $(ASAN_VENV)/bin/python
	$(ASAN_BIN)/python -m pip install -q $(BUILD_REQUIREMENTS) $(TEST_REQUIREMENTS)
	touch $@

# A regular (not editable) install, rebuilt incrementally in its own build
# directory on every run: an editable one would rebuild on import, running
# the compilers with the sanitizer runtimes preloaded.
asan-install: $(ASAN_VENV)/.installed
	$(ASAN_BIN)/python -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=build/asan \
		-Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false \
		"-Csetup-args=-Dc_args=-fno-sanitize-recover=all -fno-omit-frame-pointer" .

# The codecs alone, in C, for LeakSanitizer and as a libFuzzer target.
build/asan-harness/codecs_fuzzer: fuzz/codecs_fuzzer.c dataloader/_core/src/dl_*.c dataloader/_core/src/dl_codecs.h
	mkdir -p $(@D)
	gcc -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
		-DDL_STANDALONE -Idataloader/_core/src -o $@ fuzz/codecs_fuzzer.c \
		$(addprefix dataloader/_core/src/,dl_codecs.c dl_jpeg.c dl_png.c dl_webp.c dl_convert.c) \
		$$(pkg-config --cflags --libs $(PKG_CONFIG_MODULES))

fuzz/corpus/.made: fuzz/make_corpus.py | $(VENV)/.installed-test
	$(BIN)/python fuzz/make_corpus.py fuzz/corpus
	touch $@

# Coverage-guided fuzzing (atheris) of the decoders and a transform chain.
# The extensions are built by clang with libFuzzer's coverage instrumentation
# and AddressSanitizer, in their own venv; the interpreter preloads atheris'
# ASan runtime with libFuzzer. Crashes land in fuzz/artifacts/; the corpus
# grows in fuzz/corpus/<target>/ and is replayed by `make test-asan`.
FUZZ_VENV := .venv-fuzz
FUZZ_BIN := $(CURDIR)/$(FUZZ_VENV)/bin
FUZZ_CC := clang-14
FUZZ_APT_PACKAGES := clang-14 libclang-rt-14-dev
FUZZ_ENV = LD_PRELOAD="$$($(FUZZ_BIN)/python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 PYTHONMALLOC=malloc

fuzz: fuzz-install fuzz/corpus/.made build/libfuzzer/codecs_fuzzer
	mkdir -p fuzz/artifacts
	for target in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus/$$target && \
		PYTHONSAFEPATH=1 $(FUZZ_ENV) $(FUZZ_BIN)/python fuzz/targets.py $$target \
			-max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
			-artifact_prefix=fuzz/artifacts/$$target- fuzz/corpus/$$target fuzz/corpus/seeds \
			2>&1 | tee fuzz/artifacts/$$target.log | grep -v "^#[0-9]*.*\(NEW\|REDUCE\|pulse\)"; \
		test $${PIPESTATUS[0]} = 0 || exit 1; \
	done
	mkdir -p fuzz/corpus/codecs
	build/libfuzzer/codecs_fuzzer -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 \
		-print_final_stats=1 -artifact_prefix=fuzz/artifacts/codecs- fuzz/corpus/codecs \
		fuzz/corpus/seeds 2>&1 | tee fuzz/artifacts/codecs.log \
		| grep -v "^#[0-9]*.*\(NEW\|REDUCE\|pulse\)"; \
	test $${PIPESTATUS[0]} = 0

# The C harness alone under libFuzzer, with ASan, UBSan and LeakSanitizer:
# coverage of the native codecs with no Python in the way.
build/libfuzzer/codecs_fuzzer: fuzz/codecs_fuzzer.c dataloader/_core/src/dl_*.c dataloader/_core/src/dl_codecs.h | fuzz-deps
	mkdir -p $(@D)
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-Idataloader/_core/src -o $@ fuzz/codecs_fuzzer.c \
		$(addprefix dataloader/_core/src/,dl_codecs.c dl_jpeg.c dl_png.c dl_webp.c dl_convert.c) \
		$$(pkg-config --cflags --libs $(PKG_CONFIG_MODULES))

$(FUZZ_VENV)/.installed: pyproject.toml | sysdeps fuzz-deps
	$(PYTHON) -m venv $(FUZZ_VENV)
	$(FUZZ_BIN)/python -m pip install -q --upgrade pip
	$(FUZZ_BIN)/python -m pip install -q $(BUILD_REQUIREMENTS) $(FUZZ_REQUIREMENTS) pillow
	touch $@

# clang and its libFuzzer runtime, from Debian, like sysdeps.
fuzz-deps:
	@if command -v $(FUZZ_CC) >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FUZZ_APT_PACKAGES); \
	else \
		echo "make fuzz needs $(FUZZ_CC): sudo apt-get install $(FUZZ_APT_PACKAGES)"; exit 1; \
	fi

fuzz-install: $(FUZZ_VENV)/.installed
	CC=$(FUZZ_CC) $(FUZZ_BIN)/python -m pip install -q --no-build-isolation --no-deps \
		-Cbuild-dir=build/fuzz -Csetup-args=-Db_sanitize=address -Csetup-args=-Db_lundef=false \
		-Csetup-args=-Dc_args=-fsanitize=fuzzer-no-link \
		-Csetup-args=-Dc_link_args=-fsanitize=fuzzer-no-link .

# The whole suite on a free-threaded CPython 3.13, built once from Debian's
# source package into .cache/ (tools/build_python.sh).
test-ft: ft-install
	PYTHONSAFEPATH=1 $(FT_BIN)/python -m pytest -m "not soak" -p no:cacheprovider $(PYTEST_ARGS) tests

$(FT_PREFIX)/bin/python3.13t:
	tools/build_python.sh --free-threaded $(FT_PREFIX)

$(FT_VENV)/.installed: pyproject.toml meson.build dataloader/_core/meson.build | sysdeps $(FT_PREFIX)/bin/python3.13t
	$(FT_PREFIX)/bin/python3.13t -m venv $(FT_VENV)
	$(FT_BIN)/python -m pip install -q --upgrade pip
	$(FT_BIN)/python -m pip install -q $(BUILD_REQUIREMENTS) $(FT_TEST_REQUIREMENTS)
	touch $@

ft-install: $(FT_VENV)/.installed
	$(FT_BIN)/python -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=build/ft .

# Every benchmark, each against its peers in the same run (docs/benchmarks.md);
# JSON into benchmarks/results/, the image chart into docs/images/.
bench: $(VENV)/.installed-test bench-photos pillow-simd spdl
	$(BIN)/python benchmarks/loader_overhead.py
	$(BIN)/python benchmarks/compare_torch.py
	$(BIN)/python benchmarks/drop_in.py
	$(BIN)/python benchmarks/auto.py
	$(BIN)/python benchmarks/images.py
	$(BIN)/python benchmarks/augment.py
	$(BIN)/python benchmarks/policies.py
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/fusion_error.py
	$(BIN)/python benchmarks/thread_scaling.py
	$(BIN)/python benchmarks/shuffle.py
	$(BIN)/python benchmarks/shards.py
	$(BIN)/python benchmarks/sequences_batching.py
	$(BIN)/python benchmarks/sequences_sources.py
	$(BIN)/python benchmarks/video.py

# Real photographs for the image benchmarks (dataloader/_images/samples.py,
# INSTALLED_PHOTOS): two Debian wallpaper packages of camera pictures.
PHOTO_APT_PACKAGES := lomiri-wallpapers-16.04 mate-backgrounds
PHOTO_CHECK := /usr/share/backgrounds/Bridge_by_Sander_Klootwijk.jpg /usr/share/backgrounds/mate/nature/Storm.jpg
bench-photos:
	@if ls $(PHOTO_CHECK) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PHOTO_APT_PACKAGES); \
	else \
		echo "The image benchmarks use scikit-image's photographs; for real ones: sudo apt-get install $(PHOTO_APT_PACKAGES)"; \
	fi

# SPDL, the second peer of benchmarks/video.py, in its own venv (its pins are
# not ours); video.py leaves its row out when .venv-spdl is missing.
SPDL_VENV := .venv-spdl
SPDL_REQUIREMENT := spdl==0.8.0
spdl: $(SPDL_VENV)/.installed

$(SPDL_VENV)/.installed:
	$(PYTHON) -m venv $(SPDL_VENV)
	$(SPDL_VENV)/bin/python -m pip install -q --upgrade pip
	$(SPDL_VENV)/bin/python -m pip install -q numpy $(SPDL_REQUIREMENT)
	touch $@

# benchmarks/loader_overhead.py against dataloader-rs alone, on CPython 3.13.
bench-rs: $(PY313_VENV)/.installed
	$(PY313_BIN)/python -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=build/cp313 .
	$(PY313_BIN)/python benchmarks/loader_overhead.py --peer rs

$(PY313_PREFIX)/bin/python3.13:
	tools/build_python.sh $(PY313_PREFIX)

$(PY313_VENV)/.installed: pyproject.toml | sysdeps $(PY313_PREFIX)/bin/python3.13
	$(PY313_PREFIX)/bin/python3.13 -m venv $(PY313_VENV)
	$(PY313_BIN)/python -m pip install -q --upgrade pip
	$(PY313_BIN)/python -m pip install -q $(BUILD_REQUIREMENTS) $(RS_REQUIREMENT)
	touch $@

# Pillow-SIMD, the peer of benchmarks/kernels.py, in its own venv (it
# replaces Pillow): built from source with AVX2 enabled, against the system
# libjpeg and zlib. kernels.py finds .venv-pillow-simd/bin/python by itself.
PILLOW_SIMD_VENV := .venv-pillow-simd
PILLOW_SIMD_APT_PACKAGES := libjpeg-dev zlib1g-dev
pillow-simd: $(PILLOW_SIMD_VENV)/.installed

$(PILLOW_SIMD_VENV)/.installed:
	@if pkg-config --exists libjpeg zlib 2>/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PILLOW_SIMD_APT_PACKAGES); \
	else \
		echo "Pillow-SIMD needs the JPEG and zlib headers: sudo apt-get install $(PILLOW_SIMD_APT_PACKAGES)"; exit 1; \
	fi
	$(PYTHON) -m venv $(PILLOW_SIMD_VENV)
	$(PILLOW_SIMD_VENV)/bin/python -m pip install -q --upgrade pip
	$(PILLOW_SIMD_VENV)/bin/python -m pip install -q numpy
	CC="cc -mavx2" $(PILLOW_SIMD_VENV)/bin/python -m pip install -q --no-cache-dir --no-binary pillow-simd pillow-simd
	touch $@

# The documentation, into site/. `make test` builds it too (tests/test_docs.py).
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

sysdeps:
	@if pkg-config --exists $(PKG_CONFIG_MODULES) 2>/dev/null && command -v ffmpeg >/dev/null; then :; \
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
	rm -rf build $(VENV) $(ASAN_VENV) $(FT_VENV) $(PY313_VENV) $(FUZZ_VENV) $(PILLOW_SIMD_VENV) $(SPDL_VENV) fuzz/corpus fuzz/artifacts .pytest_cache \
		site docs/images/transforms docs/images/kernels_chart.svg
