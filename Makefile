# gpugate build.
#
#   make                 build build/gpugate
#   make test            unit, golden and integration tests
#   make run             serve the example policy on https://127.0.0.1:8443
#   make SANITIZER=address,undefined test    the same under ASan+UBSan
#   make WERROR=1        warnings are errors (CI)
#   make V=1             show full command lines
#   make bench           benchmark report (docs/benchmarks.md)
#   make bench-ab [BASE=REV]   class Pod /mutate req/s of REV's build against
#                        this tree's, side by side (default BASE: the merge
#                        base with main)
#   make bench-feed [FEED_ARGS=...]   memory and sync time of the usage feed
#                        with 100,000 Pods in a fake API (bench/feed-memory.sh)
#   make bench-fleet [FLEET_ARGS=...]   the scale run: 1,000 KWOK GPU nodes,
#                        10,000 pods through a real apiserver and scheduler
#                        (bench/fleet-scale.py; FLEET_ARGS=--small: 100/1,000)
#   make bench-floors [FLOORS_ARGS=--rounds N]   a domain document's GET+PUT,
#                        PUT alone and a hop between replicas on the e2e
#                        control plane (bench/replica-floors.py, issue #32)
#   make bench-replicas [REPLICAS_ARGS=...]   issue #32: added latency per create
#                        and burst rate of 3 leader replicas against one ledger,
#                        same run, on the e2e control plane (bench/replica-speed.py)
#   make image           the OCI image archive build/gpugate-image.oci.tar
#                        (mmdebstrap, no container engine; docs/operations.md)
#   make image-check     unpack it and run gpugate from it; rebuild, compare
#   make chart-check     helm lint and helm template of charts/gpugate
#   make format | clean
#
# The first make on a fresh machine installs the Debian packages it needs
# (scripts/deps.sh, a no-op when everything is present).

CC ?= cc
BUILD ?= build
SANITIZER ?=
WERROR ?= 0
V ?= 0

ifeq ($(V),1)
Q :=
else
Q := @
endif

comma := ,

# A sanitizer build lives in its own tree so that it never mixes objects
# with the normal one; unknown sanitizer names are refused up front.
ifneq ($(SANITIZER),)
  ifeq ($(filter-out address undefined,$(subst $(comma), ,$(SANITIZER))),)
    BUILD := $(BUILD)/san-$(subst $(comma),-,$(SANITIZER))
    SAN_FLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
  else
    $(error SANITIZER must be address, undefined or address,undefined (got '$(SANITIZER)'))
  endif
endif

PKGS := libcyaml yaml-0.1 jansson libmicrohttpd gnutls libcurl openssl
# Expanded lazily, after the dependency stamp has installed the packages.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS)) -lpthread

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wno-format-nonliteral -Wundef -Wcast-align -Wpointer-arith \
        -Wwrite-strings -Wnull-dereference
ifeq ($(WERROR),1)
WARN += -Werror
endif

CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN_FLAGS) \
             -I. $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = $(LDFLAGS) $(SAN_FLAGS)

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

# The folders by layer (docs/internals.md, "The house"): base/ and policy/
# are the pure core's static library; the rest is the I/O shell.
# scripts/check-includes.sh holds each folder to what it may include.
CORE_DIRS := base policy
SHELL_DIRS := codec http kube usage metrics webhook report controllers daemon certs cli
POLICY_SRC := $(sort $(foreach d,$(CORE_DIRS),$(wildcard $(d)/*.c)))
SHELL_SRC := $(sort $(filter-out cli/main.c,$(foreach d,$(SHELL_DIRS),$(wildcard $(d)/*.c))))
MAIN_SRC := cli/main.c
UNIT_SRC := $(sort $(wildcard tests/unit/*/*.c tests/unit/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
POLICY_OBJ := $(call obj,$(POLICY_SRC))
SHELL_OBJ := $(call obj,$(SHELL_SRC))
MAIN_OBJ := $(call obj,$(MAIN_SRC))
UNIT_OBJ := $(call obj,$(UNIT_SRC))

LIBPOLICY := $(BUILD)/libgpugate-policy.a
LIBSHELL := $(BUILD)/libgpugate-shell.a
GPUGATE := $(BUILD)/gpugate
UNIT := $(BUILD)/tests/unit-tests
DEPS_STAMP := build/.deps-ok

.PHONY: all test check-includes check-house print-dirs unit integration valgrind run format clean deps check-examples e2e e2e-plain e2e-was e2e-tools-check demo bench bench-ab bench-feed bench-fleet bench-floors bench-replicas fuzz image image-check chart-check
all: $(GPUGATE)

deps $(DEPS_STAMP): scripts/deps.sh
	$(Q)scripts/deps.sh
	$(Q)mkdir -p build && touch $(DEPS_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# The version and source revision, rewritten only when they change so that
# base/version.o is rebuilt exactly then (a new commit, a dirty tree).
REVISION_H := $(BUILD)/gen/revision.h
.PHONY: FORCE
$(REVISION_H): FORCE
	@mkdir -p $(dir $@)
	@rev=$$(git describe --always --dirty 2>/dev/null || echo unknown); \
	 printf '#define GPUGATE_VERSION "%s"\n#define GPUGATE_REV "%s"\n' \
	   "$(VERSION)" "$$rev" > $@.tmp; \
	 if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(BUILD)/obj/base/version.o: ALL_CFLAGS += -include $(REVISION_H)
$(BUILD)/obj/base/version.o: $(REVISION_H)

$(LIBPOLICY): $(POLICY_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBSHELL): $(SHELL_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(GPUGATE): $(MAIN_OBJ) $(LIBSHELL) $(LIBPOLICY)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(UNIT): $(UNIT_OBJ) $(LIBSHELL) $(LIBPOLICY)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcriterion

# Tests find their data relative to the repository root.  Criterion runs
# each test in a child process whose sanitizer report (a leak is found at
# exit) does not fail the test: the log is searched for reports instead.
SAN_REPORT := ERROR: (Address|Leak)Sanitizer|runtime error:

unit: $(UNIT)
ifeq ($(SANITIZER),)
	$(Q)$(UNIT) --jobs 2 $(UNIT_ARGS)
else
	$(Q)rc=0; $(UNIT) --jobs 2 $(UNIT_ARGS) > $(BUILD)/unit.log 2>&1 || rc=$$?; \
	cat $(BUILD)/unit.log; \
	if grep -Eq '$(SAN_REPORT)' $(BUILD)/unit.log; then \
	    echo "unit tests: sanitizer reports above" >&2; exit 1; fi; \
	exit $$rc
endif

check-examples: $(GPUGATE)
	$(Q)$(GPUGATE) check policy/examples/*.yaml >/dev/null
	@echo "policy examples: valid"

# The real binary over HTTPS on an ephemeral port (tests/integration).
integration: $(GPUGATE)
	$(Q)GPUGATE_BIN=$(GPUGATE) ASAN_OPTIONS=detect_leaks=1 \
	    python3 -m pytest -q -p no:cacheprovider tests/integration $(PYTEST_ARGS)

# The layering (docs/internals.md, "The house"): each folder includes only
# the folders below it.
check-includes:
	$(Q)scripts/check-includes.sh

# The product's folders, for scripts that build them their own way
# (tests/fuzz/run.sh).
print-dirs:
	@echo $(CORE_DIRS) $(SHELL_DIRS)

# No circle between files, no .c file over 1,500 lines, webhook/ admission
# alone: read from the objects (scripts/check-house.py).
check-house: $(GPUGATE)
	$(Q)scripts/check-house.py $(BUILD)/obj

test: check-includes check-house unit check-examples integration

# The integration suite with every server under valgrind (memcheck): any
# error or definite leak fails the session (tests/integration/conftest.py).
valgrind: $(GPUGATE)
	$(Q)scripts/deps.sh --bench
	$(Q)GPUGATE_BIN=$(GPUGATE) GPUGATE_VALGRIND=1 \
	    python3 -m pytest -q -p no:cacheprovider tests/integration $(PYTEST_ARGS)

# A real control plane (etcd, kube-apiserver, kube-controller-manager built
# from the Go module proxy and cached), gpugate registered, kubectl tests.
# e2e-tools-check fails at once, naming the Go version, when the control
# plane is not cached and go is missing or too old (not needed once cached).
e2e-tools-check:
	$(Q)tests/e2e/build-tools.sh --check --quiet

# Two passes, a cluster each (tests/e2e/run.sh): "plain" (no gates: the
# whole suite, gang start by scheduling gates) and "was" (GPUGATE_WAS=1:
# the workload-aware scheduling gates on, only the tests marked was).
# E2E_PASSES picks them (make e2e E2E_PASSES=was); E2E_ARGS selects tests
# in each.
E2E_PASSES ?= plain was
e2e: e2e-tools-check $(GPUGATE)
	$(Q)GPUGATE_BIN=$(abspath $(GPUGATE)) GPUGATE_E2E_PASSES='$(E2E_PASSES)' \
	    tests/e2e/run.sh $(E2E_ARGS)

e2e-plain e2e-was: e2e-tools-check $(GPUGATE)
	$(Q)GPUGATE_BIN=$(abspath $(GPUGATE)) GPUGATE_E2E_PASSES='$(@:e2e-%=%)' \
	    tests/e2e/run.sh $(E2E_ARGS)

# The same control plane and a short scripted kubectl session.
demo: e2e-tools-check $(GPUGATE)
	$(Q)GPUGATE_BIN=$(abspath $(GPUGATE)) tests/e2e/demo.sh

# Benchmarks print figures; they are not tests (docs/benchmarks.md).
bench: $(GPUGATE)
	$(Q)scripts/deps.sh --bench
	$(Q)GPUGATE_BIN=$(abspath $(GPUGATE)) bench/run.sh $(BENCH_ARGS)

# A/B against the previous main: BASE's gpugate, built by BASE's own Makefile
# in a detached worktree (reused while BASE stays the same), with the same CC
# and CFLAGS, against this tree's; AB_ARGS go to bench/ab.sh (--rounds N,
# --duration S, ...).  BASE defaults to where this branch left main; on main
# itself that is HEAD, which measures uncommitted changes: BASE=HEAD~1 there.
BASE ?= $(shell git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null)
AB_DIR := build/ab-base

bench-ab: $(GPUGATE)
	$(Q)scripts/deps.sh --bench
	$(Q)bench/ab-base.sh "$(BASE)" $(AB_DIR) BUILD=build SANITIZER= CC="$(CC)" CFLAGS="$(CFLAGS)"
	$(Q)bench/ab.sh $(AB_ARGS) $(AB_DIR)/build/gpugate $(GPUGATE)

# The usage feed against tests/integration/fakekube.py with a generated
# cluster (100,000 Pods by default): time to sync, VmRSS and VmHWM, ledger
# entries, then a burst of watch events; FEED_ARGS go to bench/feed-memory.sh
# (--pods N, --gpu-pods G, --jobs M, --burst W, --quick, ...).  About 30 s.
bench-feed: $(GPUGATE)
	$(Q)GPUGATE_BIN=$(abspath $(GPUGATE)) bench/feed-memory.sh $(FEED_ARGS)

# The scale run (issue #15): the e2e control plane with kube-scheduler and
# KWOK, a fleet of fake GPU nodes from bench/policy-fleet.yaml, gpugate
# registered (--kubeconfig), 10,000 class pods Running; memory, restart
# catch-up, create latency with and without watch churn.  FLEET_ARGS go to
# bench/fleet-scale.py (--nodes N, --pods P, --usage-store S, --small, ...).
# About 3-6 minutes at full size on 2 CPUs (docs/benchmarks.md, "Scale run").
bench-fleet: e2e-tools-check $(GPUGATE)
	$(Q)GPUGATE_BIN=$(abspath $(GPUGATE)) python3 bench/fleet-scale.py $(FLEET_ARGS)

# The floors of issue #32's two ways on the e2e control plane
# (bench/replica-floors.py; docs/benchmarks.md "Several replicas: the floors
# of the two ways"): GET+PUT, PUT alone, a hop between replicas.  About 30 s.
bench-floors: e2e-tools-check $(GPUGATE)
	$(Q)python3 bench/replica-floors.py --gpugate $(abspath $(GPUGATE)) $(FLOORS_ARGS)

# Several replicas at the speed of one (issue #32; bench/replica-speed.py,
# docs/benchmarks.md "Several replicas at the speed of one"): the added
# latency per GPU pod create through the apiserver and the burst rate into
# one domain, 3 `--usage-store leader` replicas against one ledger, in one
# run, and as many replicas that do not coordinate (the bursts' control);
# REPLICAS_ARGS go to the script (--rounds N, --creates N, --bursts N,
# --burst-sizes L, --no-control).  About 70 s.
bench-replicas: e2e-tools-check $(GPUGATE)
	$(Q)python3 bench/replica-speed.py --gpugate $(abspath $(GPUGATE)) $(REPLICAS_ARGS)

# The OCI image (scripts/image.sh): the runtime libraries from Debian
# packages (mmdebstrap), build/gpugate, user 65532; reproducible. About 10 s.
IMAGE := build/gpugate-image.oci.tar

image: $(GPUGATE)
	$(Q)scripts/deps.sh --image
	$(Q)scripts/image.sh --binary $(GPUGATE) --out $(IMAGE)

# Runs gpugate from the image's root filesystem (as root: chroot in a mount
# namespace) and builds it a second time to compare. About 20 s.
image-check: image
	$(Q)tests/image/check.sh $(IMAGE)

# helm lint and helm template of charts/gpugate in both certificate modes
# (tests/chart/check.py; helm is built from the Go module proxy like the e2e
# tools, then cached). About 2 s once helm is built.
chart-check: e2e-tools-check
	$(Q)python3 tests/chart/check.py

# libFuzzer harnesses (clang); FUZZ_SECONDS per harness, default 60.
fuzz:
	$(Q)scripts/deps.sh --fuzz
	$(Q)tests/fuzz/run.sh $(FUZZ_SECONDS)

# Development certificates: the CA is made once and reused, the serving
# certificate is renewed on every run (it never expires under your feet).
DEV_CERTS := build/dev-certs
RUN_LISTEN ?= 127.0.0.1:8443
RUN_POLICY ?= policy/examples/gpu-cluster.yaml

run: $(GPUGATE)
	$(Q)$(GPUGATE) certs --out $(DEV_CERTS) --dns localhost --ip 127.0.0.1 >/dev/null
	@echo "gpugate: serving $(RUN_POLICY) on https://$(RUN_LISTEN) (Ctrl-C stops it). Try, in another shell:"
	@echo "  curl -s --cacert $(DEV_CERTS)/ca.crt -H 'Content-Type: application/json' --data @examples/review-pod.json https://$(RUN_LISTEN)/mutate | python3 scripts/show-review.py"
	@echo "  $(GPUGATE) explain --policy $(RUN_POLICY) examples/job-train-large.yaml"
	$(Q)$(GPUGATE) serve --policy $(RUN_POLICY) --listen $(RUN_LISTEN) \
	    --tls-cert $(DEV_CERTS)/tls.crt --tls-key $(DEV_CERTS)/tls.key

format:
	$(Q)scripts/deps.sh --format
	$(Q)clang-format -i $(POLICY_SRC) $(SHELL_SRC) $(MAIN_SRC) $(UNIT_SRC) \
	    $(foreach d,$(CORE_DIRS) $(SHELL_DIRS),$(wildcard $(d)/*.h)) $(wildcard tests/unit/*.h)

clean:
	$(Q)if [ -e $(AB_DIR)/.git ]; then git worktree remove --force $(AB_DIR); fi
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
