#!/usr/bin/env bats
# fixed-window, sliding-window and hybrid through the binary: the issue's
# worked examples, costs, every command and format, and their edges.

load lib

# expect T ALGO-ARGS... -- EXIT REMAINING RETRY RESET: one consume at T.
expect() {
	local t=$1
	shift
	local args=()
	while [ "$1" != -- ]; do
		args+=("$1")
		shift
	done
	shift
	run --separate-stderr at "$t" consume "${args[@]}" --format json
	[ "$status" -eq "$1" ] || { echo "t=$t: exit $status, wanted $1: $output"; return 1; }
	[ "$(field remaining "$output")" = "$2" ] || { echo "t=$t: remaining: $output"; return 1; }
	[ "$(field retry_after "$output")" = "$3" ] || { echo "t=$t: retry_after: $output"; return 1; }
	[ "$(field reset_after "$output")" = "$4" ] || { echo "t=$t: reset_after: $output"; return 1; }
}

@test "fixed-window: 3/60s, the seed 001 example" {
	F=(f --limit 3/60s --algorithm fixed-window)
	expect 100 "${F[@]}" -- 0 2 0 60
	expect 110 "${F[@]}" -- 0 1 0 50
	expect 120 "${F[@]}" -- 0 0 0 40
	expect 130 "${F[@]}" -- 1 0 30 30
	expect 159.5 "${F[@]}" -- 1 0 0.5 0.5
	expect 159.999999 "${F[@]}" -- 1 0 0.001 0.001
	expect 160 "${F[@]}" -- 0 2 0 60
	run at 160 inspect f --format json
	[ "$(field algorithm "$output")" = '"fixed-window"' ]
}

@test "sliding-window: 3/60s at 1s granularity, the seed 003 example" {
	S=(s --limit 3/60s --algorithm sliding-window --granularity 1s)
	expect 0 "${S[@]}" -- 0 2 0 60
	expect 10 "${S[@]}" -- 0 1 0 60
	expect 20 "${S[@]}" -- 0 0 0 60
	expect 30 "${S[@]}" -- 1 0 30 50
	expect 59 "${S[@]}" -- 1 0 1 21
	expect 60 "${S[@]}" -- 0 0 0 60
	expect 61 "${S[@]}" -- 1 0 9 59
	expect 70 "${S[@]}" -- 0 0 0 60
	run at 70 inspect s --format json
	[ "$(field algorithm "$output")" = '"sliding-window"' ]
	[ "$(field granularity "$output")" = 1 ]
}

@test "sliding-window: the seed's off-by-one is not ours: exactly N, never N+1" {
	for n in 1 2 3 4 5 6; do at 5 consume k --limit 5/1m --algorithm sliding-window -q || true; done
	run at 5 inspect k --format json
	[ "$(field remaining "$output")" = 0 ]
	ok=0
	for n in $(seq 10); do at 6 consume k2 --limit 5/1m --algorithm sliding-window -q && ok=$((ok + 1)); done
	[ "$ok" -eq 5 ]
}

@test "sliding-window: old sub-windows are dropped, storage stays bounded" {
	needs_sqlite
	for t in $(seq 0 7 2000); do
		at "$t" consume k --limit 1000/60s --algorithm sliding-window --granularity 5s -q
	done
	# a 60s window at 5s granularity holds at most 12 sub-windows
	bytes=$(sqlite3 state.db "SELECT length(data) - instr(data, X'0A') FROM rec WHERE kind = 1")
	[ "$bytes" -le $((12 * 20)) ]
	run at 2000 inspect k --format json
	[ "$(field remaining "$output")" -ge 990 ]
}

@test "hybrid: 4/60s, the seed 001 example" {
	H=(h --limit 4/60s --algorithm hybrid)
	expect 0 "${H[@]}" -- 0 3 0 60
	expect 1 "${H[@]}" -- 0 2 0 59
	expect 2 "${H[@]}" -- 0 1 0 58
	expect 3 "${H[@]}" -- 0 0 0 102
	expect 4 "${H[@]}" -- 1 0 56 101
	expect 30 "${H[@]}" -- 1 0 30 75
	expect 59 "${H[@]}" -- 1 0 1 46
	expect 59.999999 "${H[@]}" -- 1 0 0.001 45.001
	expect 60 "${H[@]}" -- 0 0 0 60
	expect 61 "${H[@]}" -- 1 0 14 59
	expect 75 "${H[@]}" -- 0 0 0 60
	expect 76 "${H[@]}" -- 1 0 14 59
	ok=0
	for n in 1 2 3 4 5; do at 200 consume "${H[@]}" -q && ok=$((ok + 1)); done
	[ "$ok" -eq 4 ]
}

@test "hybrid: a window ends at its exact instant, and a smooth wait is never short" {
	H=(h --limit 4/60s --algorithm hybrid)
	at 0 consume "${H[@]}" --cost 2
	run at 59.999999 consume "${H[@]}" --cost 4
	[ "$status" -eq 1 ]
	# the key as stored, read at the instant its window ends (a
	# decision takes a state at rest as none: inspect reads it)
	run at 60 inspect h --format json
	[ "$(field remaining "$output")" = 4 ] || { echo "$output"; return 1; }
	run at 60 consume "${H[@]}" --cost 4
	[ "$status" -eq 0 ]
	# smooth mode earns a unit every 1/3 s: 333333.33us, so the wait
	# from 1.000333 is 333000.33us, shown rounded up, never down
	S=(s --limit 3/1s --algorithm hybrid)
	at 0 consume "${S[@]}" --cost 3
	at 1 consume "${S[@]}"
	run --separate-stderr at 1.000333 consume "${S[@]}" --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 0.334 ]
	run at 1.333333 consume "${S[@]}"
	[ "$status" -eq 1 ]
	run at 1.333334 consume "${S[@]}"
	[ "$status" -eq 0 ]
}

@test "sliding-window: a release of a sub-window's whole count leaves the key usable" {
	S=(s --limit 5/60s --algorithm sliding-window)
	at 0 consume "${S[@]}" --cost 2
	at 0 consume "${S[@]}" --cost 1
	at 1 consume "${S[@]}" --cost 2
	run at 2 release "${S[@]}" --cost 2
	[ "$status" -eq 0 ]
	run --separate-stderr at 2 consume "${S[@]}" --cost 2 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
	run at 2 release "${S[@]}" --cost 5
	[ "$status" -eq 0 ]
	run --separate-stderr at 2 consume "${S[@]}" --cost 5 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
}

@test "twice the rate: hybrid admits N in the first window, gcra more" {
	for algo in hybrid gcra; do
		ok=0
		for t in $(seq 0 3 57); do
			at "$t" consume "$algo" --limit 10/60s --algorithm "$algo" -q && ok=$((ok + 1))
		done
		eval "ok_$algo=$ok"
	done
	[ "$ok_hybrid" -eq 10 ]
	[ "$ok_gcra" -gt 10 ]
}

@test "--cost works with every algorithm" {
	for algo in fixed-window sliding-window hybrid; do
		run at 0 consume "c-$algo" --limit 10/60s --algorithm "$algo" --cost 7 --format json
		[ "$status" -eq 0 ]
		[ "$(field remaining "$output")" = 3 ]
		[ "$(field cost "$output")" = 7 ]
		run at 0 consume "c-$algo" --limit 10/60s --algorithm "$algo" --cost 4
		[ "$status" -eq 1 ]
		run at 0 consume "c-$algo" --limit 10/60s --algorithm "$algo" --cost 3
		[ "$status" -eq 0 ]
		run at 0 consume "c-$algo" --limit 10/60s --algorithm "$algo" --cost 11
		[ "$status" -eq 2 ]
		[[ "$output" == *"--cost: 11 is more than the limit of 10"* ]]
	done
}

@test "check never changes state, for every algorithm" {
	needs_sqlite
	for algo in fixed-window sliding-window hybrid; do
		at 10 consume "k-$algo" --limit 3/60s --algorithm "$algo"
		records >before
		for t in 10 20 75 500; do
			at "$t" check "k-$algo" --limit 3/60s --algorithm "$algo" >/dev/null 2>&1 || true
			at "$t" check "k-$algo" --limit 3/60s --algorithm "$algo" --cost 3 >/dev/null 2>&1 || true
		done
		records >after
		cmp before after
		run at 10 check "k-$algo" --limit 3/60s --algorithm "$algo" --format json
		checked=$output
		run at 10 consume "k-$algo" --limit 3/60s --algorithm "$algo" --format json
		[ "$output" = "$checked" ]
	done
}

@test "hybrid: a release pays off part of the smooth-mode debt" {
	at 10 consume h --limit 3/60s --algorithm hybrid --cost 3
	run at 11 check h --limit 3/60s --algorithm hybrid --format json
	[ "$(field retry_after "$output")" = 59 ]
	run at 11 release h --cost 1 --format json
	[ "$(field remaining "$output")" = 0 ]
	run at 11 check h --limit 3/60s --algorithm hybrid --format json
	[ "$(field retry_after "$output")" = 39 ]
}

@test "release, inspect and reset work with every algorithm" {
	for algo in fixed-window sliding-window; do
		at 10 consume "r-$algo" --limit 3/60s --algorithm "$algo" --cost 3
		run at 11 consume "r-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 1 ]
		run at 11 release "r-$algo" --cost 1 --format json
		[ "$status" -eq 0 ]
		[ "$(field remaining "$output")" = 1 ]
		run at 11 consume "r-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 0 ]
		run at 11 inspect "r-$algo" --format json
		[[ "$output" == '{"key":"r-'"$algo"'","algorithm":"'"$algo"'","limit":3,"period":60,"burst":3,'* ]]
		"$THROTTLE" reset "r-$algo"
		run at 11 consume "r-$algo" --limit 3/60s --algorithm "$algo" --cost 3
		[ "$status" -eq 0 ]
	done
}

@test "every output format names the algorithm" {
	for algo in fixed-window sliding-window hybrid; do
		run --separate-stderr at 1 consume "o-$algo" --limit 2/1m --algorithm "$algo" --format shell
		eval "$output"
		[ "$THROTTLE_ALGORITHM" = "$algo" ]
		[ "$THROTTLE_REMAINING" = 1 ]
		run --separate-stderr at 1 consume "o-$algo" --limit 2/1m --algorithm "$algo" --cost 2
		[ "$status" -eq 1 ]
		[[ "$stderr" == "throttle: o-$algo throttled, retry in "* ]]
	done
	run at 1 consume g --limit 2/1m --algorithm sliding-window --format shell
	eval "$output"
	[ "$THROTTLE_GRANULARITY" = 1 ]
	[ "$THROTTLE_GRANULARITY_SECS" = 1 ]
}

@test "bad --granularity: zero, longer than the period, too fine, or not sliding" {
	run at 1 consume k --limit 3/60s --algorithm sliding-window --granularity 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--granularity: '0'"*"zero"* ]]
	run at 1 consume k --limit 3/60s --algorithm sliding-window --granularity 61s
	[ "$status" -eq 2 ]
	[[ "$output" == *"--granularity: '61s'"*"longer than the period"* ]]
	run at 1 consume k --limit 3/1h --algorithm sliding-window --granularity 1ms
	[ "$status" -eq 2 ]
	[[ "$output" == *"more than 100000 sub-windows"* ]]
	run at 1 consume k --limit 3/60s --algorithm sliding-window --granularity soon
	[ "$status" -eq 2 ]
	run at 1 consume k --limit 3/60s --granularity 1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"--granularity: gcra has no sub-windows"* ]]
	run at 1 consume k --limit 3/60s --algorithm hybrid --burst 5
	[ "$status" -eq 2 ]
	[[ "$output" == *"--burst: hybrid has no burst"* ]]
	# a granularity that does not divide the period is fine
	run at 1 consume k --limit 3/60s --algorithm sliding-window --granularity 7s
	[ "$status" -eq 0 ]
}

@test "the default granularity is PERIOD/60, at least 1ms" {
	run at 1 check a --limit 3/1h --algorithm sliding-window --format json
	[ "$(field granularity "$output")" = 60 ]
	run at 1 check b --limit 3/1s --algorithm sliding-window --format json
	[ "$(field granularity "$output")" = 0.017 ]
	run at 1 check c --limit 3/10ms --algorithm sliding-window --format json
	[ "$(field granularity "$output")" = 0.001 ]
	run at 1 check d --limit 3/500us --algorithm sliding-window --format json
	[ "$status" -eq 2 ]
}

@test "sliding-window: a unit counts ceil(period/G) sub-windows; a G that divides the period admits an exact pace" {
	# 16.666ms, the default for 1s, does not divide it: a unit counts
	# 61 sub-windows, up to G past the period (the man page says so):
	# at 100 (in sub-window 6000) until 6061 * 16666us
	run at 100 consume d --limit 1/1s --algorithm sliding-window --format json
	[ "$(field reset_after "$output")" = 1.013 ]
	# 10ms does: ten a second, every 100ms, are all allowed
	for i in $(seq 0 29); do
		t=$((100000000 + i * 100000))
		run at "${t%??????}.${t: -6}" consume p --limit 10/1s --algorithm sliding-window --granularity 10ms
		[ "$status" -eq 0 ] || { echo "refused at request $i"; return 1; }
	done
	run at 103 consume p --limit 10/1s --algorithm sliding-window --granularity 10ms --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
}

@test "a refusal under a changed limit waits no longer than the old state's rest, which admits" {
	# 3/60s used up at 0, then 3/120s at 30: the converted window would
	# end at 120 (retry_after 90), but the old state is at rest at 60,
	# where the key starts afresh and the request is allowed: 30, and
	# --wait 45s waits for it
	for a in fixed-window sliding-window; do
		for i in 1 2 3; do at 0 consume "$a" --algorithm "$a" --limit 3/60s; done
		run --separate-stderr at 30 consume "$a" --algorithm "$a" --limit 3/120s --format json
		[ "$status" -eq 1 ]
		[ "$(field retry_after "$output")" = 30 ] || { echo "$a: $output"; return 1; }
		[ "$(field reset_after "$output")" = 30 ] || { echo "$a: $output"; return 1; }
		run --separate-stderr at 59.999999 consume "$a" --algorithm "$a" --limit 3/120s
		[ "$status" -eq 1 ]
		run --separate-stderr at 30 consume "$a" --algorithm "$a" --limit 3/120s --wait 45s --format json
		[ "$status" -eq 0 ] || { echo "$a: $stderr"; return 1; }
		[ "$(field remaining "$output")" = 2 ]
	done
	# but a state the clock moved is saved converted by the refusal (its
	# rest is then the converted one's): consume and check agree on it
	T=1700000000
	at $T consume m --algorithm fixed-window --limit 3/60s --cost 3
	run at $((T - 1000)) consume m --algorithm fixed-window --limit 3/60s
	[ "$status" -eq 1 ]
	run --separate-stderr at $((T + 30)) consume m --algorithm fixed-window --limit 3/120s --format json
	[ "$(field retry_after "$output")" = 90 ] || { echo "$output"; return 1; }
	run --separate-stderr at $((T + 30)) check m --algorithm fixed-window --limit 3/120s --format json
	[ "$(field retry_after "$output")" = 90 ] || { echo "$output"; return 1; }
	run at $((T + 119)) consume m --algorithm fixed-window --limit 3/120s
	[ "$status" -eq 1 ]
}

@test "a key used with another algorithm starts afresh; new parameters convert" {
	at 0 consume k --limit 3/60s --cost 3
	run at 0 consume k --limit 3/60s
	[ "$status" -eq 1 ]
	run at 0 consume k --limit 3/60s --algorithm fixed-window --cost 3
	[ "$status" -eq 0 ]
	run at 0 inspect k --format json
	[ "$(field algorithm "$output")" = '"fixed-window"' ]
	# same algorithm, new parameters: the window keeps its start and
	# count, and is as long as the longer period (it began at 0)
	run at 30 consume k --limit 5/90s --algorithm fixed-window --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 1 ]
	[ "$(field reset_after "$output")" = 60 ]
	# a shorter period keeps its end: never sooner than it was
	run at 31 consume k --limit 5/10s --algorithm fixed-window --cost 2 --format json
	[ "$status" -eq 1 ]
	[ "$(field reset_after "$output")" = 59 ]
	# sliding: a coarser granularity keeps every unit
	at 0 consume s --limit 3/60s --algorithm sliding-window --granularity 1s --cost 3
	run at 30 consume s --limit 3/60s --algorithm sliding-window --granularity 10s
	[ "$status" -eq 1 ]
	run at 60 consume s --limit 3/60s --algorithm sliding-window --granularity 10s
	[ "$status" -eq 0 ]
}

@test "a stored window state throttle never writes is refused, exit 3" {
	needs_sqlite
	at 1 consume k --limit 3/60s --algorithm sliding-window
	slots_set k 00
	cp state.db state.db.orig
	run at 2 consume k --limit 3/60s --algorithm sliding-window
	[ "$status" -eq 3 ]
	[[ "$output" == *"sub-windows are not in throttle's encoding"* ]]
	cmp state.db state.db.orig
	# a sliding window keeps no fields: a value in one is not its own
	slots_set k 0101
	limit_edit k 6 5
	run at 2 inspect k
	[ "$status" -eq 3 ]
	[[ "$output" == *"state out of range"* ]]
	at 1 consume h --limit 3/60s --algorithm hybrid
	limit_edit h 6 9
	run at 2 consume h --limit 3/60s --algorithm hybrid
	[ "$status" -eq 3 ]
}

@test "sliding-window property: random arrivals never put more than N in a PERIOD" {
	# 5 per 20s at 1s granularity; 150 requests at random whole seconds.
	t=1000
	: >admitted
	for n in $(seq 150); do
		t=$((t + RANDOM % 4))
		at "$t" consume p --limit 5/20s --algorithm sliding-window --granularity 1s -q &&
		    echo "$t" >>admitted
	done
	[ "$(wc -l <admitted)" -ge 5 ]
	while read -r start; do
		inside=$(awk -v s="$start" '$1 >= s && $1 < s + 20' admitted | wc -l)
		[ "$inside" -le 5 ] || { echo "$inside admitted in [$start, $start+20)"; return 1; }
	done <admitted
}

@test "a limit lowered below what a window holds: refused until it empties, never bricked" {
	for algo in fixed-window sliding-window; do
		run at 0 consume "low-$algo" --limit 10/60s --algorithm "$algo" --cost 8
		[ "$status" -eq 0 ]
		run --separate-stderr at 1 consume "low-$algo" --limit 3/60s --algorithm "$algo" --format json
		[ "$status" -eq 1 ] || { echo "$algo: $status $output"; return 1; }
		[ "$(field remaining "$output")" = 0 ] || { echo "$algo: $output"; return 1; }
		run at 2 inspect "low-$algo" --format json
		[ "$status" -eq 0 ] || { echo "$algo: inspect $status $output"; return 1; }
		run at 61 consume "low-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 0 ] || { echo "$algo at 61: $status $output"; return 1; }
	done
}

@test "a limit lowered and raised again admits no more than the first limit: cost 0 and release keep the count" {
	# 10 spent in a window of 10/1m; a request at cost 0 (or, for the
	# fixed window, a release of one) under 5/1m; then 10/1m again: the
	# window holds no more than its 10 (a count capped at 5 and saved so
	# let 5 more in).  (A unit a hybrid bucket is given back under 5/1m
	# is worth two of 10/1m's time: not this test's.)
	for algo in fixed-window hybrid; do
		for step in "consume --cost 0" "release --cost 1"; do
			[ "$algo" = hybrid ] && [ "${step%% *}" = release ] && continue
			k="$algo-${step%% *}"
			for n in $(seq 10); do at 1000 consume "$k" --limit 10/1m --algorithm "$algo" -q; done
			at 1001 $step "$k" --limit 5/1m --algorithm "$algo" -q
			admitted=0
			for t in 1002 1010 1030 1050 1059; do
				at "$t" consume "$k" --limit 10/1m --algorithm "$algo" -q && admitted=$((admitted + 1))
			done
			# a release gave one back: at most that one
			max=0
			[ "${step%% *}" = release ] && max=1
			[ "$admitted" -le "$max" ] || { echo "$algo, $step: $admitted admitted before 1060"; return 1; }
		done
	done
	# hybrid in a bursty window: 2 of 10 used, cost 0 under 5/1m, then
	# 10/1m again: 8 more, not 10
	for n in 1 2; do at 1000 consume b --limit 10/1m --algorithm hybrid -q; done
	at 1001 consume b --limit 5/1m --algorithm hybrid --cost 0 -q
	admitted=0
	for n in $(seq 12); do at 1002 consume b --limit 10/1m --algorithm hybrid -q && admitted=$((admitted + 1)); done
	[ "$admitted" -eq 8 ]
}

@test "a cost of 0 is allowed on every algorithm, however full the key, and starts no lockout" {
	for algo in gcra fixed-window sliding-window hybrid; do
		at 1000 consume "z-$algo" --limit 4/1m --algorithm "$algo" --cost 4
		# full, and beyond a smaller limit
		run --separate-stderr at 1000 consume "z-$algo" --limit 2/1m --algorithm "$algo" --cost 0 --lockout 1h --format json
		[ "$status" -eq 0 ] || { echo "$algo: $status $output $stderr"; return 1; }
		[ "$(field remaining "$output")" = 0 ]
		run --separate-stderr at 1000 check "z-$algo" --limit 4/1m --algorithm "$algo" --cost 0
		[ "$status" -eq 0 ] || { echo "$algo check: $status $stderr"; return 1; }
		run at 1001 inspect "z-$algo" --format json
		[[ "$output" != *lockout* ]] || { echo "$algo: $output"; return 1; }
	done
}

@test "sliding-window: units converted between granularities near the longest duration stay readable" {
	# a unit's sub-window moved to a finer granularity past the last
	# time a state may hold was saved, and then every command on the
	# file (gc, verify, inspect) refused it as out of range
	local L=9223372036854775807 G=4611686018427s
	at 0 consume other --limit 5/1s
	at 0 consume sw --algorithm sliding-window --limit "$L/$G" --granularity "$G" --cost 3
	at 1 consume sw --algorithm sliding-window --limit 100000/100s --granularity 7s --cost 3
	at 1 consume sw --algorithm sliding-window --limit "$L/$G" --granularity "$G" --cost 3
	run at 100 consume sw --algorithm sliding-window --limit "$L/100s" --granularity 1ms --cost 3
	[ "$status" -eq 0 ]
	run at 100 consume sw --algorithm sliding-window --limit "$L/100s" --granularity 1ms --cost 3
	[ "$status" -eq 0 ]
	for c in verify inspect gc; do
		run at 100 "$c"
		[ "$status" -eq 0 ] || { echo "$c: $output"; return 1; }
	done
	# a wait past the longest duration is never, in text too, and no
	# lockout: --wait says so
	run --separate-stderr at 100 consume sw --algorithm sliding-window --limit 3/100s --granularity 1ms
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: sw throttled, retry never" ]
	[ "$(field retry_after "$(at 100 check sw --algorithm sliding-window --limit 3/100s --granularity 1ms --format json)")" = null ]
	run --separate-stderr at 100 consume sw --algorithm sliding-window --limit 3/100s --granularity 1ms --wait=1h
	[ "$stderr" = "throttle: sw throttled, retry never; not waiting" ]
	run at 100 inspect sw
	[ "$status" -eq 0 ]
	[[ "$output" == *" 9223372036854775792 - never "* ]] || { echo "$output"; return 1; }
}
