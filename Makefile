# rjq: the two commands a new machine needs are `make demo` and `make test`.
# Both install what is missing (scripts/install-deps.sh), configure and build.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build build-asan build-fuzz fuzz-smoke test test-fast test-hiredis demo demo-web bench clean

all: build

deps:
	@bash scripts/install-deps.sh

# A build folder is configured when it is new, and again whenever
# CMAKE_ARGS is given (so `make test CMAKE_ARGS=...` takes effect on an
# existing folder too).
$(BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRJQ_WERROR=ON $(CMAKE_ARGS)

$(ASAN_BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DRJQ_WERROR=ON -DRJQ_SANITIZE=ON $(CMAKE_ARGS)

# The libFuzzer targets (tests/fuzz/README.md): clang, the library
# instrumented, only the library and the targets built.
$(FUZZ_BUILD)/Makefile: CMakeLists.txt tests/fuzz/CMakeLists.txt | deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DRJQ_WERROR=ON -DRJQ_FUZZ=ON \
	  -DRJQ_BUILD_TESTS=OFF -DRJQ_BUILD_EXAMPLES=OFF

build: deps $(BUILD)/Makefile
	$(if $(strip $(CMAKE_ARGS)),cmake -S . -B $(BUILD) $(CMAKE_ARGS))
	cmake --build $(BUILD) -j$(JOBS)

build-asan: deps $(ASAN_BUILD)/Makefile
	$(if $(strip $(CMAKE_ARGS)),cmake -S . -B $(ASAN_BUILD) $(CMAKE_ARGS))
	cmake --build $(ASAN_BUILD) -j$(JOBS)

build-fuzz: deps $(FUZZ_BUILD)/Makefile
	cmake --build $(FUZZ_BUILD) -j$(JOBS)

# Each fuzz target from its seed corpus for 6 s (all of them: < 60 s).
fuzz-smoke: build-fuzz
	cd $(FUZZ_BUILD) && $(CTEST) -L fuzz

# The whole suite: a -Werror build, then the same tests under ASan+UBSan
# (valgrind runs the demo inside the first pass), then the fuzz smoke run.
# A failed run ends by repeating the failed tests' output (failure_recap.sh).
CTEST = ctest --output-on-failure -j2
RECAP = || { bash $(CURDIR)/tests/failure_recap.sh .; exit 1; }

test: build build-asan
	cd $(BUILD) && $(CTEST) $(RECAP)
	cd $(ASAN_BUILD) && RJQ_UNDER_ASAN=1 $(CTEST) -LE valgrind $(RECAP)
	$(MAKE) fuzz-smoke

# The suite against hiredis 1.2.0 and 1.4.1 built from source with SSL
# (TLS tests included); .ci/run runs it after `make test`.
test-hiredis: deps
	bash scripts/test-hiredis.sh

test-fast: build
	cd $(BUILD) && $(CTEST) $(RECAP)

demo: build
	@bash scripts/demo.sh $(BUILD)

# The dashboard's demo: a private redis-server and rjq serve --demo on
# 127.0.0.1:8080 (DEMO_LISTEN=ADDR:PORT to change), until Ctrl-C.
demo-web: build
	@bash scripts/demo-web.sh $(BUILD)

bench: build
	@echo "built $(BUILD)/rjq-bench"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) build-hiredis-*
