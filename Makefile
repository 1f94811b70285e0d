# A thin wrapper over CMake (as neovim has). `make run` and `make test` work on
# a fresh Debian 12 machine: each installs what is missing first.
BUILD_DIR   ?= build
BUILD_TYPE  ?= Release
CMAKE_FLAGS ?=
JOBS        ?= $(shell nproc)
ifdef CI
CMAKE_FLAGS += -DMH_WERROR=ON
endif

.PHONY: all deps build run test unit spec soak asan fuzz bench format clean install uninstall deb deb-check
# `make install` (DESTDIR for a staging root): bin/moonhttp, share/lua/5.4/moonhttp,
# the man page, examples, the systemd unit and etc/moonhttp/app.lua under PREFIX.
PREFIX      ?= /usr/local
FUZZ_SECONDS ?= 60
# The soak test's length in `make test` (bench/soak.sh; `make soak` runs 10 minutes).
SOAK_SECONDS ?= 90
# How many spec files run at once (scripts/spec_run.sh; 1: one busted over spec/).
SPEC_JOBS ?= 1

all: build

deps:
	@sh scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)
	cmake --build $(BUILD_DIR) -j $(JOBS)

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD_DIR)

# Removes what the last `make install` from $(BUILD_DIR) installed (CMake's
# install_manifest.txt lists the paths; give the install's DESTDIR again); an
# edited starter app stays.
uninstall:
	DESTDIR=$(DESTDIR) sh scripts/uninstall.sh $(BUILD_DIR)

# The Debian package (debian/), built from a copy of the tree in $(DEB_DIR) so
# dpkg-buildpackage's output (it writes to ..) stays there; then lintian and
# scripts/check_deb.sh (contents, control fields, the unit). Not part of
# `make test`: a full package build takes minutes.
DEB_DIR ?= build-deb
# What dpkg-buildpackage is told; CI adds nocheck (it runs the unit tests on
# its own builds), so the package build compiles only what it installs.
DEB_OPTIONS ?= parallel=$(JOBS)
deb: deps
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/moonhttp
	git ls-files -z --cached --others --exclude-standard | xargs -0 cp -P --parents -t $(DEB_DIR)/moonhttp
	@# Mbed TLS is deps.sh's build in .deps/mbedtls-3.6 (ignored by git; debian/control does
	@# not build-depend on libmbedtls-dev): the package links it statically, as every
	@# other build here does.
	mkdir -p $(DEB_DIR)/moonhttp/.deps && cp -a .deps/mbedtls-3.6 $(DEB_DIR)/moonhttp/.deps/
	cd $(DEB_DIR)/moonhttp && DEB_BUILD_OPTIONS="$(DEB_OPTIONS)" dpkg-buildpackage -us -uc -b
	lintian --fail-on error,warning --info $(DEB_DIR)/moonhttp_*.deb
	sh scripts/check_deb.sh $(DEB_DIR)/moonhttp_*.deb

# The package as an operator meets it, on this machine, as root
# (scripts/deb_check.sh): make deb, apt-get install, the unit verified, the
# installed app started as the moonhttp user with a stand-in NOTIFY_SOCKET,
# reloaded and stopped, a busted spec on the installed moonhttp.test, purge.
deb-check:
	sh scripts/deb_check.sh

run: build
	$(BUILD_DIR)/moonhttp examples/api.lua

unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure

spec: build
	MOONHTTP_BIN=$(abspath $(BUILD_DIR))/moonhttp SPEC_JOBS=$(SPEC_JOBS) scripts/spec_run.sh

# The soak runs before busted so the output still ends with the runners' summaries.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure
	SOAK_SECONDS=$(SOAK_SECONDS) MOONHTTP_BIN=$(abspath $(BUILD_DIR))/moonhttp SOAK_OUT=$(abspath $(BUILD_DIR))/soak bench/soak.sh
	MOONHTTP_BIN=$(abspath $(BUILD_DIR))/moonhttp SPEC_JOBS=$(SPEC_JOBS) scripts/spec_run.sh

# examples/linkboard.lua under load and faults for 10 minutes (bench/notes/2026-12-02-lab-notebook.md, Soak).
soak: build
	MOONHTTP_BIN=$(abspath $(BUILD_DIR))/moonhttp SOAK_OUT=$(abspath $(BUILD_DIR))/soak bench/soak.sh

# The specs under AddressSanitizer + UBSan, in their own build tree. The soak
# runs 30 s here (a leak or a use-after-free shows in the first minutes of
# faults as well as in the 90 s of `make test`), to keep CI's two passes short.
ASAN_SOAK_SECONDS ?= 30
asan:
	$(MAKE) test BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo CMAKE_FLAGS="$(CMAKE_FLAGS) -DMH_SANITIZE=ON" \
		SOAK_SECONDS=$(ASAN_SOAK_SECONDS)

# libFuzzer over the request path (clang), starting from the seed corpus;
# crashes land in build-fuzz/ as crash-* files: add them to fuzz/regression/.
fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMH_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzz_http1
	rm -rf build-fuzz/corpus && mkdir -p build-fuzz/corpus && cp fuzz/corpus/* build-fuzz/corpus/
	cd build-fuzz && ./fuzz/fuzz_http1 -dict=../fuzz/http1.dict -max_total_time=$(FUZZ_SECONDS) \
		-print_final_stats=1 corpus ../fuzz/regression

bench: build
	sh scripts/deps.sh --bench
	bench/run.sh

format:
	clang-format -i src/*/*.c src/*/*.h tests/unit/*.h tests/unit/*/*.c fuzz/*.c

clean:
	rm -rf $(BUILD_DIR) build-asan build-fuzz build-deb
