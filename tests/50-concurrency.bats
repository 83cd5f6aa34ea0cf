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

# needs_slices: the kernel takes a slice request from a process (Linux
# 6.12 and later) and shows each process's slice in /proc/PID/sched.
needs_slices() {
	local v
	v=$(uname -r)
	v=${v%%-*}
	IFS=. read -r maj min _ <<<"$v"
	((maj > 6 || (maj == 6 && min >= 12))) ||
		skip "needs Linux 6.12 or later for scheduler slices (this is $(uname -r))"
	grep -q '^se.slice' /proc/self/sched 2>/dev/null ||
		skip "this kernel does not show se.slice in /proc/PID/sched"
	BASE=$(slice_of "$BASHPID")
	[ "$BASE" != 100000 ] || skip "the suite itself runs at a 0.1 ms slice"
}

# slice_of PID: the process's scheduler slice in nanoseconds
slice_of() {
	awk '$1 == "se.slice" { print $3 }' "/proc/$1/sched"
}

@test "a call runs at a 0.1 ms scheduler slice; what it runs gets the default back" {
	needs_slices
	# the wrapper of run --concurrency (the parent of sh) and its command
	run "$THROTTLE" run s --concurrency 1 -- sh -c \
	    'awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$PPID/sched /proc/$$/sched'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 100000 ]
	[ "${lines[1]}" = "$BASE" ]
	# run --limit becomes its command
	run "$THROTTLE" run s2 --limit 1/1s -- sh -c \
	    'awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$$/sched'
	[ "$status" -eq 0 ]
	[ "$output" = "$BASE" ]
}

@test "the slice request keeps the caller's nice value and leaves other policies alone" {
	needs_slices
	# field 19 of /proc/PID/stat is the nice value (the name, field 2,
	# has no spaces here)
	run nice -n 5 "$THROTTLE" run s --concurrency 1 -- sh -c \
	    'for p in $PPID $$; do awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$p/sched; cut -d" " -f19 /proc/$p/stat; done'
	[ "$status" -eq 0 ]
	[ "${lines[*]}" = "100000 5 $BASE 5" ]
	command -v chrt >/dev/null || skip "chrt (util-linux) is not installed"
	# SCHED_BATCH is the caller's choice: no slice request
	run chrt -b 0 "$THROTTLE" run s --concurrency 1 -- sh -c \
	    'awk '\''$1 == "se.slice" || $1 == "policy" { print $3 }'\'' /proc/$PPID/sched'
	[ "$status" -eq 0 ]
	[ "${lines[*]}" = "3 $BASE" ]
}

@test "a batch runs at the default slice: it is not a short call" {
	needs_slices
	coproc BATCH { exec "$THROTTLE" batch 2>/dev/null; }
	pid=$BATCH_PID
	track "$pid"
	echo "consume k --limit 2/1m" >&"${BATCH[1]}"
	read -r -t 10 first <&"${BATCH[0]}"
	[ "$(field remaining "$first")" = 1 ]
	[ "$(cat "/proc/$pid/comm")" = throttle ]
	[ "$(slice_of "$pid")" = "$BASE" ]
	exec {BATCH[1]}>&-
}
