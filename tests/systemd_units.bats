#!/usr/bin/env bats
# The systemd units in systemd/ and the man page docs/diehard.1: every unit,
# as `make install` writes it, passes systemd-analyze verify (which a
# misspelled setting fails) and stays at or below its security exposure;
# the man page renders without a warning and has a NAME line; make install
# and make uninstall put and remove both. No systemd is started.

load helpers

# exposure_of UNIT: the highest exposure allowed, in tenths (systemd-analyze
# security --threshold); docs/SERVICES.md, "Hardening", has the numbers.
exposure_of() {
	case $1 in
	diehard-example-echo@.service | diehard-micro-httpd@.service) echo 13 ;;
	diehard-example-filter.service) echo 16 ;;
	diehard-example-notify.service) echo 23 ;;
	diehard@.service) echo 37 ;;
	*) return 1 ;;
	esac
}

setup() {
	require_diehard
	require_cmd systemd-analyze make
	T=$BATS_TEST_TMPDIR
}

# install_prefix: make install into PREFIX=$T/prefix (no DESTDIR), so that
# the installed units name $T/prefix/bin/diehard, which exists: verify then
# checks the units exactly as installed. Sets UNITS_DIR.
install_prefix() {
	make -s -C "$ROOT" install PREFIX="$T/prefix" >"$T/install.log" 2>&1 ||
		fail "make install PREFIX=$T/prefix failed:" "$(tail -n 20 "$T/install.log")"
	UNITS_DIR=$T/prefix/lib/systemd/system
}

# verify UNIT-FILE: systemd-analyze verify, strict; its output in $T/verify.log.
verify() {
	systemd-analyze verify --man=no --recursive-errors=yes "$1" >"$T/verify.log" 2>&1
}

@test "every unit in systemd/ is installed and passes systemd-analyze verify" {
	install_prefix
	local u n=0
	for u in "$ROOT"/systemd/*.service "$ROOT"/systemd/*.socket; do
		local f=$UNITS_DIR/${u##*/}
		[[ -f $f ]] || fail "make install did not install ${u##*/}"
		grep -q "$T/prefix/bin/diehard" "$f" || grep -q '^ListenStream=' "$f" ||
			fail "${u##*/}: the installed copy does not name $T/prefix/bin/diehard"
		verify "$f" || fail "systemd-analyze verify ${u##*/} failed:" "$(cat "$T/verify.log")"
		n=$((n + 1))
	done
	((n >= 7)) || fail "only $n units in systemd/"
}

@test "verify is a real check: a misspelled setting or a missing binary fails it" {
	install_prefix
	mkdir "$T/bad"
	sed 's/^ProtectHome=/ProtectHmoe=/' "$UNITS_DIR/diehard-example-notify.service" >"$T/bad/diehard-example-notify.service"
	! verify "$T/bad/diehard-example-notify.service" || fail "a misspelled setting passed verify"
	grep -q ProtectHmoe "$T/verify.log" || fail "verify did not name the misspelled key:" "$(cat "$T/verify.log")"
	sed "s|$T/prefix/bin/diehard|$T/nowhere/diehard|" "$UNITS_DIR/diehard-example-filter.service" >"$T/bad/diehard-example-filter.service"
	! verify "$T/bad/diehard-example-filter.service" || fail "a missing ExecStart binary passed verify"
	# A socket whose service is missing.
	cp "$UNITS_DIR/diehard-example-echo.socket" "$T/bad/"
	! verify "$T/bad/diehard-example-echo.socket" || fail "a socket without its service passed verify"
}

@test "every service unit's security exposure is at or below its threshold" {
	install_prefix
	local u name max
	for u in "$ROOT"/systemd/*.service; do
		name=${u##*/}
		max=$(exposure_of "$name") || fail "$name has no exposure threshold in this test"
		systemd-analyze security --offline=yes --threshold="$max" "$UNITS_DIR/$name" >"$T/security.log" 2>&1 ||
			fail "$name is above exposure $max:" "$(grep -E '^(✗|→)' "$T/security.log")"
	done
}

@test "every service unit has KillMode=mixed, no capabilities, a user namespace allowed and no ProtectKernelTunables" {
	local u
	for u in "$ROOT"/systemd/*.service; do
		grep -qx 'KillMode=mixed' "$u" || fail "${u##*/}: no KillMode=mixed (the replicas would get SIGTERM twice)"
		grep -qx 'CapabilityBoundingSet=' "$u" || fail "${u##*/}: capabilities not dropped"
		# The replicas' namespaces (sandbox.c): user, pid, mount and IPC,
		# and a network one each unless --net host. systemd refuses one
		# the unit does not allow, and diehard then runs them with none.
		if grep -q -- '--net host' "$u"; then
			grep -Eqx 'RestrictNamespaces=user pid mnt ipc( cgroup)?' "$u" ||
				fail "${u##*/}: RestrictNamespaces must be 'user pid mnt ipc' (and cgroup where delegated)"
		else
			grep -Eqx 'RestrictNamespaces=user pid mnt ipc net( cgroup)?' "$u" ||
				fail "${u##*/}: --net private: RestrictNamespaces must be 'user pid mnt ipc net'"
		fi
		! grep -Eq '^(ProtectKernelTunables|ProtectKernelLogs)=(yes|true|1)' "$u" ||
			fail "${u##*/}: ProtectKernelTunables/ProtectKernelLogs break the replicas' /proc"
		if grep -q '^SystemCallFilter=@' "$u"; then
			grep -Eq '^SystemCallFilter=.*\<mount\>.*\<umount2\>.*\<seccomp\>' "$u" ||
				fail "${u##*/}: a system call filter without mount, umount2 and seccomp"
		fi
	done
	grep -qx 'NotifyAccess=main' "$ROOT/systemd/diehard-example-notify.service" || fail "the notify example lacks NotifyAccess=main"
}

@test "every service unit caps the whole service (TasksMax=, MemoryMax=); a delegated one (pids and memory; never with ExecReload=) may write its subtree and allows cgroup namespaces, the others keep the cgroups read-only" {
	local u n=0
	for u in "$ROOT"/systemd/*.service; do
		grep -Eqx 'TasksMax=[0-9]+' "$u" || fail "${u##*/}: no TasksMax= (a number)"
		grep -Eqx 'MemoryMax=([0-9]+[KMG]?|[0-9]+%)' "$u" || fail "${u##*/}: no MemoryMax="
		if grep -q '^Delegate=' "$u"; then
			n=$((n + 1))
			grep -qx 'Delegate=pids memory' "$u" || fail "${u##*/}: Delegate= must name pids and memory"
			grep -qx 'ProtectControlGroups=no' "$u" ||
				fail "${u##*/}: delegated, but ProtectControlGroups= keeps /sys/fs/cgroup read-only"
			grep -Eqx 'RestrictNamespaces=user pid mnt ipc( net)? cgroup' "$u" ||
				fail "${u##*/}: delegated: each replica's cgroup namespace must be allowed"
		else
			grep -qx 'ProtectControlGroups=yes' "$u" || fail "${u##*/}: not delegated, so ProtectControlGroups=yes"
			grep -Eqx 'RestrictNamespaces=user pid mnt ipc( net)?' "$u" || fail "${u##*/}: not delegated: no cgroup namespaces"
		fi
	done
	# The filter delegates; a unit with ExecReload= cannot (systemd < 254
	# puts the reload command into the unit's own cgroup, which must stay
	# empty once controllers are enabled below it).
	grep -q '^Delegate=' "$ROOT/systemd/diehard-example-filter.service" || fail "the filter must delegate"
	for u in "$ROOT"/systemd/*.service; do
		! { grep -q '^Delegate=' "$u" && grep -q '^ExecReload=' "$u"; } || fail "${u##*/}: Delegate= with ExecReload="
	done
	((n >= 1)) || fail "no delegated unit"
}

@test "verify checks the caps: a misspelled TasksMax= or a MemoryMax= that is no size fails it" {
	install_prefix
	mkdir "$T/bad"
	sed 's/^TasksMax=/TaskMax=/' "$UNITS_DIR/diehard@.service" >"$T/bad/diehard@.service"
	! verify "$T/bad/diehard@.service" || fail "a misspelled TasksMax= passed verify"
	grep -q TaskMax "$T/verify.log" || fail "verify did not name the misspelled key:" "$(cat "$T/verify.log")"
	sed 's/^MemoryMax=.*/MemoryMax=lots/' "$UNITS_DIR/diehard-example-filter.service" >"$T/bad/diehard-example-filter.service"
	! verify "$T/bad/diehard-example-filter.service" || fail "MemoryMax=lots passed verify"
}

@test "the man page renders without warnings and lexgrog finds its NAME line" {
	require_cmd man lexgrog
	man --warnings -l "$ROOT/docs/diehard.1" >"$T/man.out" 2>"$T/man.err" || fail "man failed:" "$(cat "$T/man.err")"
	[[ ! -s $T/man.err ]] || fail "man --warnings:" "$(cat "$T/man.err")"
	lexgrog "$ROOT/docs/diehard.1" >"$T/lexgrog.out" 2>&1 || fail "lexgrog failed:" "$(cat "$T/lexgrog.out")"
	grep -q '"diehard - ' "$T/lexgrog.out" || fail "lexgrog:" "$(cat "$T/lexgrog.out")"
}

@test "the man page names every option of diehard --help and the service options" {
	local opt
	sup --help >"$T/help.out"
	for opt in $(grep -oE -- '--[a-z][a-z-]+' "$T/help.out" | sort -u) --control --stop-timeout --json --follow; do
		grep -qF -- "${opt//-/\\-}" "$ROOT/docs/diehard.1" || fail "docs/diehard.1 does not mention $opt"
	done
	for opt in NOTIFY_SOCKET WATCHDOG_USEC LISTEN_FDS LISTEN_FDNAMES LISTEN_PID RUNTIME_DIRECTORY JOURNAL_STREAM DIEHARD_SEED DIEHARD_FILL; do
		grep -q "^\.B.* $opt\>" "$ROOT/docs/diehard.1" || fail "docs/diehard.1 does not describe $opt"
	done
}

@test "make install DESTDIR= installs the units and the man page; make uninstall removes them" {
	local d=$T/dest u
	make -s -C "$ROOT" install DESTDIR="$d" >"$T/install.log" 2>&1 || fail "make install failed:" "$(tail -n 20 "$T/install.log")"
	[[ -f $d/usr/local/share/man/man1/diehard.1 ]] || fail "no man page in $d/usr/local/share/man/man1"
	[[ -x $d/usr/local/bin/diehard ]] || fail "no diehard in $d/usr/local/bin"
	for u in "$ROOT"/systemd/*.service "$ROOT"/systemd/*.socket; do
		# The default BINDIR is what the shipped units name: copied as they are.
		cmp -s "$u" "$d/usr/local/lib/systemd/system/${u##*/}" || fail "${u##*/} not installed unchanged"
	done
	# Installed where the binary is, they verify (with the DESTDIR's path
	# in ExecStart, since systemd-analyze cannot look inside a DESTDIR).
	mkdir "$T/v"
	sed "s|/usr/local/bin/diehard|$d/usr/local/bin/diehard|" "$d/usr/local/lib/systemd/system/diehard-example-notify.service" >"$T/v/diehard-example-notify.service"
	verify "$T/v/diehard-example-notify.service" || fail "verify failed:" "$(cat "$T/verify.log")"
	make -s -C "$ROOT" uninstall DESTDIR="$d" >"$T/uninstall.log" 2>&1 || fail "make uninstall failed:" "$(cat "$T/uninstall.log")"
	[[ ! -e $d/usr/local/share/man/man1/diehard.1 ]] || fail "make uninstall left the man page"
	[[ -z $(find "$d/usr/local/lib/systemd/system" -type f) ]] || fail "make uninstall left units:" "$(find "$d/usr/local/lib/systemd/system" -type f)"
}
