# cuda.mk - the part of the Makefile that both CUDA programs of the course share
# (p2pBandwidthLatencyTest and nccl_bench): which nvcc, which GPU architectures, which flags,
# and the stamp file that rebuilds everything when one of those changes.
#
# A program's Makefile names its first goal (all) and STAMP (its stamp file), then includes
# this file; INCLUDE, LDFLAGS and LDLIBS, set later, go into the stamp too. It defines:
#   NVCC_PATH   the compiler: NVCC=... when given (a path, or a name looked up on PATH),
#               else nvcc on PATH, else $(CUDA_HOME)/bin/nvcc (CUDA_HOME: /usr/local/cuda
#               unless set); none: one line saying so
#   SMS         the architectures: SMS="80 90" when given, else those of KNOWN_SMS that
#               `nvcc --list-gpu-arch` lists (none left: one line saying so)
#   GENCODE     -gencode for each of SMS, and PTX of the newest (later GPUs run that)
#   NVCCFLAGS, HOSTFLAGS, CUDA_COMMON (this folder, for -I), the $(STAMP) rule, FORCE,
#   and `make print-archs` (prints SMS).
# Goals that need no compiler (clean, help) skip the search: `make clean` works without CUDA.
#
# Builds of one folder take turns: a build holds an flock on the folder's .make-lock from the
# moment make reads its Makefile until make exits (however it exits: the kernel drops the
# lock with its holder; a helper process holds it and follows make within 0.1 s), so two notebooks or course runs that type `make -C FOLDER` at once
# never write the same objects together. A build that waits says so on stderr; one that has
# waited MAKE_LOCK_TIMEOUT seconds (default 900) gives up in one line. Without the flock
# program (util-linux) the build runs unlocked. CUDA_MAKE_LOCK_HELD=1 (set for make's
# children) skips it, for a make started by a build that holds the lock already.

CUDA_COMMON := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
CUDA_HOME   ?= /usr/local/cuda
# Data-center and workstation GPUs: Volta, Turing, Ampere (A100, then RTX/A-series), Ada,
# Hopper, Blackwell (B200, then RTX PRO). Left out: the Jetson/DRIVE chips (87, 88, 110)
# and the family variants (103, 121), which no course machine has.
KNOWN_SMS   := 70 75 80 86 89 90 100 120

NVCCFLAGS ?= -O3 -std=c++17
HOSTFLAGS := -Xcompiler -Wall,-Wextra

CUDA_BUILD_GOALS := $(filter-out clean help,$(MAKECMDGOALS))
ifneq ($(strip $(CUDA_BUILD_GOALS))$(if $(MAKECMDGOALS),,all),)
  CUDA_BUILDING := yes
  ifneq ($(origin NVCC),undefined)
    NVCC_PATH := $(if $(strip $(NVCC)),$(shell command -v $(NVCC) 2>/dev/null))
    ifeq ($(NVCC_PATH),)
      $(error nvcc not found: NVCC='$(NVCC)' is not an executable; run make NVCC=/path/to/nvcc, or leave NVCC out to search PATH and $(CUDA_HOME)/bin)
    endif
  else
    NVCC_PATH := $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
  endif
  ifeq ($(NVCC_PATH),)
    $(error nvcc not found (not on PATH, not in $(CUDA_HOME)/bin): install the CUDA toolkit or run make NVCC=/path/to/nvcc)
  endif
  ifeq ($(origin SMS),undefined)
    NVCC_ARCHS := $(shell $(NVCC_PATH) --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\([0-9][0-9]*\)$$/\1/p')
    SMS := $(strip $(foreach sm,$(KNOWN_SMS),$(filter $(sm),$(NVCC_ARCHS))))
    ifeq ($(SMS),)
      $(error none of the architectures $(KNOWN_SMS) is in `$(NVCC_PATH) --list-gpu-arch` ($(or $(NVCC_ARCHS),nothing)); name some with make SMS="80 90")
    endif
  endif
  ifeq ($(CUDA_MAKE_LOCK_HELD),)
    CUDA_FLOCK := $(shell command -v flock 2>/dev/null)
  endif
  ifneq ($(CUDA_FLOCK),)
    # A helper takes the lock and keeps it while make (its parent, $$PPID) lives; $(shell)
    # returns once the helper closes its output, that is once the lock is held.
    CUDA_LOCK_FILE := $(CURDIR)/.make-lock
    CUDA_LOCKED := $(shell make_pid=$$PPID; ( \
      exec 9>>'$(CUDA_LOCK_FILE)' || { echo unwritable; exit 0; }; \
      if ! $(CUDA_FLOCK) -w 1 9; then \
        echo "make: another build of $(CURDIR) holds .make-lock; waiting for it" >&2; \
        $(CUDA_FLOCK) -w $(or $(MAKE_LOCK_TIMEOUT),900) 9 || { echo timeout; exit 0; }; \
      fi; \
      echo held; exec >/dev/null 2>&1; \
      while kill -0 $$make_pid 2>/dev/null && ! grep -qs '^[0-9]* [^ ]* Z ' /proc/$$make_pid/stat; do \
        sleep 0.1; done ) &)
    ifeq ($(CUDA_LOCKED),timeout)
      $(error another build of $(CURDIR) held .make-lock for over $(or $(MAKE_LOCK_TIMEOUT),900) s; wait for it or stop it)
    endif
    export CUDA_MAKE_LOCK_HELD := 1
  endif
  # Numeric order: a text sort would put 100 before 90.
  NEWEST_SM := $(lastword $(shell echo $(SMS) | tr ' ' '\n' | sort -n))
  GENCODE   := $(foreach sm,$(SMS),-gencode arch=compute_$(sm),code=sm_$(sm)) \
               -gencode arch=compute_$(NEWEST_SM),code=compute_$(NEWEST_SM)
endif

.PHONY: FORCE print-archs
FORCE:

print-archs:
	@echo $(SMS)

# The stamp holds every word that shapes the objects; when it changes they are rebuilt.
CUDA_STAMP_TEXT = $(NVCC_PATH) $(NVCCFLAGS) $(HOSTFLAGS) $(INCLUDE) $(GENCODE) $(LDFLAGS) $(LDLIBS)
$(STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(CUDA_STAMP_TEXT)' | cmp -s - $@ || echo '$(CUDA_STAMP_TEXT)' > $@
