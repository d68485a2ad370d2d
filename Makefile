# Loom top-level driver: `make demo` and `make test` do all set-up themselves.
# SANITIZE=address,undefined builds everything with those sanitizers, in a
# build folder of its own (build-address-undefined), and tests that build.
SANITIZE  ?=
comma     := ,
BUILD     ?= $(if $(SANITIZE),build-$(subst $(comma),-,$(SANITIZE)),build)
LLVM_ROOT ?= /usr/lib/llvm-22
LIT       := $(LLVM_ROOT)/bin/lit
JOBS      ?= $(shell nproc)

.PHONY: all deps bench-deps bench bench-quick configure build demo test check-lit check-unit fuzz clean

all: build

# Installs only what is missing (quiet when everything is present).
deps:
	@tools/setup/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	@tools/setup/configure.sh $(BUILD) $(LLVM_ROOT) $(SANITIZE)

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

# A longer fuzzing pass than make test's, over every target (FUZZ_SECONDS
# per libFuzzer target, default 60; tools/setup/fuzz.sh).
fuzz: build
	@tools/setup/fuzz.sh $(BUILD)

# The benchmarks' baselines (PyTorch, OpenBLAS) come with deps.
bench-deps: deps

# Speed, against baselines measured in the same run (benchmarks/README.md,
# docs/performance.md).
bench: build bench-deps
	@benchmarks/train/run.sh $(BUILD)
	@benchmarks/gpt/run.sh $(BUILD)
	@benchmarks/cpu/run.sh $(BUILD)
	@benchmarks/attention/run.sh $(BUILD)
	@benchmarks/attention/grad.sh $(BUILD)
	@benchmarks/compile/run.sh $(BUILD)

# Two runs of the smallest CPU matmuls: that the benchmark works (make test
# runs it as test/Benchmarks/bench-quick.test; it times nothing it checks).
bench-quick: build bench-deps
	@QUICK=1 benchmarks/cpu/run.sh $(BUILD) 256

clean:
	rm -rf $(BUILD)
