# The front door. `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
#   make demo    install what is missing, build Release into build/, run the demo
#   make test    install, build, run every test
#   make tsan    ThreadSanitizer build in build-tsan/, run the tests labelled `concurrency`
#   make debug   Debug build in build-debug/ (invariant and lock-held checks on: USWAP_DCHECK),
#                run the tests labelled `unit` and `concurrency`
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

PREFIX ?= /usr/local

.PHONY: all deps build demo test tsan debug bench models install deb clean

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

debug: deps
	cmake -S . -B $(DEBUG_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$(DEBUG_FLAGS)" \
	  -DCMAKE_C_FLAGS_DEBUG="$(DEBUG_FLAGS)" -DUSWAP_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(DEBUG_BUILD) -j$(JOBS)
	cd $(DEBUG_BUILD) && ctest --output-on-failure -j$(JOBS) -L 'unit|concurrency'

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
	rm -rf $(BUILD) $(TSAN_BUILD) $(DEBUG_BUILD)
