#!/bin/bash
# nspawn.sh — a real systemd (Debian 12's, as PID 1) in a container, for
# tests/systemd_boot.bats. Root only.
#
#   nspawn.sh setup                    the tools and the cached root (idempotent)
#   nspawn.sh boot NAME [NSPAWN-ARGS]  boots NAME in the background, waits for
#                                      `systemctl is-system-running` (running or
#                                      degraded; 30 s at most)
#   nspawn.sh exec NAME CMD...         runs CMD inside (nsenter into every namespace)
#   nspawn.sh stop NAME                powers it off, waits, removes its cgroups
#
# The host's systemd is never upgraded: systemd-container of the host's exact
# systemd version is downloaded and unpacked into the cache (installing it
# would pull a newer systemd). The root is made by mmdebstrap (minbase,
# systemd, dbus and what the tests and diehard's libraries need) once and
# kept in the cache with a stamp of its package list; each boot runs over it
# with --volatile=overlay, so nothing a test does stays. The host keeps
# cgroup v1 controllers with v2 beside them: nspawn runs in a cgroup of its
# own in both hierarchies (else it makes payload/ and supervisor/ at their
# roots), with cgroup v2 alone inside (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1;
# no controllers there: caps are not enforced inside).
set -euo pipefail

C=${DIEHARD_NSPAWN_CACHE:-/var/cache/diehard-nspawn}
NSPAWN=$C/tools/usr/bin/systemd-nspawn
SUITE=bookworm
MIRROR=${DIEHARD_NSPAWN_MIRROR:-http://deb.debian.org/debian}
PKGS=systemd,systemd-sysv,dbus,python3,curl,iproute2,procps,micro-httpd,libevent-2.1-7,libjansson4,libseccomp2,libdw1,libelf1,libprotobuf-c1
RUN=/run/diehard-nspawn

say() { echo "nspawn.sh: $*" >&2; }

setup_tools() {
	local v d
	v=$(dpkg-query -W -f='${Version}' systemd)
	[[ -x $NSPAWN && $(cat "$C/tools/.version" 2>/dev/null) == "$v" ]] && return
	d=$(mktemp -d)
	chmod 755 "$d"
	(cd "$d" && apt-get download -q "systemd-container=$v" >/dev/null) ||
		{ say "systemd-container=$v is not in the archive (apt-cache policy systemd-container)"; exit 1; }
	rm -rf "$C/tools"
	mkdir -p "$C/tools"
	dpkg-deb -x "$d"/systemd-container_*.deb "$C/tools"
	rm -rf "$d"
	echo "$v" >"$C/tools/.version"
}

setup_mmdebstrap() {
	command -v mmdebstrap >/dev/null && return
	if apt-get -s -q --no-install-recommends install mmdebstrap | grep -Eq '^Inst (systemd|libsystemd|libudev)'; then
		say "installing mmdebstrap would upgrade the host's systemd: refusing"
		exit 1
	fi
	apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
}

build_root() {
	[[ -d $C/root && $(cat "$C/root.pkgs" 2>/dev/null) == "$SUITE $PKGS" ]] && return
	rm -rf "$C/root.tmp"
	mmdebstrap -q --variant=minbase --include="$PKGS" "$SUITE" "$C/root.tmp" "$MIRROR"
	rm -f "$C/root.tmp/etc/hostname" # the host's name otherwise
	rm -rf "$C/root"
	mv "$C/root.tmp" "$C/root"
	echo "$SUITE $PKGS" >"$C/root.pkgs"
}

setup() {
	mkdir -p "$C"
	# One setup at a time (two test files, or two runs).
	exec 9>"$C/.lock"
	flock 9
	setup_tools
	setup_mmdebstrap
	build_root
	exec 9>&-
}

# The container's cgroups removed, whatever is left in them killed first
# (a container whose nspawn died keeps running, reparented): 1 when
# something survives.
cg_clean() {
	local h d i pids left=0
	for h in unified systemd; do
		d=/sys/fs/cgroup/$h/dh-nspawn-$1
		[[ -d $d ]] || continue
		for i in $(seq 50); do
			pids=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
			[[ -z $pids ]] && break
			if [[ -e $d/cgroup.kill ]]; then
				echo 1 >"$d/cgroup.kill" 2>/dev/null || true
			else
				kill -KILL $pids 2>/dev/null || true
			fi
			sleep 0.1
		done
		if [[ -n $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null) ]]; then
			say "processes left in $d after SIGKILL"
			left=1
			continue
		fi
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
	return $left
}

alive() { [[ -f $RUN/$1/nspawn.pid ]] && kill -0 "$(cat "$RUN/$1/nspawn.pid")" 2>/dev/null; }
leader() { cat "$RUN/$1/leader.pid"; }
in_ct() {
	local n=$1
	shift
	nsenter -t "$(leader "$n")" -a "$@"
}

boot() {
	local name=$1 h ns l= i st=
	shift
	alive "$name" && stop "$name"
	cg_clean "$name"
	mkdir -p "$RUN/$name"
	for h in unified systemd; do mkdir -p "/sys/fs/cgroup/$h/dh-nspawn-$name"; done
	(
		for h in unified systemd; do echo "$BASHPID" >"/sys/fs/cgroup/$h/dh-nspawn-$name/cgroup.procs"; done
		SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec "$NSPAWN" -D "$C/root" --machine="$name" \
			--boot --register=no --keep-unit --private-network --volatile=overlay --console=read-only "$@" \
			</dev/null >"$RUN/$name/console.log" 2>&1
	) &
	ns=$!
	echo "$ns" >"$RUN/$name/nspawn.pid"
	# The leader: nspawn's child that is pid 1 of its namespace.
	for i in $(seq 400); do
		l=$(awk '{ print $1 }' "/proc/$ns/task/$ns/children" 2>/dev/null || true)
		[[ -n $l ]] && grep -qE '^NSpid:.*[[:space:]]1$' "/proc/$l/status" 2>/dev/null && break
		l=
		kill -0 "$ns" 2>/dev/null || break
		sleep 0.05
	done
	[[ -n $l ]] || { say "no container came up:"; cat "$RUN/$name/console.log" >&2; return 1; }
	echo "$l" >"$RUN/$name/leader.pid"
	for i in $(seq 300); do
		st=$(nsenter -t "$l" -a systemctl is-system-running 2>/dev/null || true)
		case $st in running | degraded) return 0 ;; esac
		sleep 0.1
	done
	say "$name: is-system-running says '$st' after 30 s"
	return 1
}

stop() {
	local name=$1 ns i
	if alive "$name"; then
		ns=$(cat "$RUN/$name/nspawn.pid")
		in_ct "$name" systemctl poweroff --no-block 2>/dev/null || kill -s SIGRTMIN+4 "$(leader "$name")" || true
		for i in $(seq 300); do
			kill -0 "$ns" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$ns" 2>/dev/null; then
			say "$name still up after 30 s: SIGKILL"
			kill -KILL "$ns"
			sleep 1
		fi
	fi
	local ok=0
	cg_clean "$name" || ok=1
	rm -rf "${RUN:?}/$name"
	return $ok
}

if [[ ${1:-} =~ ^(boot|exec|stop)$ && ! ${2:-} =~ ^[A-Za-z0-9][A-Za-z0-9-]{0,40}$ ]]; then
	say "a container's name is letters, digits and dashes, not '${2:-}'"
	exit 2
fi

case ${1:-} in
setup) setup ;;
boot) shift; boot "$@" ;;
exec) shift; n=$1; shift; in_ct "$n" "$@" ;;
stop) stop "$2" ;;
*) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
