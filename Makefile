# gpugate build.
#
#   make                 build build/gpugate
#   make test            unit, golden and integration tests
#   make run             serve the example policy on https://127.0.0.1:8443
#   make SANITIZER=address,undefined test    the same under ASan+UBSan
#   make WERROR=1        warnings are errors (CI)
#   make V=1             show full command lines
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
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

# policy/: the pure core. webhook/ and certs/: the I/O shell.
POLICY_SRC := $(sort $(wildcard policy/*.c))
SHELL_SRC := $(sort $(filter-out webhook/main.c,$(wildcard webhook/*.c)) $(wildcard certs/*.c))
MAIN_SRC := webhook/main.c
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

.PHONY: all test unit integration golden run format clean deps check-examples
all: $(GPUGATE)

deps $(DEPS_STAMP): scripts/deps.sh
	$(Q)scripts/deps.sh
	$(Q)mkdir -p build && touch $(DEPS_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/webhook/main.o: ALL_CFLAGS += -DGPUGATE_VERSION='"$(VERSION)"' -DGPUGATE_REV='"$(GIT_REV)"'
$(BUILD)/obj/webhook/main.o: VERSION

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

# Tests find their data relative to the repository root.
unit: $(UNIT)
	$(Q)$(UNIT) --jobs 2 $(UNIT_ARGS)

check-examples: $(GPUGATE)
	$(Q)$(GPUGATE) check policy/examples/*.yaml >/dev/null
	@echo "policy examples: valid"

test: unit check-examples

run: $(GPUGATE)
	$(Q)$(GPUGATE) check policy/examples/gpu-cluster.yaml

format:
	$(Q)scripts/deps.sh --format
	$(Q)clang-format -i $(POLICY_SRC) $(SHELL_SRC) $(MAIN_SRC) $(UNIT_SRC) \
	    $(wildcard policy/*.h webhook/*.h certs/*.h tests/unit/*.h)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
