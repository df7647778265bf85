#!/usr/bin/env bats
# The shipped units under a real systemd (issue 41; docs/SERVICES.md): Debian
# 12's systemd 252 booted as PID 1 in a systemd-nspawn container
# (tests/tools/nspawn.sh: its root made once by mmdebstrap and cached; each
# boot over it is volatile). The build is bound read-only at
# /opt/diehard/build, tests/tools at /opt/diehard/tools; each unit is
# installed as shipped, only its ExecStart pointed there:
# - diehard-example-notify.service around a notify daemon in bash
#   (tests/tools/notify_daemon.sh): ready by majority, the status text, the
#   replicas in namespaces of their own (the hardening it claims lets
#   diehard make them: no warning), diehard status on its control socket,
#   reload, a replica that stops pinging its watchdog replaced, journal
#   priorities, a clean stop;
# - diehard-micro-httpd.socket with its service: socket activation, one
#   replicated micro-httpd per connection, real curl.
# Root only (nspawn, cgroups); every wait bounded.

load helpers

NSPAWN="$ROOT/tests/tools/nspawn.sh"
# The container's name, one per run of this file (bats sources the file in
# each test's own process).
CT=dh-test-$(printf '%s' "$BATS_FILE_TMPDIR" | cksum | cut -d' ' -f1)

setup_file() {
	[[ $EUID == 0 ]] || skip "needs root (systemd-nspawn)"
	bash "$NSPAWN" setup 3>&- || return 1
	bash "$NSPAWN" boot "$CT" --bind-ro="$ROOT/build:/opt/diehard/build" \
		--bind-ro="$ROOT/tests/tools:/opt/diehard/tools" 3>&- || return 1
}

teardown_file() {
	[[ $EUID == 0 ]] || return 0
	bash "$NSPAWN" stop "$CT" 3>&- || true
}

setup() {
	[[ $EUID == 0 ]] || skip "needs root (systemd-nspawn)"
	require_diehard
	require_jq
	T=$BATS_TEST_TMPDIR
}

ct() {
	bash "$NSPAWN" exec "$CT" "$@" 3>&-
}

# install_unit FILE [SED-EXPR]: the shipped unit FILE into the container's
# /etc/systemd/system, its ExecStart's diehard the build's (and SED-EXPR).
install_unit() {
	sed -e 's|/usr/local/bin/diehard|/opt/diehard/build/diehard|' ${2:+-e "$2"} "$ROOT/systemd/$1" |
		ct tee "/etc/systemd/system/$1" >/dev/null
	ct systemctl daemon-reload
}

show() {
	ct systemctl show -p "$2" --value "$1"
}

journal() {
	ct journalctl -u "$1" --no-pager -o cat
}

@test "diehard-example-notify.service under systemd 252: ready by majority, status text, replicas in namespaces of their own, diehard status, reload, a watchdog replacement, journal priorities, a clean stop" {
	install_unit diehard-example-notify.service \
		's|-- /usr/local/bin/mydaemon|-v --share /tmp --respawns 4 -- /opt/diehard/tools/notify_daemon.sh --odd /tmp/odd|; s|^WatchdogSec=.*|WatchdogSec=3s|'
	ct systemctl start diehard-example-notify.service ||
		fail "the start failed" "$(journal diehard-example-notify.service | tail -n 20)"
	[[ $(show diehard-example-notify.service ActiveState) == active ]] || fail "not active"
	local st
	st=$(show diehard-example-notify.service StatusText)
	[[ $st == "3/3 replicas live, "*"; serving" ]] || fail "status text: '$st'"
	# The hardening the unit claims leaves diehard its namespaces: each
	# replica under a diehard-init of its own, and no fallback said.
	[[ $(ct pgrep -c -x diehard-init) -ge 3 ]] || fail "no diehard-init per replica:" "$(ct ps -eo pid,comm,args)"
	! journal diehard-example-notify.service | grep -q 'no namespaces' ||
		fail "the replicas have no namespaces:" "$(journal diehard-example-notify.service)"
	ct /opt/diehard/build/diehard status --control /run/diehard-example-notify/control >"$T/status" ||
		fail "diehard status failed"
	grep -q '^replicas: k 3, 3 in the vote' "$T/status" || fail "status:" "$(cat "$T/status")"
	# Reload: forwarded, RELOADING=1 then READY=1 from a majority.
	ct systemctl reload diehard-example-notify.service || fail "reload failed"
	wait_until 30 bash -c "[[ \$(bash '$NSPAWN' exec '$CT' systemctl show -p StatusText --value diehard-example-notify.service 3>&-) == *'; reloaded' ]]" ||
		fail "not reloaded: $(show diehard-example-notify.service StatusText)"
	[[ $(show diehard-example-notify.service ActiveState) == active ]] || fail "not active after the reload"
	# The odd replica never pinged its watchdog (3 s): replaced, while
	# systemd's own watchdog stays fed (a majority pings).
	wait_until 60 bash -c "bash '$NSPAWN' exec '$CT' journalctl -u diehard-example-notify.service -o cat 3>&- | grep -q 'watchdog: no WATCHDOG=1'" ||
		fail "the silent replica was not replaced:" "$(journal diehard-example-notify.service | tail -n 20)"
	[[ $(show diehard-example-notify.service ActiveState) == active && $(show diehard-example-notify.service NRestarts) == 0 ]] ||
		fail "the service restarted: $(show diehard-example-notify.service NRestarts)"
	# diehard's lines carry their priority into the journal: -v's events
	# at notice (5), the replicas' own output at the unit's info (6).
	ct journalctl -u diehard-example-notify.service -o json --no-pager |
		jq -r 'select(.MESSAGE | tostring | startswith("diehard: kill replica")) | .PRIORITY' | sort -u >"$T/prio"
	[[ $(cat "$T/prio") == 5 ]] || fail "the kill event's priority: '$(cat "$T/prio")', expected 5"
	ct journalctl -u diehard-example-notify.service -o json --no-pager |
		jq -r 'select(.MESSAGE | tostring | startswith("tick ")) | .PRIORITY' | sort -u >"$T/prio"
	[[ $(cat "$T/prio") == 6 ]] || fail "the daemon's lines' priority: '$(cat "$T/prio")', expected 6"
	ct systemctl stop diehard-example-notify.service
	[[ $(show diehard-example-notify.service Result) == success ]] ||
		fail "stop: $(show diehard-example-notify.service Result)" "$(journal diehard-example-notify.service | tail -n 20)"
	[[ $(ct pgrep -c -x diehard-init || true) == 0 ]] || fail "replicas left after the stop"
}

@test "diehard-micro-httpd.socket under systemd 252: each connection activates a diehard of three micro-httpd replicas; curl gets the page, 10 of 10" {
	ct mkdir -p /var/www/html
	echo "served by replicas" | ct tee /var/www/html/index.html >/dev/null
	install_unit diehard-micro-httpd@.service
	ct tee /etc/systemd/system/diehard-micro-httpd.socket <"$ROOT/systemd/diehard-micro-httpd.socket" >/dev/null
	ct systemctl daemon-reload
	ct systemctl start diehard-micro-httpd.socket || fail "the socket did not start"
	local i
	for i in $(seq 10); do
		[[ $(ct curl -sS -m 30 http://127.0.0.1:8080/index.html) == "served by replicas" ]] ||
			fail "request $i" "$(ct journalctl -u 'diehard-micro-httpd@*' --no-pager -o cat | tail -n 20)"
	done
	! ct journalctl -u 'diehard-micro-httpd@*' --no-pager -o cat | grep -q 'no namespaces' ||
		fail "the replicas had no namespaces"
	ct systemctl stop diehard-micro-httpd.socket
}
