# A thin wrapper over CMake (as neovim has). `make run` and `make test` work on
# a fresh Debian 12 machine: each installs what is missing first.
BUILD_DIR   ?= build
BUILD_TYPE  ?= Release
CMAKE_FLAGS ?=
JOBS        ?= $(shell nproc)
ifdef CI
CMAKE_FLAGS += -DMH_WERROR=ON
endif

.PHONY: all deps build run test unit spec asan fuzz bench format clean

all: build

deps:
	@sh scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/moonhttp examples/api.lua

unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure

spec: build
	MOONHTTP_BIN=$(abspath $(BUILD_DIR))/moonhttp busted

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure
	MOONHTTP_BIN=$(abspath $(BUILD_DIR))/moonhttp busted

# The specs under AddressSanitizer + UBSan, in their own build tree.
asan:
	$(MAKE) test BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo CMAKE_FLAGS="-DMH_SANITIZE=ON"

bench: build
	sh scripts/deps.sh --bench
	bench/run.sh

format:
	clang-format -i src/*.c src/*.h tests/unit/*.c

clean:
	rm -rf $(BUILD_DIR) build-asan
