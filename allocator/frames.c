/* frames.c — see frames.h. */
#include "frames.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unwind.h>

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
	bool leading; /* still in the allocator's own frames */
};

static _Unwind_Reason_Code on_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct unwind_state *u = arg;
	uintptr_t pc = _Unwind_GetIP(ctx);
	if (pc == 0 || u->n == u->max)
		return _URC_END_OF_STACK;
	if (u->leading && frames_own(pc))
		return _URC_NO_REASON;
	u->leading = false;
	u->pcs[u->n++] = pc;
	return _URC_NO_REASON;
}

unsigned frames_capture(uintptr_t *pcs, unsigned max)
{
	struct unwind_state u = { .pcs = pcs, .n = 0, .max = max, .leading = true };
	_Unwind_Backtrace(on_frame, &u);
	return u.n;
}
