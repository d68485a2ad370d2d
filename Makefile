# Loom top-level driver: `make demo` and `make test` do all set-up themselves.
BUILD     ?= build
LLVM_ROOT ?= /usr/lib/llvm-22
LIT       := $(LLVM_ROOT)/bin/lit
JOBS      ?= $(shell nproc)

.PHONY: all deps configure build demo test check-lit check-unit clean

all: build

# Installs only what is missing (quiet when everything is present).
deps:
	@tools/setup/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	@tools/setup/configure.sh $(BUILD) $(LLVM_ROOT)

configure: $(BUILD)/build.ninja

build: configure
	@ninja -C $(BUILD) -j $(JOBS) $(if $(VERBOSE),,--quiet)

demo: build
	@tools/setup/demo.sh $(BUILD)

check-unit: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

check-lit: build
	@$(LIT) -sv $(BUILD)/test

# Unit tests first, then the lit suite, whose summary line ends the output.
test: check-unit check-lit

clean:
	rm -rf $(BUILD)
