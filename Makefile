# kinet - top-level commands. See README.md.
BUILD ?= build
DEMO_BUILD ?= build-demo
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local
# CUDA parts in `make demo`: auto (built when a GPU is usable here), ON, OFF.
# `make check` and `make build` always build them when nvcc is found.
CUDA ?= auto

ifeq ($(CUDA),auto)
DEMO_CUDA = $(shell (test -c /dev/nvidia0 || nvidia-smi -L >/dev/null 2>&1) && echo ON || echo OFF)
else
DEMO_CUDA = $(CUDA)
endif

# Tests run side by side (ctest -j): those that may not say so themselves
# (RUN_SERIAL, RESOURCE_LOCK: tests/CMakeLists.txt).
TEST_JOBS ?= 4
# What each ctest run of the checks leaves in its build folder (JUnit): read
# by tests/util/check_summary.sh, which ends each check with a count of the
# tests passed, failed and skipped, and why each skipped one was.
JUNIT = Testing/check-junit.xml
SUMMARY = tests/util/check_summary.sh
# Full stacks on allocation: the suppressions of third-party leaks
# (tests/util/lsan.supp) match frames deep in the stack.
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 UBSAN_OPTIONS=print_stacktrace=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/util/lsan.supp
# ctest in folder $(1), labels $(2), environment $(3), results into
# $(1)/$(JUNIT); a failed test does not stop the check (the summary counts it
# and fails the check)
CTEST = cd $(1) && rm -f Testing/Temporary/LastTestsFailed*.log && $(3) ctest --output-on-failure \
	-j $(TEST_JOBS) -L '$(2)' -LE '^full$$' --output-junit $(JUNIT) || true
# The tests that failed in folder $(1)'s last ctest run, run again one at a
# time (environment $(2)), results into $(1)/$(RJUNIT): the summary counts a
# test that fails again as failed, and lists by name every test that passed
# only when run again alone (a race or a timing assumption to mend, shown,
# not hidden)
RJUNIT = Testing/check-rerun-junit.xml
RERUN = cd $(1) && rm -f $(RJUNIT) && if [ -s Testing/Temporary/LastTestsFailed.log ]; then \
	echo "make: the tests that failed, again, one at a time:"; \
	$(2) ctest --output-on-failure --rerun-failed --output-junit $(RJUNIT) || true; fi

.PHONY: all build demo demo-build check check-unit check-asan check-full asan-build deps clean \
	gpu-check install

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

# Everything: library, modules, tools, examples, tests (CUDA when nvcc is found).
build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The library, its modules and the tools only, in a folder of their own.
demo-build: deps
	cmake -S . -B $(DEMO_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINET_TESTS=OFF \
		-DKINET_EXAMPLES=OFF -DKINET_WITH_CUDA=$(DEMO_CUDA) $(CMAKE_FLAGS)
	cmake --build $(DEMO_BUILD) -j $(JOBS)

# The main job: kinet-perf on the software NIC, defaults that finish in seconds.
demo: demo-build
	$(DEMO_BUILD)/tools/perf/kinet-perf write_bw --loopback -a --max-size 1M -n 2000
	$(DEMO_BUILD)/tools/perf/kinet-perf write_lat --loopback -n 2000
	$(DEMO_BUILD)/tools/perf/kinet-perf put_bw --loopback -s 8 --threads 2 -n 20000

# Every test this machine can run, each once: unit and net, then the unit
# tests under ASan+UBSan (make check-asan); ends with the count of passed,
# failed and skipped tests, the skipped ones listed with their reasons, and
# fails if any failed. The GPU tests (make gpu-check) are built, not run.
check: build
	@rm -f $(BUILD)/$(JUNIT) $(ASAN_BUILD)/$(JUNIT)
	$(call CTEST,$(BUILD),^(unit|net)$$)
	$(call RERUN,$(BUILD))
	$(MAKE) --no-print-directory asan-build && $(call CTEST,$(ASAN_BUILD),^unit$$,$(ASAN_ENV))
	$(call RERUN,$(ASAN_BUILD),$(ASAN_ENV))
	@$(SUMMARY) "make check" plain=$(BUILD)/$(JUNIT) plain.rerun=$(BUILD)/$(RJUNIT) \
		asan=$(ASAN_BUILD)/$(JUNIT) asan.rerun=$(ASAN_BUILD)/$(RJUNIT)

# After make check, when there is time (.ci/run): the repetitions it leaves
# out (label full: the wire's rendezvous and RNR tests again on udp;ofi_rxd).
check-full: build
	@rm -f $(BUILD)/Testing/check-full-junit.xml
	cd $(BUILD) && rm -f Testing/Temporary/LastTestsFailed*.log && ctest --output-on-failure \
		-j $(TEST_JOBS) -L '^full$$' --output-junit Testing/check-full-junit.xml || true
	$(call RERUN,$(BUILD))
	@$(SUMMARY) "make check-full" full=$(BUILD)/Testing/check-full-junit.xml \
		full.rerun=$(BUILD)/$(RJUNIT)

check-unit: build
	@rm -f $(BUILD)/$(JUNIT)
	$(call CTEST,$(BUILD),^unit$$)
	$(call RERUN,$(BUILD))
	@$(SUMMARY) "make check-unit" plain=$(BUILD)/$(JUNIT) plain.rerun=$(BUILD)/$(RJUNIT)

# The unit tests under ASan+UBSan, in a build folder of their own.
asan-build: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKINET_SANITIZE=ON -DKINET_WITH_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

check-asan: asan-build
	@rm -f $(ASAN_BUILD)/$(JUNIT)
	$(call CTEST,$(ASAN_BUILD),^unit$$,$(ASAN_ENV))
	$(call RERUN,$(ASAN_BUILD),$(ASAN_ENV))
	@$(SUMMARY) "make check-asan" asan=$(ASAN_BUILD)/$(JUNIT) asan.rerun=$(ASAN_BUILD)/$(RJUNIT)

# On a machine with a GPU: the GPU suite, one test at a time (without a
# usable GPU every test reports skipped).
gpu-check: build
	@rm -f $(BUILD)/Testing/gpu-check-junit.xml
	cd $(BUILD) && ctest --output-on-failure -L '^gpu$$' \
		--output-junit Testing/gpu-check-junit.xml || true
	@$(SUMMARY) "make gpu-check" gpu=$(BUILD)/Testing/gpu-check-junit.xml

# Installs the full build into PREFIX (headers, libraries, modules, tools,
# examples' sources, docs, kinet.pc, the CMake package).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(DEMO_BUILD) $(ASAN_BUILD)
