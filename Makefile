# The front door. `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
#   make demo    install what is missing, build Release into build/, run the demo
#   make test    install, build, run every test
#   make tsan    ThreadSanitizer build in build-tsan/, run the tests labelled `concurrency`
#   make bench   build and run the benchmarks (JSON in build/bench-results/)
#   make models  check the Promela models of the lock protocols with spin
# CMAKE_FLAGS adds configure options (CI passes -DUSWAP_WERROR=ON).

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
BUILD ?= build
TSAN_BUILD ?= build-tsan

.PHONY: all deps build demo test tsan bench models clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/bin/uswap demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUSWAP_SANITIZE=thread \
	  -DUSWAP_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j$(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -j$(JOBS) -L concurrency

bench: build
	scripts/run-bench $(BUILD)

models: deps
	@if ls models/*.pml >/dev/null 2>&1; then scripts/check-models; else echo "models: none yet"; fi

clean:
	rm -rf $(BUILD) $(TSAN_BUILD)
