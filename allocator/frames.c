/* frames.c — see frames.h.
 *
 * libgcc's unwinder is not a dependency of libdiehard.so: linked, it cost
 * every process about 0.1 ms of start-up (one more library to map and
 * relocate, and a constructor that probes the CPU, which traps under a
 * hypervisor) for the few runs that want stacks. frames_load opens it in
 * those. Its two entry points are published once, release then acquire:
 * a thread that sees _Unwind_Backtrace sees _Unwind_GetIP too. */
#include "frames.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unwind.h>

typedef _Unwind_Reason_Code (*backtrace_fn)(_Unwind_Trace_Fn, void *);
typedef _Unwind_Ptr (*get_ip_fn)(struct _Unwind_Context *);

static _Atomic(backtrace_fn) unwind_backtrace;
static get_ip_fn unwind_get_ip;

bool frames_load(void)
{
	if (atomic_load_explicit(&unwind_backtrace, memory_order_acquire) != NULL)
		return true;
	/* Never closed: the library stays for the process's life. */
	void *lib = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		return false;
	backtrace_fn bt = (backtrace_fn)dlsym(lib, "_Unwind_Backtrace");
	get_ip_fn ip = (get_ip_fn)dlsym(lib, "_Unwind_GetIP");
	if (bt == NULL || ip == NULL)
		return false;
	unwind_get_ip = ip;
	atomic_store_explicit(&unwind_backtrace, bt, memory_order_release);
	return true;
}

/* libdiehard.so's load address, found on first use (dladdr of a function of
 * ours); 0 until then or if dladdr cannot say. */
static _Atomic uintptr_t own_base;

bool frames_own(uintptr_t pc)
{
	uintptr_t base = atomic_load_explicit(&own_base, memory_order_relaxed);
	Dl_info info;
	if (base == 0) {
		if (dladdr((void *)frames_own, &info) == 0 || info.dli_fbase == NULL)
			return false;
		base = (uintptr_t)info.dli_fbase;
		atomic_store_explicit(&own_base, base, memory_order_relaxed);
	}
	return dladdr((void *)(pc - 1), &info) != 0 && (uintptr_t)info.dli_fbase == base;
}

struct unwind_state {
	uintptr_t *pcs;
	unsigned n, max;
	uintptr_t from; /* capture_from: the interrupted instruction's address */
	bool leading;   /* still before the first frame kept */
};

static _Unwind_Reason_Code on_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct unwind_state *u = arg;
	uintptr_t pc = unwind_get_ip(ctx);
	if (pc == 0 || u->n == u->max)
		return _URC_END_OF_STACK;
	if (u->leading) {
		if (u->from != 0 ? pc != u->from : frames_own(pc))
			return _URC_NO_REASON;
		if (u->from != 0)
			pc++; /* the faulting instruction itself: symbolize looks at pc - 1 */
	}
	u->leading = false;
	u->pcs[u->n++] = pc;
	return _URC_NO_REASON;
}

static unsigned walk(uintptr_t from, uintptr_t *pcs, unsigned max)
{
	backtrace_fn bt = atomic_load_explicit(&unwind_backtrace, memory_order_acquire);
	if (bt == NULL)
		return 0;
	struct unwind_state u = { .pcs = pcs, .n = 0, .max = max, .from = from, .leading = true };
	bt(on_frame, &u);
	return u.n;
}

unsigned frames_capture(uintptr_t *pcs, unsigned max)
{
	return walk(0, pcs, max);
}

unsigned frames_capture_from(uintptr_t ip, uintptr_t *pcs, unsigned max)
{
	return ip != 0 ? walk(ip, pcs, max) : 0;
}
