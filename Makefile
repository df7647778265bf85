# diehard — build, test, bench, install.
#
#   make            build/diehard, build/libdiehard.so, test and bench programs
#   make check      every test (Bats through prove; C unit tests under ASan/UBSan)
#   make bench      the benchmarks; writes build/bench/results.md
#   make demo       shows the allocator at work on a real program
#   make deps       installs the Debian packages the build and tests need (root)
#   make install    PREFIX=/usr/local DESTDIR= (UNITDIR, MANDIR: systemd units, man page;
#                   INCLUDEDIR, PKGCONFIGDIR: <diehard/critical.h> and diehard.pc)

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec/diehard
BINDIR  ?= $(PREFIX)/bin
DOCDIR  ?= $(PREFIX)/share/doc/diehard
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
DESTDIR ?=

CC      ?= cc
PKG_CONFIG ?= pkg-config
B       := build

WARN    := -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE
CFLAGS  ?= -O2 -g
# The allocator: hidden by default (only the malloc API is exported), initial-exec
# TLS (no __tls_get_addr, which may allocate), and no loops rewritten into calls to
# memset/memcpy (memcpy is one of our own interposed entry points).
ALLOC_CFLAGS := $(WARN) $(CFLAGS) -O2 -fPIC -fvisibility=hidden -Iallocator -Iallocator/include \
	-ftls-model=initial-exec -fno-tree-loop-distribute-patterns \
	-fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc \
	-fno-builtin-memcpy -fno-builtin-strcpy -fno-builtin-strncpy -fno-builtin-strcat
ALLOC_LDFLAGS := -shared -Wl,-z,now -Wl,-z,relro -Wl,--version-script=allocator/exports.map -pthread

# Critical memory (allocator/critical/backend.h): critical.c is built into
# libdiehard.so over the process's allocator (shared.c) and into
# libdiehard-critical.so, the library programs link, over a heap of its own
# (private.c) with only the heap's modules.
CRIT_SRC   := allocator/critical/critical.c
CRIT_HDR   := $(wildcard allocator/critical/*.h) allocator/include/diehard/critical.h
CRIT_LIB_SRC := $(CRIT_SRC) allocator/critical/private.c $(addprefix allocator/,heap.c large.c pool.c os.c msg.c config.c)
ALLOC_SRC  := $(sort $(wildcard allocator/*.c)) $(CRIT_SRC) allocator/critical/shared.c
ALLOC_HDR  := $(wildcard allocator/*.h) $(CRIT_HDR)
# Unit tests link every allocator module except the exported entry points
# (and kernel.c's libc wrappers, early.c's IFUNC resolver, which would run
# before the sanitizers' runtime, and critical memory: test_critical links
# libdiehard-critical.so's sources), so they run under the sanitizers with
# the system malloc underneath.
ALLOC_CORE := $(filter-out allocator/entry.c allocator/strings.c allocator/kernel.c allocator/early.c $(CRIT_SRC) allocator/critical/shared.c,$(ALLOC_SRC))

SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# The supervisor: libraries found with pkg-config.
SUP_PKGS   := libevent jansson libseccomp libelf libdw libprotobuf-c
# Deferred (=): asked when the link runs, so `make deps all` works in one go
# on a machine that did not have the libraries when make started.
SUP_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(SUP_PKGS) 2>/dev/null)
SUP_LIBS   = $(shell $(PKG_CONFIG) --libs $(SUP_PKGS) 2>/dev/null)
# supervisor/sandbox/init.c is diehard-init's own program.
# proto/*.proto are compiled by protoc-c into $(B)/proto (the message layer:
# the run recording).
PROTO_SRC  := $(patsubst proto/%.proto,$(B)/proto/%.pb-c.c,$(wildcard proto/*.proto))
PROTO_HDR  := $(PROTO_SRC:.c=.h)
SUP_SRC    := $(sort $(filter-out supervisor/sandbox/init.c supervisor/ci/symbolize_tool.c,$(wildcard supervisor/*.c supervisor/*/*.c))) voter/voter.c voter/relines.c voter/pastdigits.c allocator/clockpage.c allocator/envkeep.c $(PROTO_SRC)
SUP_HDR    := $(wildcard supervisor/*.h supervisor/*/*.h) voter/voter.h voter/relines.h voter/pastdigits.h allocator/clockpage.h allocator/clockpath.h allocator/blob/clockblob.h allocator/envkeep.h $(PROTO_HDR)
# Each concern's folder is on the include path: modules include by name.
SUP_INC    := -Isupervisor -Isupervisor/files -Isupervisor/virt -Isupervisor/sandbox -Isupervisor/ci -Isupervisor/services -Isupervisor/net -Ivoter -I$(B)/proto -idirafter allocator

PROG_SRC  := $(wildcard tests/progs/*.c)
# Programs using critical memory (<diehard/critical.h>), linked with
# libdiehard-critical.so as a user would (pkg-config's flags, an rpath to the
# build tree): the tests' helpers and the examples.
CRIT_PROGS := $(patsubst tests/progs/critical/%.c,$(B)/tests/critical/%,$(wildcard tests/progs/critical/*.c)) \
	$(patsubst allocator/critical/examples/%.c,$(B)/examples/%,$(wildcard allocator/critical/examples/*.c))
CRIT_LINK = -Iallocator/include -L$(B) -ldiehard-critical -Wl,-rpath,$(CURDIR)/$(B)
PROGS     := $(patsubst tests/progs/%.c,$(B)/tests/%,$(PROG_SRC))
# Statically linked helpers: programs that never load libdiehard.so.
STATIC_SRC := $(wildcard tests/progs/static/*.c)
STATICS   := $(patsubst tests/progs/static/%.c,$(B)/tests/static/%,$(STATIC_SRC)) $(B)/tests/static/nd_fastpath \
	$(patsubst tests/progs/raw/%.c,$(B)/tests/static/%,$(wildcard tests/progs/raw/*.c))
# A Go program (static, as Go's usually are), where Go is installed (make
# deps installs it): its runtime reads clocks through the vDSO itself.
GO        := $(shell command -v go 2>/dev/null)
GO_PROGS  := $(if $(GO),$(patsubst tests/progs/go/%.go,$(B)/tests/go/%,$(wildcard tests/progs/go/*.go)) \
	$(patsubst bench/go/%.go,$(B)/bench/go/%,$(wildcard bench/go/*.go)))
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNITS     := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
BENCH_SRC := $(wildcard bench/*.c)
BENCHES   := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))
# systemd units to copy or install (docs/SERVICES.md).
UNITS_SD  := $(sort $(wildcard systemd/*.service systemd/*.socket))

.PHONY: all check unit bats bench demo deps install uninstall clean

all: $(B)/libdiehard.so $(B)/libdiehard-critical.so $(B)/pkgconfig/diehard.pc $(B)/libinject.so $(B)/diehard $(B)/diehard-init $(B)/diehard-symbolize $(PROGS) $(CRIT_PROGS) $(STATICS) $(GO_PROGS) $(UNITS) $(BENCHES)

$(B)/proto/%.pb-c.c $(B)/proto/%.pb-c.h: proto/%.proto | $(B)/proto
	protoc-c --c_out=$(B)/proto --proto_path=proto $<

$(B)/diehard: $(SUP_SRC) $(SUP_HDR) $(B)/clockblob.bin | $(B)
	@$(PKG_CONFIG) --exists $(SUP_PKGS) || { echo "missing libraries ($(SUP_PKGS)): run make deps" >&2; exit 1; }
	$(CC) $(WARN) $(CFLAGS) $(SUP_INC) $(SUP_CFLAGS) -DDIEHARD_LIBDIR='"$(LIBDIR)"' -DDIEHARD_LIBEXECDIR='"$(LIBEXECDIR)"' -DDIEHARD_CLOCKBLOB='"$(B)/clockblob.bin"' -o $@ $(SUP_SRC) $(SUP_LIBS)

# The clock blob (allocator/blob/clockblob.h): the fast clock path for
# programs without libdiehard.so, which diehard embeds (supervisor/virt/graft.c)
# and places in them. Freestanding, flat from 0: only PC-relative references
# hold wherever it lands, so the build refuses any other relocation it kept
# (--emit-relocs: a GOT, an absolute pointer), and a data page that does not
# start with the struct graft.c writes there.
BLOB_CFLAGS := $(WARN) -O2 -fPIE -fvisibility=hidden -ffreestanding -fno-stack-protector \
	-fno-asynchronous-unwind-tables -fno-unwind-tables -mgeneral-regs-only -fcf-protection=none -Iallocator
$(B)/clockblob.bin: allocator/blob/clockblob.c allocator/blob/clockblob.ld allocator/clockpage.c $(ALLOC_HDR) allocator/blob/clockblob.h | $(B)
	$(CC) $(BLOB_CFLAGS) -nostdlib -static -Wl,-T,allocator/blob/clockblob.ld -Wl,--no-undefined -Wl,--build-id=none \
		-Wl,--emit-relocs -o $(B)/clockblob.elf allocator/blob/clockblob.c allocator/clockpage.c
	@readelf -rW $(B)/clockblob.elf | awk '/R_X86_64_/ && $$3 !~ /^R_X86_64_(PC32|PLT32|PC64)$$/ { print "clockblob: a relocation that does not hold in a flat copy:", $$0; bad = 1 } END { exit bad }' >&2
	@p=$$(nm $(B)/clockblob.elf | awk '$$3 == "blob_path" { print $$1 }'); \
		d=$$(nm $(B)/clockblob.elf | awk '$$3 == "blob_data_start" { print $$1 }'); \
		test -n "$$p" && test "$$p" = "$$d" || { echo "clockblob: blob_path is not where its data starts" >&2; exit 1; }
	@# The loader maps the data pages afresh (zeros): nothing there may start otherwise.
	@objcopy -O binary --only-section=.data $(B)/clockblob.elf $(B)/clockblob.data && \
		test -s $(B)/clockblob.data && test -z "$$(tr -d '\000' < $(B)/clockblob.data)" || \
		{ echo "clockblob: its data pages must start as zeros" >&2; exit 1; }
	objcopy -O binary $(B)/clockblob.elf $@

# A sandboxed replica's init (supervisor/sandbox/sandbox.h): static, so that its
# exec costs no dynamic linking on every replica's start.
$(B)/diehard-init: supervisor/sandbox/init.c supervisor/sandbox/sandbox.c supervisor/sandbox/sandbox.h | $(B)
	$(CC) $(WARN) $(CFLAGS) -static -Isupervisor/sandbox -o $@ supervisor/sandbox/init.c supervisor/sandbox/sandbox.c

# Fence mode's report symbolizer (allocator/fence.h): libdiehard.so runs it
# from its own directory, or from LIBEXECDIR once installed.
$(B)/diehard-symbolize: supervisor/ci/symbolize_tool.c supervisor/ci/symbolize.c supervisor/ci/symbolize.h | $(B)
	$(CC) $(WARN) $(CFLAGS) -Isupervisor/ci $(shell $(PKG_CONFIG) --cflags libdw 2>/dev/null) -o $@ supervisor/ci/symbolize_tool.c supervisor/ci/symbolize.c $(shell $(PKG_CONFIG) --libs libdw 2>/dev/null)

$(B)/libdiehard.so: $(ALLOC_SRC) $(ALLOC_HDR) allocator/exports.map | $(B)
	$(CC) $(ALLOC_CFLAGS) -DDIEHARD_LIBEXECDIR='"$(LIBEXECDIR)"' $(ALLOC_LDFLAGS) -o $@ $(ALLOC_SRC)

# The critical memory library (<diehard/critical.h>): a soname of its own,
# since programs link it; -z defs: it must need nothing but libc.
$(B)/libdiehard-critical.so.1: $(CRIT_LIB_SRC) $(ALLOC_HDR) allocator/critical/exports.map | $(B)
	$(CC) $(ALLOC_CFLAGS) -shared -Wl,-z,now -Wl,-z,relro -Wl,-z,defs -Wl,-soname,libdiehard-critical.so.1 \
		-Wl,--version-script=allocator/critical/exports.map -pthread -o $@ $(CRIT_LIB_SRC)

$(B)/libdiehard-critical.so: $(B)/libdiehard-critical.so.1
	ln -sf libdiehard-critical.so.1 $@

# pkg-config: `pkg-config --cflags --libs diehard`. The build tree's own file
# (for the tests) names the tree; make install writes one naming PREFIX.
PC_TEXT = prefix=$(1)\nincludedir=$(2)\nlibdir=$(3)\n\nName: diehard\nDescription: critical memory (Samurai) over a randomized heap\nVersion: 1.0\nCflags: -I$${includedir}\nLibs: -L$${libdir} -ldiehard-critical\n
$(B)/pkgconfig/diehard.pc: Makefile | $(B)
	mkdir -p $(B)/pkgconfig
	printf '$(call PC_TEXT,$(CURDIR),$(CURDIR)/allocator/include,$(CURDIR)/$(B))' >$@

# The fault injector over glibc's malloc (bench/tolerance's baseline, and
# the traces its dangling-pointer runs replay).
$(B)/libinject.so: bench/inject/libinject.c allocator/inject.c allocator/inject.h allocator/spec.c allocator/spec.h | $(B)
	$(CC) $(WARN) $(CFLAGS) -O2 -fPIC -fvisibility=hidden -shared -Iallocator -o $@ bench/inject/libinject.c allocator/inject.c allocator/spec.c

# Helper programs run by the Bats tests (planted bugs, stress, seeds).
$(B)/tests/%: tests/progs/%.c | $(B)/tests
	$(CC) $(WARN) $(CFLAGS) -pthread -o $@ $< -lm

# nd_fastpath writes into the shared clock log as a replica could: it links
# the log's protocol.
$(B)/tests/nd_fastpath: tests/progs/nd_fastpath.c allocator/clockpage.c allocator/clockpage.h | $(B)/tests
	$(CC) $(WARN) $(CFLAGS) -pthread -idirafter allocator -o $@ $< allocator/clockpage.c

# lane_server's poison mode leads entries in its own clock page, as a
# replica that knows the run's secret could.
$(B)/tests/lane_server: tests/progs/lane_server.c allocator/clockpage.c allocator/clockpage.h | $(B)/tests
	$(CC) $(WARN) $(CFLAGS) -idirafter allocator -o $@ $< allocator/clockpage.c

# abuse_clock writes over a page's counts: it needs the page's layout.
$(B)/tests/abuse_clock: tests/progs/abuse_clock.c allocator/clockpage.h | $(B)/tests
	$(CC) $(WARN) $(CFLAGS) -pthread -idirafter allocator -o $@ $<

# The same, linked statically: a program without libdiehard.so, whose clock
# reads go through the blob diehard grafts in (supervisor/virt/graft.h).
$(B)/tests/static/nd_fastpath: tests/progs/nd_fastpath.c allocator/clockpage.c allocator/clockpage.h | $(B)/tests/static
	$(CC) $(WARN) $(CFLAGS) -static -pthread -idirafter allocator -o $@ $< allocator/clockpage.c

GO_BUILD = @mkdir -p $(@D) && cd $(@D) && CGO_ENABLED=0 GOCACHE=$(CURDIR)/$(B)/go/cache \
	GOPATH=$(CURDIR)/$(B)/go/path $(GO) build -o $(CURDIR)/$@ $(CURDIR)/$<
$(B)/tests/go/%: tests/progs/go/%.go
	$(GO_BUILD)
$(B)/bench/go/%: bench/go/%.go
	$(GO_BUILD)

# buggy_server is line_server with a planted bug: it #includes line_server.c.
$(B)/tests/buggy_server: tests/progs/line_server.c

$(B)/tests/critical/%: tests/progs/critical/%.c $(B)/libdiehard-critical.so allocator/include/diehard/critical.h
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) -pthread -o $@ $< $(CRIT_LINK)

$(B)/examples/%: allocator/critical/examples/%.c $(B)/libdiehard-critical.so allocator/include/diehard/critical.h
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CFLAGS) -o $@ $< $(CRIT_LINK)

$(B)/tests/static/%: tests/progs/static/%.c | $(B)/tests/static
	$(CC) $(WARN) $(CFLAGS) -static -pthread -o $@ $<

# Without libc at all (their own _start): programs that run before any
# libc would, right from their first arch_prctl.
$(B)/tests/static/%: tests/progs/raw/%.c | $(B)/tests/static
	$(CC) $(WARN) $(CFLAGS) -static -nostdlib -ffreestanding -fno-stack-protector -o $@ $<

# C unit tests of the allocator's modules, under ASan and UBSan.
$(B)/tests/unit/%: tests/unit/%.c tests/unit/tap.h tests/unit/live.h $(ALLOC_CORE) $(ALLOC_HDR) | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Iallocator -pthread -o $@ $< $(ALLOC_CORE)

# Critical memory over its own heap (libdiehard-critical.so's sources).
$(B)/tests/unit/test_critical: tests/unit/test_critical.c tests/unit/tap.h $(CRIT_LIB_SRC) $(ALLOC_HDR) | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Iallocator -Iallocator/include -pthread -o $@ $< $(CRIT_LIB_SRC)

# The voter is a pure module: its unit tests link it alone.
$(B)/tests/unit/test_voter: tests/unit/test_voter.c tests/unit/tap.h voter/voter.c voter/voter.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Ivoter -o $@ $< voter/voter.c

$(B)/tests/unit/test_relines: tests/unit/test_relines.c tests/unit/tap.h voter/relines.c voter/relines.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Ivoter -o $@ $< voter/relines.c

$(B)/tests/unit/test_pastdigits: tests/unit/test_pastdigits.c tests/unit/tap.h voter/pastdigits.c voter/pastdigits.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Ivoter -o $@ $< voter/pastdigits.c

# The supervisor's pure modules (nondeterminism log, ChaCha20, process
# trees, digests, disputes, UTF-8 escaping, socket addresses, file
# extents) likewise.
SUP_PURE := supervisor/virt/ndlog.c supervisor/virt/chacha.c
$(B)/tests/unit/test_ndlog: tests/unit/test_ndlog.c tests/unit/tap.h $(SUP_PURE) supervisor/virt/ndlog.h supervisor/virt/chacha.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/virt -o $@ $< $(SUP_PURE)

$(B)/tests/unit/test_lineage: tests/unit/test_lineage.c tests/unit/tap.h supervisor/virt/lineage.c supervisor/virt/lineage.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/virt -o $@ $< supervisor/virt/lineage.c

$(B)/tests/unit/test_remote: tests/unit/test_remote.c tests/unit/tap.h supervisor/virt/remote.c supervisor/virt/remote.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/virt -o $@ $< supervisor/virt/remote.c

$(B)/tests/unit/test_digest: tests/unit/test_digest.c tests/unit/tap.h supervisor/digest.c supervisor/digest.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor -o $@ $< supervisor/digest.c

$(B)/tests/unit/test_extents: tests/unit/test_extents.c tests/unit/tap.h supervisor/files/extents.c supervisor/files/extents.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/files -o $@ $< supervisor/files/extents.c

# The input and connection logs' memfd with its tail (log.c for its warning).
$(B)/tests/unit/test_inputlog: tests/unit/test_inputlog.c tests/unit/tap.h supervisor/inputlog.c supervisor/inputlog.h supervisor/log.c | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor -o $@ $< supervisor/inputlog.c supervisor/log.c

$(B)/tests/unit/test_utf8: tests/unit/test_utf8.c tests/unit/tap.h supervisor/utf8.c supervisor/utf8.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor -o $@ $< supervisor/utf8.c

$(B)/tests/unit/test_dispute: tests/unit/test_dispute.c tests/unit/tap.h supervisor/virt/dispute.c supervisor/virt/dispute.h voter/voter.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/virt -Ivoter -o $@ $< supervisor/virt/dispute.c

$(B)/tests/unit/test_netaddr: tests/unit/test_netaddr.c tests/unit/tap.h supervisor/virt/netaddr.c supervisor/virt/netaddr.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/virt -o $@ $< supervisor/virt/netaddr.c

# The cgroup files' parsers (supervisor/sandbox/caps.c reads with them).
$(B)/tests/unit/test_cgpath: tests/unit/test_cgpath.c tests/unit/tap.h supervisor/sandbox/cgpath.c supervisor/sandbox/cgpath.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/sandbox -o $@ $< supervisor/sandbox/cgpath.c

# The clock blob as diehard places it (the built blob, embedded).
$(B)/tests/unit/test_clockblob: tests/unit/test_clockblob.c tests/unit/tap.h $(B)/clockblob.bin allocator/clockpage.c $(ALLOC_HDR) allocator/blob/clockblob.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Iallocator -DDIEHARD_CLOCKBLOB='"$(B)/clockblob.bin"' -o $@ $< allocator/clockpage.c

$(B)/tests/unit/test_prologue: tests/unit/test_prologue.c tests/unit/tap.h supervisor/virt/prologue.c supervisor/virt/prologue.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/virt -o $@ $< supervisor/virt/prologue.c

# --ci's parsers of what comes from outside: a replica's trace file and
# fence log, a recording (with the generated protobuf-c code).
$(B)/tests/unit/test_fencelog: tests/unit/test_fencelog.c tests/unit/tap.h supervisor/ci/fenceparse.c supervisor/ci/fencelog.h supervisor/ci/trace.c supervisor/ci/trace.h supervisor/ci/symbolize.c supervisor/ci/symbolize.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/ci -o $@ $< supervisor/ci/fenceparse.c supervisor/ci/trace.c supervisor/ci/symbolize.c $(shell $(PKG_CONFIG) --libs libdw 2>/dev/null)

$(B)/tests/unit/test_trace: tests/unit/test_trace.c tests/unit/tap.h supervisor/ci/trace.c supervisor/ci/trace.h supervisor/ci/symbolize.c supervisor/ci/symbolize.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/ci -o $@ $< supervisor/ci/trace.c supervisor/ci/symbolize.c $(shell $(PKG_CONFIG) --libs libdw 2>/dev/null)

$(B)/tests/unit/test_recording: tests/unit/test_recording.c tests/unit/tap.h supervisor/ci/recording.c supervisor/ci/recording.h supervisor/digest.c $(PROTO_SRC) $(PROTO_HDR) | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/ci -Isupervisor -I$(B)/proto -o $@ $< supervisor/ci/recording.c supervisor/digest.c $(PROTO_SRC) $(shell $(PKG_CONFIG) --libs libprotobuf-c 2>/dev/null)

# The control socket's framing and message checks, fed garbage.
$(B)/tests/unit/test_control: tests/unit/test_control.c tests/unit/tap.h supervisor/services/wire.c supervisor/services/wire.h $(PROTO_SRC) $(PROTO_HDR) | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/services -I$(B)/proto -o $@ $< supervisor/services/wire.c $(PROTO_SRC) $(shell $(PKG_CONFIG) --libs libprotobuf-c 2>/dev/null)

# The proxy's buffer pool.
$(B)/tests/unit/test_bufpool: tests/unit/test_bufpool.c tests/unit/tap.h supervisor/net/bufpool.c supervisor/net/bufpool.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor -Isupervisor/net -o $@ $< supervisor/net/bufpool.c

# The socket factory's diehard end, against fake inits and the real one
# (sandbox.c's loop).
$(B)/tests/unit/test_factory: tests/unit/test_factory.c tests/unit/tap.h supervisor/net/factory.c supervisor/net/factory.h supervisor/sandbox/sandbox.c supervisor/sandbox/sandbox.h | $(B)/tests/unit
	$(CC) $(WARN) $(CFLAGS) $(SAN) -Isupervisor/net -Isupervisor/sandbox -o $@ $< supervisor/net/factory.c supervisor/sandbox/sandbox.c

$(B)/bench/%: bench/%.c bench/prng.h | $(B)/bench
	$(CC) $(WARN) -O2 -g -pthread -o $@ $< -lm

# Critical memory's cost, linked as a user links it.
$(B)/bench/critical: bench/critical.c $(B)/libdiehard-critical.so allocator/include/diehard/critical.h | $(B)/bench
	$(CC) $(WARN) -O2 -g -o $@ $< $(CRIT_LINK)

# The digest benchmark links the supervisor's digest module.
$(B)/bench/digest_speed: bench/digest_speed.c supervisor/digest.c supervisor/digest.h | $(B)/bench
	$(CC) $(WARN) -O2 -g -Isupervisor -o $@ $< supervisor/digest.c

$(B) $(B)/proto $(B)/tests $(B)/tests/static $(B)/tests/unit $(B)/bench:
	mkdir -p $@

# The README's test command. prove gives CI its closing line; --failures
# and --comments print a failing test's reason (and the tests' measured
# notes), which plain prove hides; --timer, how long each file took (the
# suite must stay under 30 minutes).
check: all
	prove --timer --failures --comments --exec 'bats --tap' tests/*.bats

bench: all
	bash bench/run

demo: all
	bash tests/demo.sh

deps:
	bash .ci/deps

INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

install: $(B)/libdiehard.so $(B)/libdiehard-critical.so $(B)/libinject.so $(B)/diehard $(B)/diehard-init $(B)/diehard-symbolize
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(LIBEXECDIR)
	install -d $(DESTDIR)$(INCLUDEDIR)/diehard $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0644 allocator/include/diehard/critical.h $(DESTDIR)$(INCLUDEDIR)/diehard/critical.h
	install -m 0755 $(B)/libdiehard-critical.so.1 $(DESTDIR)$(LIBDIR)/libdiehard-critical.so.1
	ln -sf libdiehard-critical.so.1 $(DESTDIR)$(LIBDIR)/libdiehard-critical.so
	printf '$(call PC_TEXT,$(PREFIX),$(INCLUDEDIR),$(LIBDIR))' >$(DESTDIR)$(PKGCONFIGDIR)/diehard.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/diehard.pc
	install -m 0755 $(B)/diehard-init $(DESTDIR)$(LIBEXECDIR)/diehard-init
	install -m 0755 $(B)/diehard-symbolize $(DESTDIR)$(LIBEXECDIR)/diehard-symbolize
	install -m 0644 $(B)/libdiehard.so $(DESTDIR)$(LIBDIR)/libdiehard.so
	install -m 0755 $(B)/diehard $(DESTDIR)$(BINDIR)/diehard
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 0644 docs/SERVICES.md $(DESTDIR)$(DOCDIR)/SERVICES.md
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR)
	install -m 0644 docs/diehard.1 $(DESTDIR)$(MANDIR)/man1/diehard.1
	@# The shipped units name /usr/local/bin/diehard (PREFIX's default), so
	@# that they verify as they are; another BINDIR is written into the copies.
	for u in $(UNITS_SD); do \
		sed 's|/usr/local/bin/diehard|$(BINDIR)/diehard|g' $$u >$(DESTDIR)$(UNITDIR)/$${u#systemd/} && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${u#systemd/} || exit 1; \
	done

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libdiehard.so $(DESTDIR)$(BINDIR)/diehard $(DESTDIR)$(LIBEXECDIR)/diehard-init $(DESTDIR)$(LIBEXECDIR)/diehard-symbolize
	rm -f $(DESTDIR)$(MANDIR)/man1/diehard.1 $(patsubst systemd/%,$(DESTDIR)$(UNITDIR)/%,$(UNITS_SD))
	rm -f $(DESTDIR)$(LIBDIR)/libdiehard-critical.so $(DESTDIR)$(LIBDIR)/libdiehard-critical.so.1
	rm -f $(DESTDIR)$(INCLUDEDIR)/diehard/critical.h $(DESTDIR)$(PKGCONFIGDIR)/diehard.pc
	-rmdir $(DESTDIR)$(INCLUDEDIR)/diehard 2>/dev/null
	rm -rf $(DESTDIR)$(DOCDIR)

clean:
	rm -rf $(B)
