/* test_cgpath.c — the cgroup text parsers (supervisor/sandbox/cgpath.h):
 * real lines of /proc/PID/cgroup, /proc/self/mountinfo and events files,
 * then what the kernel never writes (dot components, missing fields, bad
 * escapes, overflowing counters) and every truncation and flipped byte of
 * the real inputs, which must never read past their length (ASan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpath.h"
#include "tap.h"

static const char cgroup_v1[] = "12:pids:/user.slice/user-1000.slice/session-2.scope\n"
				"11:cpu,cpuacct:/user.slice\n"
				"4:memory:/process_api/40530866853fd59319aa8b22f5ec00f5\n"
				"1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n"
				"0::/user.slice/user-1000.slice/session-2.scope\n";

static const char mountinfo[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:12 master:3 - cgroup cgroup rw,memory\n"
	"39 31 0:36 /sub /sys/fs/cgroup/my\\040pids rw,relatime - cgroup cgroup rw,pids\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

/* Every prefix and every single-byte change of text: the parsers answer
 * without reading past the length given (ASan sees a read past a heap
 * copy of exactly that length). */
static unsigned fuzz(const char *text)
{
	size_t n = strlen(text);
	unsigned answers = 0;
	char out[256], mnt[256], root[256];
	uint64_t v;
	for (size_t cut = 0; cut <= n; cut++) {
		for (int flip = -1; flip < (int)cut; flip++) {
			char *copy = malloc(cut ? cut : 1);
			memcpy(copy, text, cut);
			if (flip >= 0)
				copy[flip] = (char)(copy[flip] ^ (flip % 3 == 0 ? '\n' : flip % 3 == 1 ? ':' : 0x80));
			answers += cgpath_own(copy, cut, "pids", out, sizeof out);
			answers += cgpath_own(copy, cut, NULL, out, sizeof out);
			answers += cgpath_mount(copy, cut, "memory", mnt, sizeof mnt, root, sizeof root);
			answers += cgpath_mount(copy, cut, NULL, mnt, sizeof mnt, root, sizeof root);
			answers += cgpath_counter(copy, cut, "max", &v);
			answers += cgpath_has_word(copy, cut, "pids");
			answers += cgpath_only_pid(copy, cut, 12);
			free(copy);
		}
	}
	return answers;
}

int main(void)
{
	char out[256], mnt[256], root[256];

	CHECK(cgpath_own(cgroup_v1, strlen(cgroup_v1), "pids", out, sizeof out) &&
		      strcmp(out, "/user.slice/user-1000.slice/session-2.scope") == 0,
	      "v1: the pids line");
	CHECK(cgpath_own(cgroup_v1, strlen(cgroup_v1), "cpuacct", out, sizeof out) && strcmp(out, "/user.slice") == 0,
	      "v1: a controller among several (cpu,cpuacct)");
	CHECK(cgpath_own(cgroup_v1, strlen(cgroup_v1), "memory", out, sizeof out) &&
		      strcmp(out, "/process_api/40530866853fd59319aa8b22f5ec00f5") == 0,
	      "v1: the memory line");
	CHECK(!cgpath_own(cgroup_v1, strlen(cgroup_v1), "cpu,cpuacct", out, sizeof out), "v1: a list is not a controller");
	CHECK(!cgpath_own(cgroup_v1, strlen(cgroup_v1), "systemd", out, sizeof out), "v1: name=systemd is not 'systemd'");
	CHECK(cgpath_own(cgroup_v1, strlen(cgroup_v1), NULL, out, sizeof out) &&
		      strcmp(out, "/user.slice/user-1000.slice/session-2.scope") == 0,
	      "v2: the 0:: line");
	CHECK(!cgpath_own(cgroup_v1, strlen(cgroup_v1), "blkio", out, sizeof out), "no line: no match");
	CHECK(!cgpath_own(cgroup_v1, strlen(cgroup_v1), "pids", out, 10), "a path longer than the buffer: no match");
	CHECK(cgpath_own("0::/\n", 5, NULL, out, sizeof out) && strcmp(out, "/") == 0, "the root cgroup");
	CHECK(cgpath_own("0::/a:b\n", 8, NULL, out, sizeof out) && strcmp(out, "/a:b") == 0, "a ':' in a cgroup name");
	CHECK(!cgpath_own("0::/../..\n", 10, NULL, out, sizeof out), "outside the cgroup namespace (/../..): no match");
	CHECK(!cgpath_own("0::/a/./b\n", 10, NULL, out, sizeof out), "a '.' component: no match");
	CHECK(!cgpath_own("0::/a//b\n", 9, NULL, out, sizeof out), "an empty component: no match");
	CHECK(!cgpath_own("0::relative\n", 12, NULL, out, sizeof out), "a relative path: no match");
	CHECK(!cgpath_own("0::\n", 4, NULL, out, sizeof out), "an empty path: no match");
	CHECK(!cgpath_own("0::/a\0b\n", 8, NULL, out, sizeof out), "a NUL in the path: no match");
	CHECK(!cgpath_own("1::/a\n", 6, NULL, out, sizeof out), "v2 is hierarchy 0 only");
	CHECK(!cgpath_own("garbage\n:\n::\n", 13, "pids", out, sizeof out), "garbage: no match");
	CHECK(cgpath_own("4:memory:/x", 11, "memory", out, sizeof out) && strcmp(out, "/x") == 0,
	      "a last line without its newline");

	CHECK(cgpath_mount(mountinfo, strlen(mountinfo), "memory", mnt, sizeof mnt, root, sizeof root) &&
		      strcmp(mnt, "/sys/fs/cgroup/memory") == 0 && strcmp(root, "/") == 0,
	      "mountinfo: memory, with optional fields before '-'");
	CHECK(cgpath_mount(mountinfo, strlen(mountinfo), "pids", mnt, sizeof mnt, root, sizeof root) &&
		      strcmp(mnt, "/sys/fs/cgroup/my pids") == 0 && strcmp(root, "/sub") == 0,
	      "mountinfo: pids, an escaped space, a root below the hierarchy's");
	CHECK(cgpath_mount(mountinfo, strlen(mountinfo), "cpuacct", mnt, sizeof mnt, root, sizeof root) &&
		      strcmp(mnt, "/sys/fs/cgroup/cpu,cpuacct") == 0,
	      "mountinfo: a controller among the super options");
	CHECK(cgpath_mount(mountinfo, strlen(mountinfo), NULL, mnt, sizeof mnt, root, sizeof root) &&
		      strcmp(mnt, "/sys/fs/cgroup/unified") == 0,
	      "mountinfo: cgroup2");
	CHECK(!cgpath_mount(mountinfo, strlen(mountinfo), "blkio", mnt, sizeof mnt, root, sizeof root),
	      "mountinfo: no such hierarchy");
	CHECK(!cgpath_mount(mountinfo, strlen(mountinfo), "mode=755", mnt, sizeof mnt, root, sizeof root),
	      "mountinfo: a tmpfs option is no cgroup controller");
	static const char dotdot[] = "39 31 0:36 /.. /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
	CHECK(!cgpath_mount(dotdot, strlen(dotdot), "pids", mnt, sizeof mnt, root, sizeof root),
	      "mountinfo: a root outside the cgroup namespace (/..): no match");
	static const char badesc[] = "39 31 0:36 / /sys/fs/cgroup/p\\04 rw - cgroup cgroup rw,pids\n";
	CHECK(!cgpath_mount(badesc, strlen(badesc), "pids", mnt, sizeof mnt, root, sizeof root),
	      "mountinfo: a cut escape: no match");
	static const char nul[] = "39 31 0:36 / /sys/fs/cgroup/p\\000 rw - cgroup cgroup rw,pids\n";
	CHECK(!cgpath_mount(nul, strlen(nul), "pids", mnt, sizeof mnt, root, sizeof root),
	      "mountinfo: an escaped NUL: no match");
	static const char nodash[] = "39 31 0:36 / /sys/fs/cgroup/pids rw cgroup cgroup rw,pids\n";
	CHECK(!cgpath_mount(nodash, strlen(nodash), "pids", mnt, sizeof mnt, root, sizeof root),
	      "mountinfo: no '-' separator: no match");
	CHECK(!cgpath_mount(mountinfo, strlen(mountinfo), "memory", mnt, 8, root, sizeof root),
	      "mountinfo: a mount point longer than the buffer: no match");

	CHECK(cgpath_dir("/sys/fs/cgroup/memory", "/", "/a/b", out, sizeof out) &&
		      strcmp(out, "/sys/fs/cgroup/memory/a/b") == 0,
	      "dir: under a mount of the whole hierarchy");
	CHECK(cgpath_dir("/sys/fs/cgroup/memory", "/", "/", out, sizeof out) && strcmp(out, "/sys/fs/cgroup/memory") == 0,
	      "dir: the root cgroup is the mount point");
	CHECK(cgpath_dir("/mnt", "/sub", "/sub/x", out, sizeof out) && strcmp(out, "/mnt/x") == 0,
	      "dir: a mount of a subtree");
	CHECK(cgpath_dir("/mnt", "/sub", "/sub", out, sizeof out) && strcmp(out, "/mnt") == 0, "dir: the subtree's root");
	CHECK(!cgpath_dir("/mnt", "/sub", "/subway/x", out, sizeof out), "dir: /subway is not below /sub");
	CHECK(!cgpath_dir("/mnt", "/sub", "/other", out, sizeof out), "dir: outside the mount");
	CHECK(cgpath_dir("/", "/", "/a", out, sizeof out) && strcmp(out, "/a") == 0, "dir: a mount at /");
	CHECK(!cgpath_dir("/sys/fs/cgroup/memory", "/", "/a/b", out, 12), "dir: too long for the buffer");

	uint64_t v = 7;
	CHECK(cgpath_counter("max 3\n", 6, "max", &v) && v == 3, "counter: pids.events");
	static const char memev[] = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 1\n";
	CHECK(cgpath_counter(memev, strlen(memev), "oom_kill", &v) && v == 1, "counter: oom_kill, not oom or oom_group_kill");
	CHECK(cgpath_counter(memev, strlen(memev), "max", &v) && v == 12, "counter: max among others");
	static const char oomctl[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
	CHECK(cgpath_counter(oomctl, strlen(oomctl), "oom_kill", &v) && v == 4, "counter: memory.oom_control (v1)");
	CHECK(cgpath_counter("max 18446744073709551615", 24, "max", &v) && v == UINT64_MAX, "counter: the largest value");
	CHECK(!cgpath_counter("max 18446744073709551616\n", 25, "max", &v), "counter: past 64 bits: no match");
	CHECK(!cgpath_counter("max -1\n", 7, "max", &v), "counter: negative: no match");
	CHECK(!cgpath_counter("max \n", 5, "max", &v), "counter: no digits: no match");
	CHECK(!cgpath_counter("max 3x\n", 7, "max", &v), "counter: trailing garbage: no match");
	CHECK(!cgpath_counter("maxi 3\n", 7, "max", &v), "counter: another key that starts alike");

	CHECK(cgpath_has_word("cpuset cpu io memory pids\n", 26, "pids"), "words: the last one");
	CHECK(cgpath_has_word("memory pids\n", 12, "memory"), "words: the first one");
	CHECK(!cgpath_has_word("memory pids\n", 12, "mem"), "words: a prefix is not a word");
	CHECK(!cgpath_has_word("", 0, "pids"), "words: an empty file");
	CHECK(!cgpath_has_word("pidsx", 5, "pids"), "words: a longer word");

	CHECK(cgpath_only_pid("12\n", 3, 12), "procs: only us");
	CHECK(!cgpath_only_pid("12\n13\n", 6, 12), "procs: another process too");
	CHECK(!cgpath_only_pid("13\n", 3, 12), "procs: someone else");
	CHECK(!cgpath_only_pid("", 0, 12), "procs: empty");
	CHECK(!cgpath_only_pid("12x\n", 4, 12), "procs: garbage");
	CHECK(!cgpath_only_pid("99999999999999999999\n", 21, 12), "procs: an absurd pid");

	unsigned a = fuzz(cgroup_v1), b = fuzz(mountinfo), c = fuzz("max 3\noom_kill 1\n12\n");
	CHECK(a + b + c > 0, "every truncation and flipped byte of the inputs answered within bounds (%u, %u, %u matches)",
	      a, b, c);
	return tap_done();
}
