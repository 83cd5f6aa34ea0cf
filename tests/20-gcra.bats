#!/usr/bin/env bats
# GCRA through the binary: the worked examples from seeds 000, 002 and 004.

load lib

@test "seed 000: 3/60s, three at t=1000, then throttled until exactly 1020" {
	for n in 1 2 3; do
		run --separate-stderr at 1000 consume k --limit 3/60s --format json
		[ "$status" -eq 0 ]
		[ "$(field reset_after "$output")" = $((20 * n)) ]
		[ "$(field remaining "$output")" = $((3 - n)) ]
		[ "$(field allowed "$output")" = true ]
	done
	run --separate-stderr at 1001 consume k --limit 3/60s --format json
	[ "$status" -eq 1 ]
	[ "$(field allowed "$output")" = false ]
	[ "$(field reset_after "$output")" = 59 ]
	[ "$(field retry_after "$output")" = 19 ]
	for p in 1005:55 1010:50 1015:45; do
		run --separate-stderr at "${p%:*}" consume k --limit 3/60s --format json
		[ "$status" -eq 1 ]
		[ "$(field reset_after "$output")" = "${p#*:}" ]
	done
	run at 1019.999999 consume k --limit 3/60s
	[ "$status" -eq 1 ]
	run --separate-stderr at 1020 consume k --limit 3/60s --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
	[ "$(field reset_after "$output")" = 60 ]
}

@test "seed 000: had the 1020 call come at 1021, reset_after would be 59" {
	for n in 1 2 3; do at 1000 consume k --limit 3/60s; done
	run at 1021 consume k --limit 3/60s --format json
	[ "$status" -eq 0 ]
	[ "$(field reset_after "$output")" = 59 ]
}

@test "seed 000: waiting exactly retry_after succeeds" {
	for n in 1 2 3; do at 1000 consume k --limit 3/60s; done
	run --separate-stderr at 1001 consume k --limit 3/60s --format json
	ra=$(field retry_after "$output")
	run at $((1001 + ra)) consume k --limit 3/60s
	[ "$status" -eq 0 ]
}

@test "a wait that is not a whole microsecond is rounded up, never down" {
	# 3/1s: a unit every 333333.33us; from 0.000333 the wait is
	# 333000.33us, which a script must not be told is 0.333s
	at 0 consume g --limit 3/1s --cost 3
	run --separate-stderr at 0.000333 consume g --limit 3/1s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 0.334 ]
	run at 0.333333 consume g --limit 3/1s
	[ "$status" -eq 1 ]
	run at 0.333334 consume g --limit 3/1s
	[ "$status" -eq 0 ]
}

@test "seed 002: credit pool 1/1m burst 100, costs 20, 20, 20 then 2" {
	run at 0 check pool --limit 1/1m --burst 100 --cost 0 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 100 ]
	for left in 80 60 40; do
		run at 600 consume pool --limit 1/1m --burst 100 --cost 20 --format json
		[ "$status" -eq 0 ]
		[ "$(field remaining "$output")" = "$left" ]
	done
	run at 1200 check pool --limit 1/1m --burst 100 --cost 0 --format json
	[ "$(field remaining "$output")" = 50 ]
	run at 1200 consume pool --limit 1/1m --burst 100 --cost 2 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 48 ]
}

@test "seed 004: 100/1s burst 500: 500 at once, the 501st throttled, 100 a second later" {
	ok=0
	for n in $(seq 501); do
		at 50 consume s --limit 100/1s --burst 500 -q && ok=$((ok + 1))
	done
	[ "$ok" -eq 500 ]
	ok=0
	for n in $(seq 101); do
		at 51 consume s --limit 100/1s --burst 500 -q && ok=$((ok + 1))
	done
	[ "$ok" -eq 100 ]
}

@test "token-bucket is the same limiter as gcra" {
	run at 10 consume a --limit 2/10s --algorithm token-bucket --format json
	[ "$(field algorithm "$output")" = '"gcra"' ]
	at 10 consume a --limit 2/10s --algorithm token-bucket
	run at 10 consume a --limit 2/10s --algorithm token-bucket
	[ "$status" -eq 1 ]
}

@test "a throttled consume changes nothing" {
	needs_sqlite
	at 100 consume k --limit 1/60s
	records >before
	run at 110 consume k --limit 1/60s
	[ "$status" -eq 1 ]
	records >after
	cmp before after
}

@test "check answers what consume would, and never changes state" {
	needs_sqlite
	at 100 consume k --limit 2/60s
	records >before
	run at 100 check k --limit 2/60s --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
	check_out=$output
	run at 100 check k --limit 2/60s --format json
	[ "$output" = "$check_out" ]
	records >after
	cmp before after
	run at 100 consume k --limit 2/60s --format json
	[ "$output" = "$check_out" ]
	run at 100 check k --limit 2/60s
	[ "$status" -eq 1 ]
	run at 100 check k --limit 2/60s --cost 0 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
}

@test "check on a new key creates no key" {
	run at 5 check fresh --limit 1/1s
	[ "$status" -eq 0 ]
	run "$THROTTLE" inspect fresh
	[ "$status" -eq 1 ]
}

@test "cost: several units at once, and a cost above the burst is exit 2" {
	run at 0 consume k --limit 10/10s --cost 7 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 3 ]
	run at 0 consume k --limit 10/10s --cost 4
	[ "$status" -eq 1 ]
	run at 0 consume k --limit 10/10s --cost 11
	[ "$status" -eq 2 ]
	[[ "$output" == *"--cost"*"more than the burst"* ]]
	# a larger burst makes room: TAT 7s + 11 units is within 20s
	run at 0 consume k --limit 10/10s --burst 20 --cost 11
	[ "$status" -eq 0 ]
	run at 100 consume k2 --limit 10/10s --burst 20 --cost 20
	[ "$status" -eq 0 ]
}

@test "a clock stepped back never admits more than the limit" {
	for n in 1 2 3; do at 100000 consume k --limit 3/60s; done
	for t in 99999 90000 13600 0; do
		run at "$t" consume k --limit 3/60s
		[ "$status" -eq 1 ]
	done
	run at 100060 consume k --limit 3/60s --cost 3
	[ "$status" -eq 0 ]
}

@test "a limit that cannot be divided into whole microseconds stays exact" {
	# 3/1s: I = 333333.33us; the 4th unit is allowed at 333334us, not before.
	for n in 1 2 3; do at 10 consume k --limit 3/1s; done
	run at 10.333333 consume k --limit 3/1s
	[ "$status" -eq 1 ]
	run at 10.333334 consume k --limit 3/1s
	[ "$status" -eq 0 ]
}
