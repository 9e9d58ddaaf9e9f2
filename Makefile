# kinet - top-level commands. See README.md.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build demo check check-unit check-asan check-net deps clean gpu-check

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The main job: kinet-perf on the software NIC, defaults that finish in seconds.
demo: build
	$(BUILD)/tools/perf/kinet-perf write_bw --loopback -a --max-size 1M -n 2000
	$(BUILD)/tools/perf/kinet-perf write_lat --loopback -n 2000
	$(BUILD)/tools/perf/kinet-perf put_bw --loopback -s 8 --threads 2 -n 20000

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

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
