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
# BASE: this shell's slice, which what throttle runs must get back.
needs_slices() {
	local v maj min
	v=$(uname -r)
	v=${v%%-*}
	IFS=. read -r maj min _ <<<"$v"
	((maj > 6 || (maj == 6 && min >= 12))) ||
		skip "needs Linux 6.12 or later for scheduler slices (this is $(uname -r))"
	grep -q '^se.slice' /proc/self/sched 2>/dev/null ||
		skip "this kernel does not show se.slice in /proc/PID/sched"
	BASE=$(slice_of "$BASHPID")
	[ "$BASE" -gt 100000 ] || skip "the suite itself runs at a 0.1 ms slice"
}

# slice_of PID: the process's scheduler slice in nanoseconds
slice_of() {
	awk '$1 == "se.slice" { print $3 }' "/proc/$1/sched"
}

# The slices of the wrapper of run --concurrency and of its command
SLICES='awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$PPID/sched /proc/$$/sched'

@test "a call runs at a 0.1 ms scheduler slice; what it runs gets the default back" {
	needs_slices
	run "$THROTTLE" run s --concurrency 1 -- sh -c "$SLICES"
	[ "$status" -eq 0 ]
	[ "${lines[*]}" = "100000 $BASE" ]
	# run --limit becomes its command
	run "$THROTTLE" run s2 --limit 1/1s -- sh -c \
	    'awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$$/sched'
	[ "$status" -eq 0 ]
	[ "$output" = "$BASE" ]
	# THROTTLE_SLICE=default asks for nothing; short is the default
	THROTTLE_SLICE=default run "$THROTTLE" run s --concurrency 1 -- sh -c "$SLICES"
	[ "${lines[*]}" = "$BASE $BASE" ]
	THROTTLE_SLICE=short run "$THROTTLE" run s --concurrency 1 -- sh -c "$SLICES"
	[ "${lines[*]}" = "100000 $BASE" ]
	THROTTLE_SLICE=tiny run --separate-stderr "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[ "$stderr" = "throttle: THROTTLE_SLICE: 'tiny' is not a scheduler slice; use short or default" ]
}

@test "a caller's own scheduler slice is what run's command gets back" {
	needs_slices
	case $(uname -m) in
	x86_64) nr=314 ;;
	aarch64) nr=274 ;;
	*) skip "no sched_setattr number for $(uname -m) here" ;;
	esac
	command -v perl >/dev/null || skip "needs perl to set a slice"
	# perl asks for a 3 ms slice (struct sched_attr, 48 bytes; the nice
	# value as it is), then becomes throttle
	own() {
		perl -e '$a = pack("LLQlLQQQ", 48, 0, 0, getpriority(0, 0), 0, 3000000, 0, 0);
		    syscall(shift, 0, $a, 0) == 0 or die "sched_setattr: $!\n"; exec @ARGV or die' \
		    "$nr" "$@"
	}
	run own "$THROTTLE" run s --concurrency 1 -- sh -c "$SLICES"
	[ "$status" -eq 0 ]
	[ "${lines[*]}" = "100000 3000000" ]
	run own "$THROTTLE" run s2 --limit 1/1s -- sh -c \
	    'awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$$/sched'
	[ "$status" -eq 0 ]
	[ "$output" = 3000000 ]
}

@test "the slice request keeps the caller's nice value, flags and other policies" {
	needs_slices
	# field 19 of /proc/PID/stat is the nice value (the name, field 2,
	# has no spaces here); nice adds 5 to this shell's, up to 19
	n=$(($(cut -d" " -f19 "/proc/$BASHPID/stat") + 5))
	((n <= 19)) || n=19
	run nice -n 5 "$THROTTLE" run s --concurrency 1 -- sh -c \
	    'for p in $PPID $$; do awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$p/sched; cut -d" " -f19 /proc/$p/stat; done'
	[ "$status" -eq 0 ]
	[ "${lines[*]}" = "100000 $n $BASE $n" ]
	command -v chrt >/dev/null || skip "chrt (util-linux) is not installed"
	# SCHED_RESET_ON_FORK is kept
	run chrt -R -o 0 "$THROTTLE" run s --concurrency 1 -- sh -c \
	    'chrt -p $PPID; awk '\''$1 == "se.slice" { print $3 }'\'' /proc/$PPID/sched'
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == *"SCHED_OTHER|SCHED_RESET_ON_FORK" ]]
	[ "${lines[2]}" = 100000 ]
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
