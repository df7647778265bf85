#!/bin/bash
# notify_daemon.sh [--odd DIR]: a Type=notify daemon in bash, for the tests
# under a real systemd (tests/systemd_boot.bats). Says READY=1 with
# STATUS=serving through systemd-notify, pings WATCHDOG=1 every half second
# when systemd asked for a watchdog, and appends a line to stdout each
# second. SIGHUP: RELOADING=1, then READY=1 with STATUS=reloaded. SIGTERM:
# STOPPING=1, then exit 0.
# --odd DIR: the first replica to make DIR (mkdir is atomic) never pings
# its watchdog: diehard must replace it.
odd=0
if [[ ${1:-} == --odd ]] && mkdir "$2" 2>/dev/null; then
	odd=1
fi
trap 'systemd-notify RELOADING=1; systemd-notify --ready --status=reloaded' HUP
trap 'systemd-notify STOPPING=1; exit 0' TERM
systemd-notify --ready --status=serving
n=0
while :; do
	if [[ -n ${WATCHDOG_USEC:-} && $odd == 0 ]]; then
		systemd-notify WATCHDOG=1
	fi
	n=$((n + 1))
	((n % 2 == 0)) && echo "tick $((n / 2))"
	sleep 0.5 &
	wait $! || true
done
