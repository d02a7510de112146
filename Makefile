# cltrain: one non-recursive Makefile. Objects live under build/.
#   make            build build/cltrain and build/libcltrain.a
#   make test       install missing Debian packages, build, run the suite
#   make test-gpu-class  the device tests again with the kernel shapes a GPU gets (CI runs it)
#   make run        install, build, train mnist-cnn on Fashion-MNIST for one epoch
#   make bench      install PyTorch and OpenBLAS, then cltrain bench kernels, train,
#                   pipeline, MPI scaling and the race against PyTorch 2 (its venv from
#                   PyPI, tools/setup-pytorch2.sh; skipped without the network)
#   make asan|tsan  the suite under AddressSanitizer / ThreadSanitizer
#   make fuzz       libFuzzer harnesses of every loader: regression inputs, then a short run each
CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
PKGS    := OpenCL clblast zlib libcurl libcrypto libturbojpeg
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
           -Iinclude -I$(BUILD) -DCL_TARGET_OPENCL_VERSION=120 \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -pthread
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lOpenCL -lclblast -lz -lcurl -lcrypto -lturbojpeg) -ldl -lstdc++ -lm -pthread
# MPI (data-parallel training over mpirun) when mpicc is found; make MPI=0 turns it off
MPI     ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
CFLAGS  += -DCT_MPI $(shell mpicc --showme:compile 2>/dev/null || echo -I/usr/lib/x86_64-linux-gnu/openmpi/include)
LDLIBS  += $(shell mpicc --showme:link 2>/dev/null || echo -lmpi)
endif
SAN     ?=
CFLAGS  += $(SAN)
LDFLAGS += $(SAN)

LIB_SRC  := $(sort $(wildcard src/util/*.c src/cl/*.c src/nn/*.c src/nn/layers/*.c src/optim/*.c src/data/*.c \
                              src/pipe/*.c src/train/*.c src/ref/*.c src/dist/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
KERNELS  := $(sort $(wildcard kernels/*.cl))
MODELS   := $(sort $(wildcard models/*.cfg))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/kernels_embed.o $(BUILD)/models_embed.o
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
DEPS     := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTS:=.d)

.PHONY: all test check run bench asan tsan install clean deps bench-deps
all: $(BUILD)/cltrain $(TESTS) $(BUILD)/tools/make-cifar $(BUILD)/tools/make-font-dataset $(BUILD)/tools/ckpt-diff \
     $(BUILD)/tools/sgemm-limit

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# Kernels are embedded as byte arrays (C11 string literals are only
# guaranteed to 4095 characters); CLTRAIN_KERNEL_DIR reads them from disk.
$(BUILD)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -Wall -Wextra $< -o $@
# a generator of small learnable CIFAR-format sets, for the tests
$(BUILD)/tools/make-cifar: tools/make-cifar.c $(BUILD)/libcltrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libcltrain.a $(LDFLAGS) -o $@ -lm
# a renderer of font-classification image sets from the Debian CJK fonts
$(BUILD)/tools/make-font-dataset: tools/make-font-dataset.c $(BUILD)/libcltrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libcltrain.a $(LDFLAGS) -o $@ -lm

# JPEG decoding speed, stb_image against TurboJPEG (BENCHMARKS.md; not in `all`)
$(BUILD)/tools/bench-jpeg: tools/bench-jpeg.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LDFLAGS) -o $@ -lturbojpeg -lm

# the machine's SGEMM speed from OpenBLAS, loaded at run time (cltrain bench kernels)
$(BUILD)/tools/sgemm-limit: tools/sgemm-limit.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra $< -o $@ -ldl

# parameter distance between two checkpoints (tests/mpi.sh)
$(BUILD)/tools/ckpt-diff: tools/ckpt-diff.c $(BUILD)/libcltrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libcltrain.a $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/kernels_embed.c: $(BUILD)/tools/embed $(KERNELS)
	$(BUILD)/tools/embed $@ ct_embedded_kernels $(KERNELS)
$(BUILD)/models_embed.c: $(BUILD)/tools/embed $(MODELS)
	$(BUILD)/tools/embed $@ ct_embedded_models $(MODELS)
$(BUILD)/%_embed.o: $(BUILD)/%_embed.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libcltrain.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/cltrain: $(CLI_OBJ) $(BUILD)/libcltrain.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(BUILD)/tests/%: tests/%.c $(BUILD)/libcltrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -MMD -MP $< $(BUILD)/libcltrain.a $(LDFLAGS) $(LDLIBS) -lcmocka -o $@

# libFuzzer harnesses, one per loader: every tests/fuzz/fuzz_NAME.c is one (a new
# loader's harness needs no change here), with its seeds in tests/fuzz/corpus/NAME
# and the inputs that once failed in tests/fuzz/regress/NAME. Built with clang,
# ASan and UBSan (any report aborts) into build-fuzz/; `make fuzz` replays the
# regression inputs, then runs each harness FUZZ_TIME seconds (tests/fuzz/run.sh).
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZERS   := $(patsubst tests/fuzz/%.c,build-fuzz/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TIME ?= 10
.PHONY: fuzz fuzz-build
fuzz: deps fuzz-build
	tests/fuzz/run.sh build-fuzz $(FUZZ_TIME)
fuzz-build:
	$(MAKE) BUILD=build-fuzz CC=clang MPI=0 SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" $(FUZZERS)
build-fuzz/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(BUILD)/libcltrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -Itests/fuzz $< $(BUILD)/libcltrain.a $(LDFLAGS) $(LDLIBS) -o $@

deps:
	@tools/setup-deps.sh
bench-deps:
	@tools/setup-deps.sh --bench

# the suite, plus the ring and pipeline tests again under ThreadSanitizer
test: deps
	$(MAKE) all
	$(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" build-tsan/tests/test_ring build-tsan/tests/test_pipeline
	CLTRAIN_TSAN_BUILD=build-tsan tests/run.sh $(BUILD)
check: all
	tests/run.sh $(BUILD)

# The device tests again in class gpu (CLTRAIN_DEVICE_CLASS=gpu): the kernel
# shapes a GPU gets, run on PoCL. The kernel tests run the GPU defaults
# (gemm_local.cl); the training tests (pipeline, checkpoint resume, MPI, the
# command line's runs) take the register GEMM at class gpu's work-groups
# (CLTRAIN_GEMM), since gemm_local.cl needs about 20x the CPU time of the
# register GEMM on PoCL (BENCHMARKS.md) and
# they train hundreds of steps; everything else in them is class gpu's.
# Kernel tests: every cmocka test that opens a device (CT_NEED_CL), but the pipeline's.
GPU_CLASS_KERNEL_TESTS := $(filter-out test_pipeline,$(basename $(notdir $(shell grep -l CT_NEED_CL tests/test_*.c))))
GPU_CLASS_TRAIN_TESTS := test_pipeline checkpoint.sh mpi.sh cli.sh
.PHONY: test-gpu-class
test-gpu-class: all
	CLTRAIN_DEVICE_CLASS=gpu CLTRAIN_TESTS="$(GPU_CLASS_KERNEL_TESTS)" tests/run.sh $(BUILD)
	CLTRAIN_DEVICE_CLASS=gpu CLTRAIN_GEMM=4,1,128 CLTRAIN_TESTS="$(GPU_CLASS_TRAIN_TESTS)" tests/run.sh $(BUILD)

run: deps
	$(MAKE) all
	$(BUILD)/cltrain fashion-mnist --epochs 1

bench: bench-deps
	$(MAKE) all
	$(BUILD)/cltrain bench kernels
	$(BUILD)/cltrain bench train
	$(BUILD)/cltrain bench pipeline
	tools/bench-mpi.sh $(BUILD)
	tools/bench-pytorch.sh $(BUILD)

# Sanitizer builds go to their own folders; the suite runs on PoCL there too.
asan: deps
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" all
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 CLTRAIN_SAN=asan tests/run.sh build-asan
tsan: deps
	$(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" all
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1" CLTRAIN_SAN=tsan tests/run.sh build-tsan

install: $(BUILD)/cltrain
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/cltrain/models
	install -m 755 $(BUILD)/cltrain $(DESTDIR)$(PREFIX)/bin/cltrain
	install -m 644 models/*.cfg $(DESTDIR)$(PREFIX)/share/cltrain/models/

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(DEPS)
