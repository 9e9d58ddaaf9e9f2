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

.PHONY: all build demo demo-build check check-unit check-asan deps clean gpu-check install

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

# Every test this machine can run: unit (plain and ASan+UBSan) and net.
check: build
	cd $(BUILD) && ctest --output-on-failure -L 'unit|net' -j 1
	$(MAKE) check-asan

check-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit

# Unit tests under ASan+UBSan. Full stacks on allocation: the suppressions
# of third-party leaks (tests/util/lsan.supp) match frames deep in the stack.
check-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKINET_SANITIZE=ON -DKINET_WITH_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 \
		UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/util/lsan.supp \
		ctest --output-on-failure -L unit

# On a machine with a GPU: the GPU suite.
gpu-check: build
	cd $(BUILD) && ctest --output-on-failure -L gpu

# Installs the full build into PREFIX (headers, libraries, modules, tools,
# examples' sources, docs, kinet.pc, the CMake package).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(DEMO_BUILD) $(ASAN_BUILD)
