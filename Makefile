# Oversell lab build. Layered flags (user CFLAGS add, never clobber), objects
# under $(BUILD)/, header deps via -MMD, sanitizers chosen by SANITIZER=.
#   make            build services, loadgen, tools and tests
#   make test       unit + integration tests (own MariaDB/Redis on free ports)
#   make asan/tsan  the same tests under AddressSanitizer+UBSan / ThreadSanitizer
#   make fuzz       libFuzzer over the HTTP edge and request parsing (clang,
#                   FUZZ_TIME=300 s; `make test` runs it 20 s via tests/checks)
#   make demo       the comparison demo          make bench   benchmarks
#   make compose-test  the lab under docker-compose on a real engine (root;
#                   starts a private dockerd when none answers): every
#                   guard, one fault per family, a single-node swarm
#   make swarm-test a three-node swarm on this host (root; deploy/swarm/nodes),
#                   sale bursts per guard, one worker node killed under load
#   V=1             show full commands

CC       ?= cc
STD      := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
OPT      ?= -O2
DEBUG    := -g
PKGS     := libmicrohttpd jansson hiredis libcurl mysqlclient
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
TEST_LIBS  := $(shell pkg-config --libs cmocka)
# libzookeeper-mt-dev ships no pkg-config file; THREADED exposes the
# synchronous calls of the multi-threaded client.
ZK_CFLAGS  := -I/usr/include/zookeeper -DTHREADED
ZK_LIBS    := -lzookeeper_mt

SANITIZER ?=
ifeq ($(SANITIZER),address)
  SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  BUILD     ?= build-asan
else ifeq ($(SANITIZER),fuzzer)
  # lib/ instrumented for libFuzzer; only the fuzz target links the driver.
  SAN_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  BUILD     ?= build-fuzz
else ifeq ($(SANITIZER),thread)
  SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
  BUILD     ?= build-tsan
else
  SAN_FLAGS :=
  BUILD     ?= build
endif

FINAL_CFLAGS  = $(STD) $(WARN) $(OPT) $(DEBUG) $(SAN_FLAGS) $(PKG_CFLAGS) $(ZK_CFLAGS) -Ilib -MMD -MP $(CFLAGS)
FINAL_LDFLAGS = $(SAN_FLAGS) $(LDFLAGS)
FINAL_LIBS    = $(PKG_LIBS) $(ZK_LIBS) -lpthread -lm $(LIBS)

ifeq ($(V),1)
  Q :=
else
  Q := @
endif

# lib/ has four layers, each including only the ones below it:
# guards -> stock -> locks -> base (tests/checks/test_layers.sh keeps it so);
# lib/guards/ holds only guards (a file, or a folder with the guard and its
# private helpers); what several guards share is in lib/guards/core/.
LIB_SRC  := $(wildcard lib/base/*.c lib/locks/*.c lib/stock/*.c lib/guards/*.c lib/guards/*/*.c)
INV_SRC  := $(wildcard services/inventory/*.c)
ORD_SRC  := $(wildcard services/order/*.c)
LG_SRC   := $(filter-out loadtest/loadgen/main.c,$(wildcard loadtest/loadgen/*.c))
TOOL_SRC := $(wildcard loadtest/tools/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
IT_SRC   := $(wildcard tests/integration/test_*.c)
IT_HELP  := $(filter-out $(IT_SRC),$(wildcard tests/integration/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBLAB := $(BUILD)/liblab.a
LIBLG  := $(BUILD)/liblg.a
BINS   := $(BUILD)/bin/inventory $(BUILD)/bin/order
ifneq ($(wildcard loadtest/loadgen/main.c),)
  BINS += $(BUILD)/bin/loadgen
endif
TOOLS  := $(patsubst loadtest/tools/%.c,$(BUILD)/bin/%,$(TOOL_SRC))
UNITS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
ITESTS := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(IT_SRC))

.SECONDARY:
.PHONY: all test unit itest asan tsan demo bench clean stack-up stack-down fuzz fuzz-build fuzz-run compose-test swarm-test soak
all: $(BINS) $(TOOLS) $(UNITS) $(ITESTS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC  $<")
	$(Q)$(CC) $(FINAL_CFLAGS) -c $< -o $@

$(LIBLAB): $(call obj,$(LIB_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBLG): $(call obj,$(LG_SRC)) $(call obj,lib/base/config.c)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/inventory: $(call obj,$(INV_SRC)) $(LIBLAB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(FINAL_LIBS)

$(BUILD)/bin/order: $(call obj,$(ORD_SRC)) $(LIBLAB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(FINAL_LIBS)

$(BUILD)/bin/loadgen: $(call obj,loadtest/loadgen/main.c) $(LIBLG)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(FINAL_LIBS)

$(BUILD)/bin/%: $(BUILD)/obj/loadtest/tools/%.o $(LIBLAB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(FINAL_LIBS)

# Unit tests link both libraries: lib/ and the load generator's pieces.
$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(LIBLAB) $(LIBLG)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(FINAL_LIBS) $(TEST_LIBS)

$(BUILD)/tests/integration/%: $(BUILD)/obj/tests/integration/%.o $(call obj,$(IT_HELP)) $(LIBLAB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(FINAL_LIBS) $(TEST_LIBS)

# libFuzzer target (clang only): `make fuzz` builds it in build-fuzz/ and
# runs it FUZZ_TIME seconds on a scratch copy of the committed seed corpus.
FUZZ_TIME ?= 300
FUZZ_BIN  := $(BUILD)/fuzz/fuzz_edge
$(FUZZ_BIN): $(BUILD)/obj/tests/fuzz/fuzz_edge.o $(LIBLAB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD  $@")
	$(Q)$(CC) -fsanitize=fuzzer,address,undefined $(LDFLAGS) -o $@ $^ $(FINAL_LIBS)

fuzz-build:
	$(Q)$(MAKE) --no-print-directory SANITIZER=fuzzer CC=clang build-fuzz/fuzz/fuzz_edge

fuzz-run: $(FUZZ_BIN)
	$(Q)work=$$(mktemp -d /tmp/lab-fuzz.XXXXXX) && \
	  $(FUZZ_BIN) -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=1024 -max_len=4096 -print_final_stats=1 \
	    -artifact_prefix=$$work/ $$work tests/fuzz/corpus; rc=$$?; \
	  if [ $$rc -ne 0 ]; then echo "fuzz: crash input kept in $$work"; else rm -rf $$work; fi; exit $$rc

fuzz:
	$(Q)$(MAKE) --no-print-directory SANITIZER=fuzzer CC=clang FUZZ_TIME=$(FUZZ_TIME) fuzz-run

# tests/run owns its stack (free ports, temp dir, trap cleanup) and prints
# the closing "N passed, M failed" line.
test: all
	$(Q)LAB_BUILD=$(BUILD) bash tests/run

unit: all
	$(Q)LAB_BUILD=$(BUILD) bash tests/run --unit-only

itest: all
	$(Q)LAB_BUILD=$(BUILD) bash tests/run --integration-only

asan:
	$(Q)$(MAKE) --no-print-directory SANITIZER=address test

tsan:
	$(Q)$(MAKE) --no-print-directory SANITIZER=thread test

demo: all
	$(Q)LAB_BUILD=$(BUILD) SCENARIO=$(or $(SCENARIO),default) bash loadtest/demo

bench: all
	$(Q)LAB_BUILD=$(BUILD) bash loadtest/bench

# tests/compose/run: engine (existing or private), images (pulled, or built
# offline by deploy/docker/offline-images), then every guard exact on 2
# instances, faults (pause, crash, restart, Sentinel failover), the profiles
# under load, and deploy/swarm/stack.yml on a single-node swarm; uses
# $(BUILD)/bin/loadgen on the host.
compose-test: all
	$(Q)LAB_BUILD=$(BUILD) bash tests/compose/run

# tests/swarm/run: three dockerd in network namespaces joined into one swarm
# (deploy/swarm/nodes), deploy/swarm/stack.yml across them, a sale burst per
# guard (none oversells, conditional-update exact), a worker killed under
# load (recovery time, sales go on, audit exact); all torn down on any exit.
swarm-test: all
	$(Q)LAB_BUILD=$(BUILD) bash tests/swarm/run

# tests/soak/run: a private stack at half saturation for SOAK_SECONDS (600)
# after a warm-up; service RSS, file descriptors and Redis keys flat, audit
# exact; then SOAK_ALT_ROUNDS (3) rounds of redis-stream then redis-decr
# saturation bursts, every audit exact; each figure next to its target.
# Not part of make test.
soak: all
	$(Q)LAB_BUILD=$(BUILD) SOAK_SECONDS=$(or $(SOAK_SECONDS),600) bash tests/soak/run

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
