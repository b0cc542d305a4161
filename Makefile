# swift-tools — one Makefile for the library, the commands, the tests and the demo.
#
#   make                  build every command into $(O)/bin
#   make test             install missing packages, build, run every test (one prove verdict)
#   make demo             install missing packages, build, run the whole pipeline on our own data
#   make bench            print benchmark figures and ratios to the references
#   make O=build-asan SANITIZE=address,undefined test
#   make DEVELOPER=1      -Werror and extra warnings (CI does this)
#   make CUDA=0|1         skip / force the CUDA objects (default: built when nvcc is found)
#   make install PREFIX=/usr/local
#   make format-check     clang-format the tree in dry-run mode
#   make check-layers     the layout's rules (scripts/check-layers.sh, docs/architecture.md)
#   make V=1              show the commands

O ?= build
# How $(O) was configured (SANITIZE, CUDA, OPT, DEVELOPER), so a later `make O=DIR install`
# builds the same way; anything given on the command line still wins.
-include $(O)/config.mk
PREFIX ?= /usr/local
SHARED ?= ../shared
CC ?= gcc
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

ifeq ($(CUDA),)
  CUDA := $(if $(NVCC),1,0)
endif

ifeq ($(V),1)
  Q :=
  say :=
else
  Q := @
  # `make -s` prints nothing: the s in MAKEFLAGS' first word (its single-letter flags)
  say = @$(if $(findstring s,$(firstword -$(MAKEFLAGS))),,printf '  %-6s %s\n' $(1) $(2);)
endif

WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2 -Wvla -Wstrict-prototypes
ifeq ($(DEVELOPER),1)
  WARN += -Werror
endif
OPT ?= -O2
CPPFLAGS += -I. -D_GNU_SOURCE -DSWIFT_VERSION='"$(VERSION)"'
CFLAGS ?= $(OPT) -g
CFLAGS += -std=c11 -pthread -fopenmp $(WARN) -MMD -MP
# What the kernels need (KERNEL_LDLIBS, grown below in CUDA builds) and what lib/ adds on top.
KERNEL_LDLIBS := -lopenblas -ldnnl -lm -pthread -fopenmp
LDLIBS += -ljansson -lz -larchive -lcurl -lcrypto -lpcre2-8 -lutf8proc -lyaml
# image decoders (lib/formats/image.c): libjpeg-turbo, libpng, libwebp
LDLIBS += -ljpeg -lpng16 -lwebp
# libmicrohttpd for swift-infer --serve (lib/infer/server.c)
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
CPPFLAGS += $(MHD_CFLAGS)
LDLIBS += $(MHD_LIBS)
# OpenMPI for lib/train/dist.c (swift-train under mpirun/srun); MPI_Init runs only under a launcher
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS := $(shell pkg-config --libs ompi-c 2>/dev/null)
CPPFLAGS += $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)

ifneq ($(SANITIZE),)
  CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=$(SANITIZE)
endif

ifeq ($(CUDA),1)
  CPPFLAGS += -DSWIFT_HAVE_CUDA=1
  CU_SRC := $(wildcard kernels/cuda/*.cu)
  CU_OBJ := $(CU_SRC:%.cu=$(O)/obj/%.o)
  CPPFLAGS += -isystem $(CUDA_HOME)/include
  # CUPTI (--profile device tracing) and NCCL are used when the toolkit has them
  CUPTI_DIR := $(firstword $(foreach d,$(CUDA_HOME) $(CUDA_HOME)/extras/CUPTI,$(if $(wildcard $(d)/include/cupti.h),$(d))))
  NCCL_H := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h))
  ifneq ($(CUPTI_DIR),)
    CPPFLAGS += -DSWIFT_HAVE_CUPTI=1 -isystem $(CUPTI_DIR)/include
    KERNEL_LDLIBS += -L$(CUPTI_DIR)/lib64 -Wl,-rpath,$(CUPTI_DIR)/lib64 -lcupti
  endif
  ifneq ($(NCCL_H),)
    CPPFLAGS += -DSWIFT_HAVE_NCCL=1
    KERNEL_LDLIBS += -lnccl
  endif
  KERNEL_LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas \
    -lcudart_static -ldl -lrt -lstdc++
  NVCCFLAGS ?= -O2 $(CUDA_ARCH) -Xcompiler -fPIC,-Wall$(if $(filter 1,$(DEVELOPER)),$(comma)-Werror) -Werror all-warnings
endif
comma := ,

# Two archives, linked `libswift.a libswift-kernels.a`: lib/ calls down into the kernels, never
# the reverse (the kernels' C files under kernels/cuda/ need the toolkit: CUDA builds only).
LIB_SRC := $(sort $(wildcard lib/*.c lib/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(O)/obj/%.o)
KERNEL_SRC := $(sort $(wildcard kernels/*.c kernels/cpu/*.c) $(if $(filter 1,$(CUDA)),$(wildcard kernels/cuda/*.c)))
KERNEL_OBJ := $(KERNEL_SRC:%.c=$(O)/obj/%.o) $(CU_OBJ)
CMD_SRC := $(sort $(wildcard cmd/*.c))
BINS := $(CMD_SRC:cmd/%.c=$(O)/bin/%)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNITS := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)
KTEST_SRC := $(sort $(wildcard tests/kernels/test_*.c))
KTESTS := $(KTEST_SRC:tests/kernels/%.c=$(O)/tests/%)
BENCH_SRC := $(sort $(wildcard tests/bench/bench_*.c))
BENCHES := $(BENCH_SRC:tests/bench/%.c=$(O)/bench/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZES := $(FUZZ_SRC:tests/fuzz/%.c=$(O)/fuzz/%)
LIBA := $(O)/lib/libswift.a
KLIBA := $(O)/lib/libswift-kernels.a
LIBS := $(LIBA) $(KLIBA)
LDLIBS += $(KERNEL_LDLIBS)
LINK_CHECK := $(O)/tests/kernels_link_check
# Which program takes which option (lib/core/cli.h, swift_cli_programs) comes from the programs'
# own tables: each is linked once without it ($(O)/stage1), asked --list-options, and the answer
# is compiled into every command; the completions are generated the same way (--list-values for
# the flags' values). A new flag reaches every stage's config files and the completions by itself.
STAGE1 := $(CMD_SRC:cmd/%.c=$(O)/stage1/%)
REGISTRY := $(O)/gen/cli_registry.c
REGISTRY_OBJ := $(O)/obj/gen/cli_registry.o
COMPLETIONS := $(O)/completions/swift.bash $(O)/completions/_swift
# (a sanitizer build's leak report at exit is the tests' business, not the build's)
RUN_STAGE1 := ASAN_OPTIONS=detect_leaks=0

.PHONY: FORCE all deps test test-unit test-cli demo bench install format format-check check-layers fuzz clean man
.DELETE_ON_ERROR:
.SECONDARY:

all: $(LIBS) $(BINS) $(LINK_CHECK) $(COMPLETIONS) $(O)/config.mk

$(O)/config.mk: FORCE
	@mkdir -p $(@D)
	@printf 'SANITIZE ?= %s\nCUDA ?= %s\nOPT ?= %s\nDEVELOPER ?= %s\n' \
	  '$(SANITIZE)' '$(CUDA)' '$(OPT)' '$(DEVELOPER)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

$(O)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(O)/obj/%.o: %.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$<)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -c -o $@ $<

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(KLIBA): $(KERNEL_OBJ)
	@mkdir -p $(@D)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

# The link refuses an upward reference: every object of libswift-kernels.a (--whole-archive),
# linked with nothing but the system libraries the kernels need, so one that calls into lib/
# leaves an undefined symbol and fails the build.
$(LINK_CHECK): $(O)/obj/tests/kernels/link_check.o $(KLIBA)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $< -Wl,--whole-archive $(KLIBA) \
	  -Wl,--no-whole-archive $(KERNEL_LDLIBS)

$(O)/stage1/%: $(O)/obj/cmd/%.o $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# rewritten only when it changes (the stamp records the run), so the commands relink only for a
# new option
$(REGISTRY).stamp: $(STAGE1) scripts/cli-registry.sh
	@mkdir -p $(@D)
	$(call say,GEN,$(REGISTRY))$(RUN_STAGE1) sh scripts/cli-registry.sh $(STAGE1) >$(REGISTRY).tmp && \
	  { cmp -s $(REGISTRY).tmp $(REGISTRY) && rm -f $(REGISTRY).tmp || mv $(REGISTRY).tmp $(REGISTRY); } && \
	  touch $@
$(REGISTRY): $(REGISTRY).stamp ;

$(REGISTRY_OBJ): $(REGISTRY)
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(O)/completions/%: completions/% $(STAGE1) scripts/completions.sh
	@mkdir -p $(@D)
	$(call say,GEN,$@)$(RUN_STAGE1) sh scripts/completions.sh $< $(STAGE1) >$@.tmp && mv $@.tmp $@

$(O)/bin/%: $(O)/obj/cmd/%.o $(REGISTRY_OBJ) $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $< $(REGISTRY_OBJ) $(LIBS) $(LDLIBS)

$(O)/tests/%: $(O)/obj/tests/unit/%.o $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS) -lcmocka

# the backend-ops harness links the kernels alone: it needs nothing from lib/ (and proves it)
$(O)/tests/%: $(O)/obj/tests/kernels/%.o $(KLIBA)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $< $(KLIBA) $(KERNEL_LDLIBS) -lcmocka

$(O)/bench/%: $(O)/obj/tests/bench/%.o $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# Fuzz targets: libFuzzer under clang when available, else a file-replay driver under $(CC).
FUZZ_CC ?= $(shell command -v clang 2>/dev/null)
$(O)/fuzz/%: tests/fuzz/%.c tests/fuzz/replay.c $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c $(LIBS) $(LDLIBS)

deps:
	@sh scripts/deps.sh

test: deps
	@$(MAKE) --no-print-directory all tests
	@SWIFT_BIN=$(abspath $(O)/bin) SWIFT_BUILD=$(abspath $(O)) SHARED=$(abspath $(SHARED)) \
	  LSAN_OPTIONS=$${LSAN_OPTIONS:-suppressions=$(abspath tests/lsan.supp)} \
	  CMOCKA_MESSAGE_OUTPUT=TAP prove --exec $(abspath tests/tap-exec) $(UNITS) $(KTESTS) \
	  $(sort $(wildcard tests/cli/*.bats))

tests: $(BINS) $(COMPLETIONS) $(UNITS) $(KTESTS) $(FUZZES) $(LINK_CHECK)

demo: deps
	@$(MAKE) -s --no-print-directory all
	@SWIFT_BIN=$(abspath $(O)/bin) sh pipelines/demo.sh

bench: all $(BENCHES)
	@SWIFT_BIN=$(abspath $(O)/bin) SWIFT_BUILD=$(abspath $(O)) SHARED=$(abspath $(SHARED)) \
	  sh tests/bench/run.sh

fuzz: $(FUZZES)
	@SHARED=$(abspath $(SHARED)) sh tests/fuzz/run.sh $(O)/fuzz

man: all
	@sh scripts/man.sh $(O)/bin $(O)/man

install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(O)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1
	for b in $(notdir $(BINS)); do \
	  install -m 644 $(O)/completions/swift.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$b; done
	install -m 644 $(O)/completions/_swift $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_swift

FORMAT_SRC = $(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format-check: ok"
format:
	@clang-format -i $(FORMAT_SRC)

# the arrows of docs/architecture.md (cmd -> lib -> kernels), one include spelling, file/function sizes
check-layers:
	@sh scripts/check-layers.sh

clean:
	rm -rf $(O)

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
