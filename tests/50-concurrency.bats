#!/usr/bin/env bats
# Many processes on one key never over-admit and never see "locked".

load lib

race() {
	# race PROCS CALLS ARGS...: every process consumes CALLS times.
	local procs=$1 calls=$2
	shift 2
	for p in $(seq "$procs"); do
		(for c in $(seq "$calls"); do
			"$THROTTLE" "$@" 2>>"$TMP/err.$p" && echo ok
		done) >"$TMP/out.$p" &
	done
	wait
	cat "$TMP"/out.* | grep -c ok || true
}

@test "20 processes x 15 consumes of 100/1d admit exactly 100, no lock errors" {
	at 1 consume warm --limit 1/1s
	admitted=$(race 20 15 consume hot --limit 100/1d)
	[ "$admitted" -eq 100 ]
	only_throttled "$TMP"/err.*
	run "$THROTTLE" inspect hot --format json
	[ "$(field remaining "$output")" -eq 0 ]
}

@test "20 processes creating the state file at once admit exactly 100" {
	admitted=$(race 20 15 consume hot --limit 100/1d)
	[ "$admitted" -eq 100 ]
	only_throttled "$TMP"/err.*
	sqlite_ok
}

@test "concurrent costs and releases keep the books exact" {
	# 10 processes x 10 consumes of cost 3 on a 60-unit pool: 20 admitted.
	admitted=$(race 10 10 consume pool --limit 60/1d --cost 3)
	[ "$admitted" -eq 20 ]
}

@test "every algorithm: 20 processes x 15 consumes of 100/1d admit exactly 100" {
	at 1 consume warm --limit 1/1s
	for algo in gcra fixed-window sliding-window hybrid; do
		rm -f "$TMP"/out.* "$TMP"/err.*
		admitted=$(race 20 15 consume "hot-$algo" --limit 100/1d --algorithm "$algo")
		[ "$admitted" -eq 100 ] || { echo "$algo admitted $admitted"; return 1; }
		only_throttled "$TMP"/err.* || { echo "$algo: errors above"; return 1; }
	done
}

@test "processes creating a state file at once never time out on its lock" {
	# regression: two creators both switching a new file to WAL waited on
	# each other until the lock timeout (about 1 run in 5)
	for trial in $(seq 15); do
		rm -f "$TMP"/fresh.db*
		for p in $(seq 10); do
			"$THROTTLE" consume k --limit 100/1s --lock-timeout 1s \
			    --db "$TMP/fresh.db" 2>>"$TMP/err" &
		done
		wait
	done
	[ ! -s "$TMP/err" ] || { cat "$TMP/err"; return 1; }
}
