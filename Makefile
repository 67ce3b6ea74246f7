# rjq: the two commands a new machine needs are `make demo` and `make test`.
# Both install what is missing (scripts/install-deps.sh), configure and build.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build install build-asan build-fuzz fuzz-smoke test test-passes test-fast test-hiredis demo demo-web bench clean

all: build

deps:
	@bash scripts/install-deps.sh

# A build folder is configured when it is new, and again whenever
# CMAKE_ARGS is given (so `make test CMAKE_ARGS=...` takes effect on an
# existing folder too).
$(BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRJQ_WERROR=ON -DRJQ_ASSERTS=ON $(CMAKE_ARGS)

$(ASAN_BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DRJQ_WERROR=ON -DRJQ_SANITIZE=ON -DRJQ_ASSERTS=ON $(CMAKE_ARGS)

# The libFuzzer targets (tests/fuzz/README.md): clang, the library
# instrumented, only the library and the targets built.
$(FUZZ_BUILD)/Makefile: CMakeLists.txt tests/fuzz/CMakeLists.txt | deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DRJQ_WERROR=ON -DRJQ_FUZZ=ON -DRJQ_ASSERTS=ON \
	  -DRJQ_BUILD_TESTS=OFF -DRJQ_BUILD_EXAMPLES=OFF

build: deps $(BUILD)/Makefile
	$(if $(strip $(CMAKE_ARGS)),cmake -S . -B $(BUILD) $(CMAKE_ARGS))
	cmake --build $(BUILD) -j$(JOBS)

# `make install`: the build folder into PREFIX (default: CMAKE_INSTALL_PREFIX,
# /usr/local), under DESTDIR when given; COMPONENT=Runtime, Development or
# Tools installs only that part (README "Installing and linking").
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) $(if $(PREFIX),--prefix "$(PREFIX)") \
	  $(if $(COMPONENT),--component $(COMPONENT))

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
# Every build here has -DRJQ_ASSERTS=ON: the RJQ_ASSERT invariants of
# src/check.h are checked although RelWithDebInfo sets -DNDEBUG.
# A failed run ends by repeating the failed tests' output (failure_recap.sh).
# All three passes always run (a failure of the first does not hide the
# sanitizer's results); the end says how each went, and the exit status is
# non-zero when either failed (tests/make_test_passes.sh checks this).
# ctest runs TEST_JOBS tests at once: by default two per core (twice JOBS,
# `make test JOBS=2` or `make test TEST_JOBS=3`). The tests wait on their
# servers, processes and timers far more than they compute: a first pass at
# -j2 on 2 loaded cores used 181 s of CPU in 562 s (16% of the two cores),
# so one per core left the cores idle most of the time (all passes green
# at -j4 on 2 cores at load 10-20). test_chaos (1 s liveness) takes two of
# the slots (PROCESSORS, tests/CMakeLists.txt), and the longest tests
# start first (COST there).
TEST_JOBS ?= $(shell echo $$((2 * $(JOBS))))
CTEST = ctest --output-on-failure -j$(TEST_JOBS)
RECAP = || { bash $(CURDIR)/tests/failure_recap.sh .; exit 1; }

test: build build-asan build-fuzz
	@$(MAKE) --no-print-directory test-passes

# (the three passes of `make test`, on folders already built)
test-passes:
	@first=0; asan=0; fuzz=0; \
	( cd $(BUILD) && $(CTEST) ) || first=1; \
	( cd $(ASAN_BUILD) && RJQ_UNDER_ASAN=1 $(CTEST) -LE valgrind ) || asan=1; \
	( cd $(FUZZ_BUILD) && $(CTEST) -L fuzz ) || fuzz=1; \
	if [ $$first = 1 ]; then bash $(CURDIR)/tests/failure_recap.sh $(BUILD) "first pass"; fi; \
	if [ $$asan = 1 ]; then bash $(CURDIR)/tests/failure_recap.sh $(ASAN_BUILD) "ASan pass"; fi; \
	if [ $$fuzz = 1 ]; then bash $(CURDIR)/tests/failure_recap.sh $(FUZZ_BUILD) "fuzz smoke"; fi; \
	echo "make test: first pass $$([ $$first = 0 ] && echo passed || echo FAILED)," \
	     "ASan+UBSan pass $$([ $$asan = 0 ] && echo passed || echo FAILED)," \
	     "fuzz smoke $$([ $$fuzz = 0 ] && echo passed || echo FAILED)"; \
	[ $$first = 0 ] && [ $$asan = 0 ] && [ $$fuzz = 0 ]

# The suite against hiredis 1.2.0 and 1.4.1 built from source with SSL
# (TLS tests included); .ci/run runs it after `make test`.
test-hiredis: deps
	TEST_JOBS=$(TEST_JOBS) bash scripts/test-hiredis.sh

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
