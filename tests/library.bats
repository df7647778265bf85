#!/usr/bin/env bats
# Structural properties of libdiehard.so that its correctness inside ld.so,
# libc start-up and fork depends on, checked on the built binary.

load helpers

setup() {
	require_lib
}

@test "thread-local state is initial-exec only (no __tls_get_addr, which may allocate)" {
	run readelf -rW "$LIB"
	[ "$status" -eq 0 ]
	[[ $output != *DTPMOD* && $output != *DTPOFF* ]] || fail "general-dynamic TLS relocations:" "$(grep -E 'DTPMOD|DTPOFF' <<<"$output")"
	[[ $output == *TPOFF64* ]] || fail "no initial-exec TLS relocation found: is the TLS gone?"
	run nm -D --undefined-only "$LIB"
	[[ $output != *__tls_get_addr* ]] || fail "imports __tls_get_addr"
}

@test "start-up needs no stdio or another allocator: none is imported (dlopen and dlsym: the next test)" {
	run nm -D --undefined-only "$LIB"
	[ "$status" -eq 0 ]
	local bad
	bad=$(awk '{print $2}' <<<"$output" | sed 's/@.*//' |
		grep -E '^(dlvsym|v?s?n?printf|v?f?printf|fopen|fdopen|fwrite|fputs|puts|setvbuf|getenv|secure_getenv|malloc|calloc|realloc|free|__libc_malloc|strdup)$' || true)
	[[ -z $bad ]] || fail "imports functions that may allocate or recurse:" "$bad"
}

@test "dlopen and dlsym are reached only from the constructor, after start-up: frames_load, for libgcc's unwinder, and exec_start, for libc's execve" {
	run objdump -d --no-show-raw-insn "$LIB"
	[ "$status" -eq 0 ]
	local sites callers
	# Every call or jump to dlopen or dlsym, by the function it is in.
	sites=$(awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /(call|jmp).*<(dlopen|dlsym|dlvsym|dlmopen)@plt>/ { print fn, $NF }' <<<"$output" | sort -u)
	[[ -n $sites ]] || fail "no call to dlopen found: the unwinder is linked again?"
	[[ $(awk '{print $1}' <<<"$sites" | sort -u | tr '\n' ' ') == "<exec_start>: <frames_load>: " ]] ||
		fail "dlopen or dlsym called outside frames_load and exec_start:" "$sites"
	local fn
	for fn in frames_load exec_start; do
		callers=$(awk -v f="<$fn>" '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /(call|jmp)/ && $NF == f { print fn }' <<<"$output" | sort -u)
		[[ $callers == "<start_at_load>:" ]] || fail "$fn called from elsewhere than the constructor:" "$callers"
	done
	run readelf -dW "$LIB"
	[[ $output != *libgcc_s* ]] || fail "libgcc_s is a dependency again: every process pays its start-up"
}

@test "the library exports exactly the allocation API, the __libc_ aliases, the bounded copies, sigaction and signal, the calls that hand the kernel memory, the stat and utime families (file views), critical memory's API, the fast clock path's entry points and trampoline, and diehard's mark" {
	run nm -D --defined-only "$LIB"
	[ "$status" -eq 0 ]
	local got want
	got=$(awk '$2 ~ /[TW]/ {print $3}' <<<"$output" | sort | tr '\n' ' ')
	want=$(printf '%s\n' malloc free calloc realloc reallocarray memalign posix_memalign aligned_alloc \
		valloc pvalloc malloc_usable_size malloc_trim mallopt mallinfo mallinfo2 malloc_stats \
		__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc __libc_pvalloc \
		strcpy strncpy strcat memcpy \
		sigaction signal bsd_signal sysv_signal \
		open open64 openat openat64 __open_2 __open64_2 __openat_2 __openat64_2 creat fopen fopen64 opendir stat lstat fstatat fstat access faccessat \
		stat64 lstat64 fstatat64 fstat64 __xstat __lxstat __fxstat __fxstatat __xstat64 __lxstat64 __fxstat64 __fxstatat64 statx \
		utimensat futimens utimes utime \
		unlink unlinkat rename mkdir rmdir chdir readlink execve execv \
		read write pread pread64 pwrite pwrite64 readv writev recv recvfrom recvmsg send sendto sendmsg \
		bind connect accept accept4 getsockname getpeername getsockopt setsockopt \
		epoll_wait epoll_pwait epoll_ctl poll \
		critical_malloc critical_calloc critical_realloc critical_free critical_load critical_store \
		critical_promote critical_demote critical_is critical_counts \
		diehard_vdso_clock_gettime diehard_vdso_gettimeofday diehard_vdso_time diehard_vdso_real_clock_gettime | sort | tr '\n' ' ')
	[[ $got == "$want" ]] || fail "exports differ" "got:  $got" "want: $want"
	# The data symbol diehard -a checks for (supervisor/elfcheck.c), and no other.
	got=$(awk '$2 ~ /[BDGR]/ {print $3}' <<<"$output" | tr '\n' ' ')
	[[ $got == "diehard_abi_2 " ]] || fail "exported data: $got"
}
