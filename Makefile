# The front door. `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
#   make demo    install what is missing, build Release into build/, run the demo
#   make test    install, build, run every test
#   make tsan    ThreadSanitizer build in build-tsan/ of the tests labelled `concurrency` (target
#                concurrency_tests), and run them
#   make debug   Debug build in build-debug/ (invariant and lock-held checks on: USWAP_DCHECK),
#                run the tests labelled `unit` and `concurrency` (DEBUG_TARGET, DEBUG_LABELS)
#   make asan    AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/, run the tests
#                labelled `unit` and `concurrency` (what cannot run under ASan: src/uffd/CMakeLists.txt)
#   make fuzz    clang libFuzzer build in build-fuzz/, run each target of fuzz/ for FUZZ_SECONDS
#                (FUZZ_PARALLEL at a time) from a copy of its corpus (fuzz/README.md)
#   make bench   build and run the benchmarks (JSON in build/bench-results/)
#   make models  check the Promela models of the lock protocols with spin
#   make install install into PREFIX (default /usr/local; DESTDIR too), see README.md "Install"
#   make deb     build the Debian package build/uswap_<version>_<arch>.deb (prefix /usr)
# CMAKE_FLAGS adds configure options (CI passes -DUSWAP_WERROR=ON).

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
BUILD ?= build
TSAN_BUILD ?= build-tsan
DEBUG_BUILD ?= build-debug
# -O1 -g1: the checks are what the Debug build is for; unoptimised code and full debug
# information would only slow the build and the tests (line tables still name file and line).
DEBUG_FLAGS ?= -O1 -g1
# What make debug builds and runs: by default every unit and concurrency test; CI builds and
# runs only the tests no sanitizer build can (DEBUG_TARGET=shim_tests DEBUG_LABELS=shim).
DEBUG_TARGET ?= all
DEBUG_LABELS ?= unit|concurrency
ASAN_BUILD ?= build-asan
# -O1 -g1 as for debug: ASan's checks do not need -O2, and its builds are the slowest.
ASAN_FLAGS ?= -O1 -g1
# Any sanitizer report fails the test that caused it: UBSan stops there too (the build has
# -fno-sanitize-recover), and prints the stack.
ASAN_ENV = ASAN_OPTIONS="halt_on_error=1 detect_stack_use_after_return=1 strict_init_order=1" \
           UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_PARALLEL ?= 2

PREFIX ?= /usr/local

.PHONY: all deps build demo test tsan debug asan fuzz bench models install deb clean

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
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target concurrency_tests
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -j$(JOBS) -L concurrency

debug: deps
	cmake -S . -B $(DEBUG_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$(DEBUG_FLAGS)" \
	  -DCMAKE_C_FLAGS_DEBUG="$(DEBUG_FLAGS)" -DUSWAP_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(DEBUG_BUILD) -j$(JOBS) --target $(DEBUG_TARGET)
	cd $(DEBUG_BUILD) && ctest --output-on-failure -j$(JOBS) -L '$(DEBUG_LABELS)'

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(ASAN_FLAGS)" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(ASAN_FLAGS)" \
	  -DUSWAP_SANITIZE=address -DUSWAP_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && $(ASAN_ENV) ctest --output-on-failure -j$(JOBS) -L 'unit|concurrency'

fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(ASAN_FLAGS)" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(ASAN_FLAGS)" -DUSWAP_SANITIZE=address -DUSWAP_FUZZ=ON \
	  -DUSWAP_BUILD_TESTS=OFF -DUSWAP_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_all
	$(ASAN_ENV) fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_PARALLEL)

bench: build
	scripts/run-bench $(BUILD)

models: deps
	@if ls models/*.pml >/dev/null 2>&1; then scripts/check-models; else echo "models: none yet"; fi

# Both configure $(BUILD) for their prefix first: the libdir (lib/<multiarch> under /usr on
# Debian, so that the nbdkit plugin lands in nbdkit's plugindir) and the paths uswap finds its
# shim and plugin by follow the prefix. Only those two sources rebuild when it changes.
install: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

deb: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD) $(TSAN_BUILD) $(DEBUG_BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
