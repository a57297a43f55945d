# tern: plain Makefile. `make help` lists the targets.
# Portable by default (runtime ISA dispatch; no -march=native). Per-file ISA flags below.
# CI=true (set by CI) turns warnings into errors.

# `make deps`: scripts/deps.sh. With other goals and none of them a test (make deps run, make deps
# lib), only the build packages; with a test goal (make deps test) or alone, the test tools too.
# The packages must be in place before anything compiles, so with deps among the goals the script
# runs while this Makefile is read (its output on stderr), before any rule and before the
# compiler is asked for its target; the build that follows runs in parallel like any other.
# (`make -n deps ...` runs it too.)
DEPS_GOALS := $(filter-out deps,$(MAKECMDGOALS))
ifneq ($(filter deps,$(MAKECMDGOALS)),)
ifeq ($(MAKELEVEL),0)
DEPS_STATUS := $(shell sh scripts/deps.sh $(if $(DEPS_GOALS),$(if $(findstring test,$(DEPS_GOALS)),,--build)) 1>&2; echo $$?)
ifneq ($(DEPS_STATUS),0)
$(error scripts/deps.sh failed (exit $(DEPS_STATUS)); the messages above say which package)
endif
endif
endif

CC      ?= cc
ARCH    := $(shell $(CC) -dumpmachine | cut -d- -f1)
MODE    ?= rel
SHARED  ?= $(if $(TERN_SHARED),$(TERN_SHARED),../shared)
MODEL   ?= models/stories260K.gguf
PREFIX  ?= /usr/local

# One goal (deps aside), or none: the build runs on every CPU unless the command line gives -j
# (a command-line -j wins over this one; sub-makes share the top make's job slots). Several
# goals (make clean all) run one at a time, in the order given, as make does by default.
ifeq ($(MAKELEVEL),0)
ifeq ($(word 2,$(filter-out deps,$(MAKECMDGOALS))),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
endif

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
ifeq ($(CI),true)
WARN    += -Werror
endif
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -g $(WARN) -ffp-contract=off -fno-math-errno -pthread \
               -Iinclude -Isrc -MMD -MP
OPT_rel   := -O2
# float-cast-overflow: an out-of-range float-to-integer conversion (a number from a file, a flag
# or a request) aborts; gcc's -fsanitize=undefined leaves this check out
OPT_debug := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow \
             -fno-sanitize-recover=undefined,float-cast-overflow -DTERN_DEBUG
OPT_native := -O2 -march=native
# ThreadSanitizer (make test-tsan): races between the threads of the pool, the server's slots and
# several models in one process
OPT_tsan  := -O1 -fno-omit-frame-pointer -fsanitize=thread -DTERN_DEBUG
CFLAGS  ?=
ALL_CFLAGS = $(BASE_CFLAGS) $(OPT_$(MODE)) $(CFLAGS)
LDFLAGS_debug := -fsanitize=address,undefined
LDFLAGS_tsan  := -fsanitize=thread
LDLIBS  := -lutf8proc -lm -pthread
TEST_LDLIBS := -lcmocka -lcjson

B := build/$(MODE)
ifeq ($(MODE),rel)
TERN_BIN := tern
TEST_BIN := tests/run
else
TERN_BIN := $(B)/tern
TEST_BIN := $(B)/tests/run
endif

# ---- sources ----------------------------------------------------------------------------------
LIB_SRC := $(shell find src -name '*.c' -not -path 'src/kernels/x86/*' -not -path 'src/kernels/arm/*' -not -path 'src/model/x86/*' -not -path 'src/runtime/x86/*' -not -path 'src/sampling/x86/*' | sort)
ifeq ($(ARCH),x86_64)
LIB_SRC += $(sort $(wildcard src/kernels/x86/*.c)) $(sort $(wildcard src/model/x86/*.c)) $(sort $(wildcard src/runtime/x86/*.c)) \
           $(sort $(wildcard src/sampling/x86/*.c))
endif
ifeq ($(ARCH),aarch64)
LIB_SRC += $(sort $(wildcard src/kernels/arm/*.c))
endif
TOOL_SRC := $(sort $(wildcard tools/*.c))
TEST_SRC := $(sort $(wildcard tests/*.c))
SUITES   := $(patsubst tests/test_%.c,%,$(filter tests/test_%.c,$(TEST_SRC)))

LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(B)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(B)/%.o)
LIB_A    := $(B)/libtern.a
# server/ (owner: app): an archive, so programs and tests pull only the objects they reference
SERVER_SRC := $(sort $(wildcard server/*.c))
SERVER_OBJ := $(SERVER_SRC:%.c=$(B)/%.o)
SERVER_A   := $(B)/libtern_server.a
# shared library for `make install` (owner: app): a separate -fPIC object set
TERN_VERSION := $(shell sed -n 's/^\#define TERN_VERSION "\(.*\)"/\1/p' include/tern.h)
TERN_SOMAJOR := 0
PIC_OBJ := $(LIB_SRC:%.c=$(B)/pic/%.o)
LIB_SO  := $(B)/libtern.so.$(TERN_VERSION)
LIBDIR  ?= $(PREFIX)/lib

# Per-file ISA flags: each ISA file is compiled with only its own -m flags.
$(B)/src/kernels/x86/avx2.o:       ISA_FLAGS := -mavx2 -mfma -mf16c
$(B)/src/kernels/x86/avx512vnni.o: ISA_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
$(B)/src/kernels/x86/avxvnni.o:    ISA_FLAGS := -mavx2 -mfma -mf16c -mavxvnni
$(B)/src/kernels/x86/amx.o:        ISA_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mamx-tile -mamx-int8
$(B)/src/model/x86/attn_avx2.o:    ISA_FLAGS := -mavx2 -mf16c
$(B)/src/model/x86/attn_avx512.o:  ISA_FLAGS := -mavx2 -mf16c -mavx512f -mavx512vl
$(B)/src/model/x86/gdn_avx2.o:     ISA_FLAGS := -mavx2
$(B)/src/model/x86/gdn_avx512.o:   ISA_FLAGS := -mavx2 -mavx512f
$(B)/src/model/x86/hadamard_avx2.o: ISA_FLAGS := -mavx2
$(B)/src/runtime/x86/membw_avx2.o: ISA_FLAGS := -mavx2
$(B)/src/kernels/x86/act_avx2.o:   ISA_FLAGS := -mavx2
$(B)/src/kernels/x86/act_avx512.o: ISA_FLAGS := -mavx2 -mavx512f -mavx512bw -mavx512vl -mavx512dq
$(B)/src/sampling/x86/passes_avx2.o: ISA_FLAGS := -mavx2
$(B)/src/kernels/arm/neon.o:       ISA_FLAGS := -march=armv8-a
$(B)/src/kernels/arm/neon_dot.o:   ISA_FLAGS := -march=armv8.2-a+dotprod
$(B)/src/kernels/arm/neon_i8mm.o:  ISA_FLAGS := -march=armv8.2-a+dotprod+i8mm

.PHONY: all help test test-python lib run bench debug test-debug test-tsan native deps clean install fuzz cross-aarch64 test-aarch64

all: $(TERN_BIN)

help:
	@echo "make              build ./tern (portable, runtime ISA dispatch)"
	@echo "make deps         install/check build dependencies (Debian packages)"
	@echo "make run          build and generate text on the default model (MODEL=$(MODEL))"
	@echo "make test         build and run the test suite (tests/run; T='gguf kernels' selects suites)"
	@echo "make test-python  the Python package's tests (pytest, python/tests; also part of make test)"
	@echo "make lib          build/rel/libtern.so for the Python package (python/, docs/PYTHON.md)"
	@echo "make debug        build with ASan+UBSan into build/debug"
	@echo "make test-debug   run the test suite under ASan+UBSan"
	@echo "make test-tsan    run the threaded suites under ThreadSanitizer (T=suites to choose)"
	@echo "make native       build with -march=native into build/native"
	@echo "make bench        kernel and model benchmarks (see bench/RESULTS.md)"
	@echo "make fuzz         run the fuzzers: GGUF reader (FUZZ_SECONDS=60); server requests, tokenizers, tokenizer import (FUZZ_SHORT_SECONDS=30 each)"
	@echo "make cross-aarch64 / test-aarch64   ARM64 build and tests under qemu"
	@echo "make install PREFIX=/usr/local      install libtern, tern.h, pkg-config file"
	@echo "make load-test    bounded load test of tern serve (LOAD_SECONDS=60, LOAD_MODEL=synthetic 1.7B, LOAD_MODELS_MB=its F32 and F16 8-block copies)"
	@echo "make clean        remove build/, ./tern and tests/run"

deps:   # scripts/deps.sh ran while the Makefile was read (top of this file)
	@:

$(B)/tools/win/%.o: ALL_CFLAGS += -Itools
$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ISA_FLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SERVER_A): $(SERVER_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

ifneq ($(WIN),1)   # the Windows build links its own way (below)
$(TERN_BIN): $(TOOL_OBJ) $(SERVER_A) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS_$(MODE)) $(TOOL_OBJ) $(SERVER_A) $(LIB_A) $(LDLIBS) -lcjson -lmicrohttpd -o $@
endif

# Test runner: suites are discovered from tests/test_<name>.c (each defines suite_<name>).
$(B)/tests/suites.inc: $(TEST_SRC) Makefile
	@mkdir -p $(dir $@)
	@printf '%s\n' $(foreach s,$(SUITES),"SUITE($(s))") > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(B)/tests/main.o: $(B)/tests/suites.inc
$(B)/tests/main.o: ALL_CFLAGS += -I$(B)/tests

# kern: the AVX-512 VNNI kernel compiled once more over a portable zmm emulation
# (src/kernels/x86/emu512.h), the AVX-VNNI kernel over a scalar vpdpbusd (KERN_EMUVNNI) and the
# AMX kernel over scalar tile operations and the zmm emulation (KERN_EMUAMX), into
# the tests only, so hosts without AVX-512 or AVX-VNNI still check their logic.
ifeq ($(ARCH),x86_64)
KERN_EMU_OBJ := $(B)/src/kernels/x86/avx512vnni_emu.o $(B)/src/kernels/x86/avxvnni_emu.o $(B)/src/kernels/x86/amx_emu.o
$(B)/src/kernels/x86/avx512vnni_emu.o: src/kernels/x86/avx512vnni.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx2 -mfma -mf16c -DKERN_EMU512 -c $< -o $@
$(B)/src/kernels/x86/avxvnni_emu.o: src/kernels/x86/avxvnni.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx2 -mfma -mf16c -DKERN_EMUVNNI -c $< -o $@
$(B)/src/kernels/x86/amx_emu.o: src/kernels/x86/amx.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx2 -mfma -mf16c -DKERN_EMUAMX -c $< -o $@
endif

ifneq ($(WIN),1)
$(TEST_BIN): $(TEST_OBJ) $(KERN_EMU_OBJ) $(SERVER_A) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS_$(MODE)) $(TEST_OBJ) $(KERN_EMU_OBJ) $(SERVER_A) $(LIB_A) $(LDLIBS) $(TEST_LDLIBS) -lmicrohttpd -o $@
endif

# The install test (tests/test_chat.c) runs `make install` into a temporary PREFIX: the shared
# library is built first so that it only copies files. In the rel build `make test` also runs the
# Python package's tests (python/tests, against build/rel/libtern.so) after the C suites, and
# scripts/test.sh ends with the summed closing line; T='tok python' selects suites, `python` the
# Python tests.
test: $(TEST_BIN) $(TERN_BIN) $(if $(filter rel,$(MODE)),$(B)/libtern.so)
	TERN_SHARED=$(SHARED) TERN_BIN=./$(TERN_BIN) TERN_LIB= sh scripts/test.sh ./$(TEST_BIN) $(if $(filter rel,$(MODE)),1,0) $(T)

# Only the Python tests (pytest over python/tests; needs the tern binary for the CLI comparisons).
test-python: $(TERN_BIN) $(B)/libtern.so
	TERN_SHARED=$(SHARED) TERN_BIN=./$(TERN_BIN) TERN_LIB= sh scripts/test.sh ./$(TEST_BIN) 1 python

run: $(TERN_BIN)
	@if [ -f "$(MODEL)" ]; then ./$(TERN_BIN) run -m "$(MODEL)" -p "Once upon a time" -n 200 --echo; \
	else echo "make run: no model at $(MODEL) (models/stories260K.gguf ships with the repository); give MODEL=path/to/model.gguf" >&2; exit 1; fi

debug:
	$(MAKE) MODE=debug build/debug/tern build/debug/tests/run

test-debug:
	$(MAKE) MODE=debug test

# The suites whose threads share state, under ThreadSanitizer (~17 min on 2 cores; T= picks others).
# A race report makes the runner exit non-zero (TSan's exit code 66), which fails the recipe.
TSAN_SUITES := pool engine gen spec server server_mixed server_http model qwen35
test-tsan:
	$(MAKE) MODE=tsan test T='$(or $(T),$(TSAN_SUITES))'

native:
	$(MAKE) MODE=native build/native/tern

bench: $(TERN_BIN)
	./$(TERN_BIN) bench-kernel
	@if [ -f "$(MODEL)" ]; then ./$(TERN_BIN) bench -m "$(MODEL)"; fi

# ---- ARM64: cross build and tests under qemu-user (owner: arm) --------------------------------
# `make cross-aarch64` builds build/aarch64/tern and build/aarch64/tests/run with the cross
# compiler (the arm64 -dev packages come from Debian multiarch: `sh scripts/deps.sh --cross`).
# `make test-aarch64` runs them under qemu once per forced ARM path plus the dispatcher checks
# (scripts/test_aarch64.sh); T='kernels arm' limits the suites of every pass.
CROSS_AARCH64 ?= aarch64-linux-gnu-
# qemu without -L: the cross sysroot's libc (libc6-arm64-cross 2.36-8) hangs in pthread_create under
# qemu-user 7.2; the multiarch libc6:arm64 (pulled in by deps.sh --cross) at /lib works.
QEMU_AARCH64  ?= qemu-aarch64
B_AARCH64     := build/aarch64

# aarch64-linux-gnu-gcc 12.2 (Debian 12.2.0-14) crashes (ICE in vect_transform_reduction) when
# it vectorises the fmax reduction over doubles in tests/test_qtypes.c: no loop vectorisation
# for that one test file in the cross build.
$(B_AARCH64)/tests/test_qtypes.o: ISA_FLAGS := -fno-tree-loop-vectorize

cross-aarch64:
	$(MAKE) CC=$(CROSS_AARCH64)gcc AR=$(CROSS_AARCH64)ar MODE=rel B=$(B_AARCH64) \
		TERN_BIN=$(B_AARCH64)/tern TEST_BIN=$(B_AARCH64)/tests/run $(B_AARCH64)/tern $(B_AARCH64)/tests/run

test-aarch64: cross-aarch64
	TERN_SHARED=$(SHARED) QEMU="$(QEMU_AARCH64)" sh scripts/test_aarch64.sh $(B_AARCH64)/tests/run $(T)

# ---- Windows x86-64: cross build with mingw-w64, tests under wine --------------------------------
# `make windows` builds build/win/tern.exe, build/win/libtern.dll (+ libtern.dll.a, the import
# library) and build/win/tests/run.exe with the posix-threads mingw-w64 gcc (winpthreads), linked
# statically so that wine (or Windows) needs no mingw DLL beside them. utf8proc, cJSON and cmocka
# are cross-compiled from Debian's source packages by scripts/win_deps.sh into build/win/deps.
# No server: libmicrohttpd has no mingw build here, so tools/serve.c and server/ are left out and
# `tern serve` says so (tools/win/serve_none.c). The test runner holds the suites of WIN_SUITES.
# `make test-windows` runs them and the CLI golden check under wine (scripts/test_windows.sh).
WIN_CC     ?= x86_64-w64-mingw32-gcc-posix
WIN_AR     ?= x86_64-w64-mingw32-ar
B_WIN      := build/win
WIN_SUITES ?= kernels kernels_mv kernels_wide gguf tok golden
WIN_DEFS   := CC=$(WIN_CC) AR=$(WIN_AR) MODE=rel B=$(B_WIN) WIN=1 TERN_BIN=$(B_WIN)/tern.exe \
              TEST_BIN=$(B_WIN)/tests/run.exe
ifeq ($(WIN),1)
BASE_CFLAGS += -D_FILE_OFFSET_BITS=64 -D__USE_MINGW_ANSI_STDIO=1 -DUTF8PROC_STATIC -DCJSON_HIDE_SYMBOLS \
               -I$(B_WIN)/deps/include
LDLIBS      := -L$(B_WIN)/deps/lib -lutf8proc -lcjson -lm -pthread -static
TOOL_SRC    := $(filter-out tools/serve.c,$(TOOL_SRC)) tools/win/serve_none.c
SUITES      := $(WIN_SUITES)
TEST_SRC    := tests/main.c tests/model_fx.c $(foreach s,$(WIN_SUITES),tests/test_$(s).c)
TOOL_OBJ    := $(TOOL_SRC:%.c=$(B)/%.o)
TEST_OBJ    := $(TEST_SRC:%.c=$(B)/%.o)
endif
.PHONY: windows test-windows
windows:
	sh scripts/win_deps.sh $(B_WIN)/deps
	$(MAKE) $(WIN_DEFS) $(B_WIN)/tern.exe $(B_WIN)/libtern.dll $(B_WIN)/tests/run.exe

test-windows: windows
	TERN_SHARED=$(SHARED) sh scripts/test_windows.sh $(B_WIN)

$(B_WIN)/tern.exe: $(TOOL_OBJ) $(LIB_A)
	$(CC) $(ALL_CFLAGS) $(TOOL_OBJ) $(LIB_A) $(LDLIBS) -o $@

$(B_WIN)/tests/run.exe: $(TEST_OBJ) $(KERN_EMU_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(TEST_OBJ) $(KERN_EMU_OBJ) $(LIB_A) $(LDLIBS) -lcmocka -o $@

# The DLL exports only the tern_* API (a .def file), like the version script of libtern.so.
$(B_WIN)/libtern.def: include/tern.h Makefile
	@mkdir -p $(dir $@)
	{ echo EXPORTS; sed -n 's/^[a-z].*[ *]\(tern_[a-z0-9_]*\)(.*/    \1/p' include/tern.h | sort -u; } > $@

$(B_WIN)/libtern.dll: $(LIB_OBJ) $(B_WIN)/libtern.def
	$(CC) -shared $(LIB_OBJ) $(B_WIN)/libtern.def -Wl,--out-implib,$(B_WIN)/libtern.dll.a $(LDLIBS) -o $@

# ---- install: libtern.a, libtern.so, tern.h, tern.pc, the tern binary (owner: app) ----------
# The shared library is built from a separate -fPIC object set (build/<mode>/pic) and exports
# only the tern_* API (version script). `make install PREFIX=/opt/tern [DESTDIR=...]`.

$(B)/pic/src/kernels/x86/avx2.o:       ISA_FLAGS := -mavx2 -mfma -mf16c
$(B)/pic/src/kernels/x86/avx512vnni.o: ISA_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
$(B)/pic/src/kernels/x86/avxvnni.o:    ISA_FLAGS := -mavx2 -mfma -mf16c -mavxvnni
$(B)/pic/src/kernels/x86/amx.o:        ISA_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mamx-tile -mamx-int8
$(B)/pic/src/model/x86/attn_avx2.o:    ISA_FLAGS := -mavx2 -mf16c
$(B)/pic/src/model/x86/attn_avx512.o:  ISA_FLAGS := -mavx2 -mf16c -mavx512f -mavx512vl
$(B)/pic/src/model/x86/gdn_avx2.o:     ISA_FLAGS := -mavx2
$(B)/pic/src/model/x86/gdn_avx512.o:   ISA_FLAGS := -mavx2 -mavx512f
$(B)/pic/src/model/x86/hadamard_avx2.o: ISA_FLAGS := -mavx2
$(B)/pic/src/runtime/x86/membw_avx2.o: ISA_FLAGS := -mavx2
$(B)/pic/src/kernels/x86/act_avx2.o:   ISA_FLAGS := -mavx2
$(B)/pic/src/kernels/x86/act_avx512.o: ISA_FLAGS := -mavx2 -mavx512f -mavx512bw -mavx512vl -mavx512dq
$(B)/pic/src/sampling/x86/passes_avx2.o: ISA_FLAGS := -mavx2
$(B)/pic/src/kernels/arm/neon.o:       ISA_FLAGS := -march=armv8-a
$(B)/pic/src/kernels/arm/neon_dot.o:   ISA_FLAGS := -march=armv8.2-a+dotprod
$(B)/pic/src/kernels/arm/neon_i8mm.o:  ISA_FLAGS := -march=armv8.2-a+dotprod+i8mm

$(B)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ISA_FLAGS) -fPIC -c $< -o $@

$(B)/libtern.map: Makefile
	@mkdir -p $(dir $@)
	printf '{\n  global: tern_*;\n  local: *;\n};\n' > $@

$(LIB_SO): $(PIC_OBJ) $(B)/libtern.map
	$(CC) -shared $(LDFLAGS_$(MODE)) -Wl,-soname,libtern.so.$(TERN_SOMAJOR) -Wl,--version-script=$(B)/libtern.map \
		-Wl,--no-undefined $(PIC_OBJ) $(LDLIBS) -lcjson -o $@

# The name the Python package (python/tern) and other dlopen users look for: build/<mode>/libtern.so.
$(B)/libtern.so: $(LIB_SO)
	ln -sf $(notdir $(LIB_SO)) $@

lib: $(B)/libtern.so

$(B)/tern.pc: tern.pc.in include/tern.h Makefile
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(TERN_VERSION)|g' tern.pc.in > $@

.PHONY: $(B)/tern.pc
install: $(LIB_A) $(LIB_SO) $(TERN_BIN) $(B)/tern.pc
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libtern.a
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libtern.so.$(TERN_VERSION)
	ln -sf libtern.so.$(TERN_VERSION) $(DESTDIR)$(LIBDIR)/libtern.so.$(TERN_SOMAJOR)
	ln -sf libtern.so.$(TERN_SOMAJOR) $(DESTDIR)$(LIBDIR)/libtern.so
	install -m 644 include/tern.h $(DESTDIR)$(PREFIX)/include/tern.h
	install -m 644 $(B)/tern.pc $(DESTDIR)$(LIBDIR)/pkgconfig/tern.pc
	install -m 755 $(TERN_BIN) $(DESTDIR)$(PREFIX)/bin/tern

# Bounded load test of `tern serve` (owner: app): loopback only, stops by itself (~9 min). A
# 16-client streaming soak (errors, RSS growth) on the synthetic qwen3-tiny golden model, and
# the throughput sweep at 1, 2, 4, 8 parallel sequences, on a synthetic Bonsai 1.7B (made by tern
# synth) and again on memory-bound models (LOAD_MODELS_MB: F32 and F16 copies of 8 of its blocks):
# steady-state decode tokens/s (the server's pure decode steps), end-to-end tokens/s, TTFT and
# TPOT percentiles, for chat prompts of ~150-190 tokens and max_tokens 128 (LOAD_SWEEP_SECONDS
# per level), or LOAD_MODEL=... / LOAD_MODELS_MB=... / LOAD_SOAK_MODEL=...
LOAD_MODEL   ?= build/load/bonsai-1.7b-pq2_0.gguf
LOAD_MODELS_MB ?= build/load/bonsai-1.7b-8l-f32.gguf build/load/bonsai-1.7b-8l-f16.gguf
LOAD_SOAK_MODEL ?= $(SHARED)/golden/qwen3-tiny-pq2_0/qwen3-tiny-pq2_0.gguf
LOAD_SECONDS ?= 60
LOAD_THREADS ?= 2
LOAD_SWEEP_SECONDS ?= 20
LOAD_SWEEP_MAX_TOKENS ?= 128
build/load/bonsai-1.7b-pq2_0.gguf: | $(TERN_BIN)
	@mkdir -p $(dir $@)
	./$(TERN_BIN) synth --arch bonsai-1.7b --type pq2_0 -o $@
# The memory-bound models of the sweep (the 2.5x aggregate target is stated for one): the synthetic
# 1.7B's shapes, 8 blocks, every projection converted by tern quantize to F32 (2.86 GB read per
# token) and to F16 (1.43 GB). On an AVX2 host without VNNI a ternary forward over 4 columns is
# compute-bound (bench/RESULTS.md); an F32 one is not, an F16 one is in part (its conversions share
# the FMA ports: `tern bench-kernel --f16`).
build/load/bonsai-1.7b-8l-%.gguf: | $(TERN_BIN)
	@mkdir -p $(dir $@)
	./$(TERN_BIN) synth --arch bonsai-1.7b --type pq2_0 --n-layer 8 -o $@.pq2_0.tmp
	./$(TERN_BIN) quantize $@.pq2_0.tmp $@ --type $*
	rm -f $@.pq2_0.tmp

.PHONY: load-test
load-test: $(TERN_BIN) $(filter build/load/%,$(LOAD_MODEL) $(LOAD_MODELS_MB))
	node tests/server/load.mjs --tern ./$(TERN_BIN) --model $(LOAD_MODEL) --soak-model $(LOAD_SOAK_MODEL) \
		--clients 16 --seconds $(LOAD_SECONDS) --sweep 1,2,4,8 --threads $(LOAD_THREADS) \
		--sweep-seconds $(LOAD_SWEEP_SECONDS) --sweep-max-tokens $(LOAD_SWEEP_MAX_TOKENS)
	for m in $(LOAD_MODELS_MB); do \
		node tests/server/load.mjs --tern ./$(TERN_BIN) --model $$m --skip-soak 1 \
			--sweep 1,2,4,8 --threads $(LOAD_THREADS) --label "memory-bound model $$m" \
			--sweep-seconds $(LOAD_SWEEP_SECONDS) --sweep-max-tokens $(LOAD_SWEEP_MAX_TOKENS) || exit 1; \
	done

# libFuzzer targets (fuzz/run.sh; clang + ASan/UBSan): the GGUF reader (owner: gguf) for
# FUZZ_SECONDS; the server's request parsers, the tokenizers with the chat templates, and the
# tokenizer.json import for FUZZ_SHORT_SECONDS each (30 by default).
FUZZ_SECONDS ?= 60
fuzz:
	TERN_SHARED=$(SHARED) sh fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf build tern tests/run

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(KERN_EMU_OBJ:.o=.d) $(SERVER_OBJ:.o=.d) $(PIC_OBJ:.o=.d)
