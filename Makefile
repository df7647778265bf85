# diehard — build, test, bench, install.
#
#   make            build/libdiehard.so and the test/bench helper programs
#   make check      every test (Bats through prove; C unit tests under ASan/UBSan)
#   make bench      the benchmarks; writes build/bench/results.md
#   make demo       shows the allocator at work on a real program
#   make deps       installs the Debian packages the build and tests need (root)
#   make install    PREFIX=/usr/local DESTDIR=

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
BINDIR  ?= $(PREFIX)/bin
DOCDIR  ?= $(PREFIX)/share/doc/diehard
DESTDIR ?=

CC      ?= cc
PKG_CONFIG ?= pkg-config
B       := build

WARN    := -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE
CFLAGS  ?= -O2 -g
# The allocator: hidden by default (only the malloc API is exported), initial-exec
# TLS (no __tls_get_addr, which may allocate), and no loops rewritten into calls to
# memset/memcpy (memcpy is one of our own interposed entry points).
ALLOC_CFLAGS := $(WARN) $(CFLAGS) -O2 -fPIC -fvisibility=hidden \
	-ftls-model=initial-exec -fno-tree-loop-distribute-patterns \
	-fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc \
	-fno-builtin-memcpy -fno-builtin-strcpy -fno-builtin-strncpy -fno-builtin-strcat
ALLOC_LDFLAGS := -shared -Wl,-z,now -Wl,-z,relro -Wl,--version-script=allocator/exports.map -pthread

ALLOC_SRC  := $(sort $(wildcard allocator/*.c))
ALLOC_HDR  := $(wildcard allocator/*.h)
# Unit tests link every allocator module except the exported entry points, so
# they run under the sanitizers with the system malloc underneath.
ALLOC_CORE := $(filter-out allocator/entry.c allocator/strings.c,$(ALLOC_SRC))

SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

PROG_SRC  := $(wildcard tests/progs/*.c)
PROGS     := $(patsubst tests/progs/%.c,$(B)/tests/%,$(PROG_SRC))
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNITS     := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
BENCH_SRC := $(wildcard bench/*.c)
BENCHES   := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))

.PHONY: all check unit bats bench demo deps install uninstall clean

all: $(B)/libdiehard.so $(PROGS) $(UNITS) $(BENCHES)

$(B)/libdiehard.so: $(ALLOC_SRC) $(ALLOC_HDR) allocator/exports.map | $(B)
	$(CC) $(ALLOC_CFLAGS) $(ALLOC_LDFLAGS) -o $@ $(ALLOC_SRC)

# Helper programs run by the Bats tests (planted bugs, stress, seeds).
$(B)/tests/%: tests/progs/%.c | $(B)/tests
	$(CC) $(WARN) $(CFLAGS) -pthread -o $@ $< -lm

# C unit tests of the allocator's modules, under ASan and UBSan.
$(B)/tests/unit/%: tests/unit/%.c tests/unit/tap.h $(ALLOC_CORE) $(ALLOC_HDR) | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Iallocator -pthread -o $@ $< $(ALLOC_CORE)

$(B)/bench/%: bench/%.c | $(B)/bench
	$(CC) $(WARN) -O2 -g -pthread -o $@ $< -lm

$(B) $(B)/tests $(B)/tests/unit $(B)/bench:
	mkdir -p $@

# The README's test command. prove gives CI its closing line.
check: all
	prove --exec 'bats --tap' tests/*.bats

bench: all
	bash bench/run

demo: all
	bash tests/demo.sh

deps:
	bash .ci/deps

install: $(B)/libdiehard.so
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(DOCDIR)
	install -m 0644 $(B)/libdiehard.so $(DESTDIR)$(LIBDIR)/libdiehard.so
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libdiehard.so
	rm -rf $(DESTDIR)$(DOCDIR)

clean:
	rm -rf $(B)
