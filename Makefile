# Colibri — plain Makefile.
#   make            library + CLI          make test        unit + integration tests
#   make run        generate with the bundled model
#   make SANITIZE=address,undefined test   make CROSS=aarch64-linux-gnu- test (qemu)
#   make static     fully static colibri   make install PREFIX=/usr/local DESTDIR=
#   make static MINIMAL=1   the engine + `colibri run --tokens` alone, stripped (musl on x86-64)
#   make size-check         builds it and fails over SIZE_BUDGET bytes (docs/REALTIME.md)
#   make deps       install missing Debian packages (make run / make test do it themselves)
#   make format
CROSS    ?=
SANITIZE ?=
WERROR   ?=
PREFIX   ?= /usr/local
DESTDIR  ?=
PYTHON   ?= /usr/bin/python3

ifeq ($(CROSS),)
CC       ?= cc
ifeq ($(origin CC),default)
CC       := gcc
endif
AR       ?= ar
else
CC       := $(CROSS)gcc
AR       := $(CROSS)ar
endif

MACHINE  := $(shell $(CC) -dumpmachine)
ifneq ($(findstring aarch64,$(MACHINE)),)
ARCH     := aarch64
else ifneq ($(findstring x86_64,$(MACHINE)),)
ARCH     := x86_64
else
ARCH     := other
endif

BUILD    ?= build/$(ARCH)$(if $(SANITIZE),-san)$(if $(STATIC),-static)$(if $(MINIMAL),-min)
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wvla
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -DCLB_HAVE_UTF8PROC $(WARN) -Iinclude -Isrc -pthread -MMD -MP
ifneq ($(WERROR),)
CFLAGS   += -Werror
endif
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SANITIZE)
endif
LIBS     := -lcjson -lpcre2-8 -lutf8proc -lzstd -lcrypto -lz -lm -pthread
# AES-256-GCM: also Intel's ipsec-mb on x86-64 (Debian has it for amd64 only; no static
# library), which chooses its code by the CPU at run time; libcrypto elsewhere (codec.c)
ifeq ($(ARCH)$(STATIC),x86_64)
AES_DEFS := -DCLB_HAVE_IPSEC_MB
CFLAGS   += $(AES_DEFS)
LIBS     += -lIPSec_MB
endif
TESTLIBS := -lcmocka
CLI_LIBS := -ledit -lmicrohttpd  # the tool: line editing (chat), HTTP (serve)

ifeq ($(ARCH),x86_64)
ISA_FLAGS_x86_avx2 := -mavx2 -mfma -mf16c
ISA_FLAGS_x86_avx512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512vbmi
endif
ifeq ($(ARCH),aarch64)
ISA_FLAGS_arm_neon := -march=armv8.2-a+dotprod+fp16
endif

ifneq ($(CROSS),)
RUNNER   ?= qemu-aarch64
endif
# Under qemu the default CPU ("max": dotprod, i8mm) builds every NEON table, which the kernel
# tests all run; these CPUs also check the run-time choice without i8mm and without dotprod.
QEMU_CPUS ?= neoverse-n1 cortex-a72
KERNEL_TESTS = $(BUILD)/tests/test_kernels $(BUILD)/tests/test_matmul $(BUILD)/tests/test_flash

# MINIMAL=1: no tokenizer / chat / sampler (src/text, PCRE2, utf8proc), no converter, no
# codecs (zstd, zlib, OpenSSL; src/minimal/ stands in and refuses such files at open), and a
# CLI of `run --tokens` alone (cli/minimal/); unused functions are dropped at link time.
MIN_OUT   := src/text/% src/text_api.c src/files_api.c src/format/codec.c src/format/container_v2.c \
             src/model/convert.c src/model/mix.c
ifneq ($(MINIMAL),)
LIB_SRCS  := $(filter-out $(MIN_OUT),$(sort $(wildcard src/*.c src/*/*.c)))
CLI_SRCS  := cli/minimal/colibri_min.c cli/common.c
# no unwind tables: nothing in the minimal build unwinds (no C++, no pthread_cancel or
# pthread_exit, no backtraces); they were 8 % of the aarch64 binary
CFLAGS    += -DCLB_MINIMAL -Isrc/minimal/include -ffunction-sections -fdata-sections \
             -fno-asynchronous-unwind-tables -fno-unwind-tables
# the per-token path keeps CFLAGS' optimisation; loading, parsing and the CLI are built for size
MIN_HOT   := src/kernels/% src/nn/% src/moe/% src/engine.c src/core/threadpool.c
# aarch64 links glibc statically (no Debian cross musl): about 540 KB of the 1 MB budget is
# glibc, so there the NEON packed kernels (three levels, unrolled: 104 KB at -O2, 76 KB at
# -Os), the portable fallback kernels (the NEON tables serve the quantized types) and the
# per-step bookkeeping (engine.c, the expert store, cache, pool and prefetch; no arithmetic
# on weights) are built for size: 1,001,712 bytes before, 993,520 after
MIN_COLD  := $(if $(filter aarch64,$(ARCH)),src/kernels/arm_neon_pack.c src/kernels/generic.c src/engine.c \
             $(filter-out src/moe/router.c src/moe/expert_exec.c,$(wildcard src/moe/*.c)))
MIN_OPT_cold := -Os
else
LIB_SRCS  := $(filter-out src/minimal/%,$(sort $(wildcard src/*.c src/*/*.c)))
CLI_SRCS  := $(sort $(wildcard cli/*.c))
ifneq ($(STATIC),)
# no static libmicrohttpd dependencies in Debian: the static tool has no server
CLI_SRCS  := $(filter-out cli/serve%.c,$(CLI_SRCS)) cli/static/serve_none.c
endif
endif
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/%.o)
TEST_SRCS := $(sort $(wildcard tests/unit/test_*.c))
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
TEST_HELPER_SRCS := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))
TEST_HELPER_OBJS := $(TEST_HELPER_SRCS:%.c=$(BUILD)/%.o)

LIB      := $(BUILD)/libcolibri.a
BIN      := $(BUILD)/colibri

.PHONY: all test check unit-test integration-test run clean install static size-check deps deps-build deps-test format bench fuzz

all: $(LIB) $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_FLAGS_$(basename $(notdir $<))) $(if $(MINIMAL),$(MIN_OPT_$(if $(filter-out $(MIN_COLD),$(filter $(MIN_HOT),$<)),hot,cold))) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BIN): $(CLI_OBJS) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $(CLI_OBJS) $(LIB) $(LIBS) $(CLI_LIBS) -o $@

# colibri-mpi (mpi/): the same command line on every rank of an MPI job, with the routed
# experts spread over the ranks (docs/SCALE.md). Built only where mpicc is (Debian
# libopenmpi-dev); the library itself never includes mpi.h.
MPICC    ?= mpicc
ifeq ($(CROSS),)
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
endif
ifneq ($(HAVE_MPI),)
MPI_BIN  := $(BUILD)/colibri-mpi
MPI_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard mpi/*.c)))
all: $(MPI_BIN)
$(BUILD)/mpi/%.o: mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -Icli -c $< -o $@
$(MPI_BIN): $(MPI_OBJS) $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJS)) $(LIB)
	$(MPICC) $(CFLAGS) $(LDFLAGS) $(filter %.o,$^) $(LIB) $(LIBS) $(CLI_LIBS) -o $@
endif

$(BUILD)/tests/%: tests/unit/%.c $(TEST_HELPER_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $(LDFLAGS) $< $(TEST_HELPER_OBJS) $(LIB) $(LIBS) $(TESTLIBS) -o $@

# test_embed counts the C library's allocation and file calls (-Wl,--wrap) and compiles the
# example of docs/EMBEDDING.md (the ```c block after its marker comment)
EMBED_WRAP := malloc calloc realloc free posix_memalign aligned_alloc mmap open openat fopen pread stat
$(BUILD)/tests/embed_example.c: docs/EMBEDDING.md
	@mkdir -p $(dir $@)
	awk '/<!-- compiled by tests\/unit\/test_embed.c -->/ {f = 1; next} f == 1 && /^```c$$/ {f = 2; next} \
	     f == 2 && /^```$$/ {f = 3} f == 2 {print}' $< > $@.tmp && mv $@.tmp $@
$(BUILD)/tests/test_embed: $(BUILD)/tests/embed_example.c
$(BUILD)/tests/test_embed: private CFLAGS += -I$(BUILD)/tests
$(BUILD)/tests/test_embed: private LDFLAGS += $(foreach f,$(EMBED_WRAP),-Wl,--wrap=$(f))

# `make test` and `make run` first install what is missing (tools/install-deps.sh: nothing
# happens when all is there; NODEPS=1 skips the check), then build in a second make so that
# no compile starts before the headers exist.
test: deps-test
	@$(MAKE) --no-print-directory check

check: all $(TEST_BINS)
	@RUNNER="$(RUNNER)" sh tests/run_unit.sh $(TEST_BINS)
ifneq ($(CROSS),)
	@for cpu in $(QEMU_CPUS); do echo "kernel tests under QEMU_CPU=$$cpu"; \
	  QEMU_CPU=$$cpu RUNNER="$(RUNNER)" sh tests/run_unit.sh $(KERNEL_TESTS) || exit 1; done
endif
ifeq ($(CROSS),)
	@COLIBRI=$(BIN) PYTHON=$(PYTHON) BUILD=$(BUILD) sh tests/run_integration.sh
endif

unit-test: $(TEST_BINS)
	@RUNNER="$(RUNNER)" sh tests/run_unit.sh $(TEST_BINS)

integration-test: all
	@COLIBRI=$(BIN) PYTHON=$(PYTHON) BUILD=$(BUILD) sh tests/run_integration.sh

MODEL ?= models/colibri-tiny.colibri
PROMPT ?= Once upon a time
run: deps-build
	@$(MAKE) --no-print-directory all
	$(BIN) run -m $(MODEL) -p "$(PROMPT)" -n 64

# A fully static colibri. Debian ships no libcjson.a, so this target builds cJSON from
# Debian's own source package (apt-get source) into the build directory; nothing is
# committed.
# MINIMAL=1 on x86-64 links against musl (Debian's musl-tools: musl-gcc); aarch64 has no
# Debian cross musl, so it links glibc statically (what is left of glibc is most of its size).
SBUILD   := build/$(ARCH)-static$(if $(MINIMAL),-min)
MUSL_CC  := $(if $(and $(MINIMAL),$(filter x86_64,$(ARCH)),$(if $(CROSS),,1)),musl-gcc)
static:
ifeq ($(NODEPS),)
	@sh tools/install-deps.sh $(BUILD_PKGS) $(STATIC_PKGS) $(DEPS_CROSS)
endif
	$(MAKE) STATIC=1 BUILD=$(SBUILD) $(if $(MUSL_CC),CC=$(MUSL_CC)) $(SBUILD)/colibri-static

ifeq ($(MINIMAL),)
$(SBUILD)/colibri-static: $(CLI_OBJS:$(BUILD)/%=$(SBUILD)/%) $(SBUILD)/libcolibri.a $(SBUILD)/cjson/libcjson.a
	$(CC) $(CFLAGS) -static $^ -lpcre2-8 -lutf8proc -lzstd -lcrypto -lz -lm -pthread -ldl -ledit -ltinfo -lbsd -lmd -o $@
	@ls -l $@
else
$(SBUILD)/colibri-static: $(CLI_OBJS:$(BUILD)/%=$(SBUILD)/%) $(SBUILD)/libcolibri.a $(SBUILD)/cjson/libcjson.a
	$(CC) $(CFLAGS) -static -Wl,--gc-sections -Wl,-z,max-page-size=4096 -s $^ -lm -pthread -o $@
	@ls -l $@
endif
# musl-gcc does not search /usr/include: cJSON's header comes from the same source package
ifneq ($(MUSL_CC),)
$(LIB_OBJS) $(CLI_OBJS): $(SBUILD)/cjson/libcjson.a
CFLAGS   += -I$(SBUILD)/cjson/include
endif

$(SBUILD)/cjson/libcjson.a:
	sh tools/build-static-cjson.sh $(dir $@) "$(CC)" "$(AR)" "$(if $(MINIMAL),-ffunction-sections -fdata-sections)"

# The minimal static binary of this ARCH within SIZE_BUDGET bytes, and working: the same ids
# as the full tool on the bundled model, compressed files refused (tests/size_check.sh).
SIZE_BUDGET ?= 1000000
size-check: all
	$(MAKE) --no-print-directory static MINIMAL=1
	@SIZE_BUDGET=$(SIZE_BUDGET) RUNNER="$(RUNNER)" COLIBRI=$(BIN) sh tests/size_check.sh build/$(ARCH)-static-min/colibri-static

FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_LIBS="$(LIBS)" FUZZ_DEFS="$(AES_DEFS)" sh tests/fuzz/run.sh $(FUZZ_SECONDS)

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/colibri.h $(DESTDIR)$(PREFIX)/include/colibri.h
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libcolibri.a
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/colibri
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBS@|$(LIBS)|g' colibri.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/colibri.pc

# Debian packages, by what needs them. BUILD_PKGS: the library and the tool (make, make run);
# TEST_PKGS: the tests (make test): cmocka, the numpy references, clang for the fuzzers,
# Node.js and Chromium for the server's client and page tests, Open MPI for the
# expert-parallel runs; STATIC_PKGS: make static; CROSS_PKGS: make CROSS=aarch64-linux-gnu-.
# "cmd=pkg": pkg only when the command is not already on PATH (a Node.js from elsewhere).
BUILD_PKGS := gcc make libc6-dev libcjson-dev zlib1g-dev libpcre2-dev libutf8proc-dev libedit-dev \
            libmicrohttpd-dev libzstd-dev libssl-dev $(if $(filter x86_64,$(shell uname -m)),libipsec-mb-dev)
TEST_PKGS := libcmocka-dev python3 python3-numpy python3-cryptography zstd clang libclang-rt-14-dev \
            node=nodejs npm=npm chromium openmpi-bin libopenmpi-dev
STATIC_PKGS := dpkg-dev libbsd-dev libmd-dev libncurses-dev musl-tools
CROSS_PKGS := gcc-aarch64-linux-gnu qemu-user libc6:arm64 libcjson-dev:arm64 \
            libcmocka-dev:arm64 zlib1g-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 \
            libedit-dev:arm64 libbsd-dev:arm64 libmd-dev:arm64 libncurses-dev:arm64 \
            libmicrohttpd-dev:arm64 libzstd-dev:arm64 libssl-dev:arm64
DEPS_CROSS := $(if $(CROSS),$(CROSS_PKGS))
deps:
	sh tools/install-deps.sh $(BUILD_PKGS) $(TEST_PKGS) $(STATIC_PKGS) $(DEPS_CROSS)
deps-build:
ifeq ($(NODEPS),)
	@sh tools/install-deps.sh $(BUILD_PKGS) $(DEPS_CROSS)
endif
deps-test:
ifeq ($(NODEPS),)
	@sh tools/install-deps.sh $(BUILD_PKGS) $(TEST_PKGS) $(DEPS_CROSS)
endif

format:
	clang-format -i $(wildcard include/*.h src/*.c src/*/*.[ch] cli/*.[ch] tests/unit/*.[ch])

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d)
