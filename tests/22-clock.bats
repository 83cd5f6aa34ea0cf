#!/usr/bin/env bats
# Clocks that step, and callers that race: no algorithm may write a state
# it would then refuse, and a clock that was ahead never locks a key for
# longer than its own limit (or lockout) from now.

load lib

ALGOS="gcra fixed-window sliding-window hybrid"
YEAR=$((365 * 86400))

@test "hybrid: a clock stepping back never bricks the key (1000, 1000, 900, 1000)" {
	for t in 1000 1000 900 1000; do
		run at "$t" consume h --limit 3/10s --algorithm hybrid
		[ "$status" -le 1 ] || { echo "t=$t: $status $output"; return 1; }
	done
	run at 1000 inspect h
	[ "$status" -le 1 ]
	run at 1001 consume h --limit 3/10s --algorithm hybrid
	[ "$status" -le 1 ]
}

@test "every algorithm: any order of times, costs and releases leaves a usable key" {
	for algo in $ALGOS; do
		for step in "c 1000 1" "c 1000 1" "c 900 1" "c 1000 1" "r 950 5" \
		    "c 990 3" "c 960 1" "r 970 1" "c 1200 2" "c 1100 0" \
		    "r 1100 9" "c 1000 3" "c 1000 1"; do
			set -- $step
			if [ "$1" = c ]; then
				run at "$2" consume "k-$algo" --limit 3/10s --algorithm "$algo" --cost "$3"
				[ "$status" -le 1 ] || { echo "$algo: $step: $status $output"; return 1; }
			else
				run at "$2" release "k-$algo" --cost "$3"
				[ "$status" -eq 0 ] || { echo "$algo: $step: $status $output"; return 1; }
			fi
		done
		run at 1300 inspect "k-$algo"
		[ "$status" -le 1 ] || { echo "$algo: inspect $status $output"; return 1; }
	done
}

@test "every algorithm: a key used with the clock a year ahead waits its period, not a year" {
	for algo in $ALGOS; do
		at $((1000 + YEAR)) consume "y-$algo" --limit 3/60s --algorithm "$algo" --cost 3
		run --separate-stderr at 1001 consume "y-$algo" --limit 3/60s --algorithm "$algo" --format json
		[ "$status" -eq 1 ] || { echo "$algo: $status"; return 1; }
		retry=$(field retry_after "$output")
		[ "${retry%.*}" -le 60 ] || { echo "$algo: retry_after $retry"; return 1; }
		# the moved state was kept: one period on, the key is usable
		run at 1061 consume "y-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 0 ] || { echo "$algo at 1061: $status $output"; return 1; }
		run at 1062 inspect "y-$algo" --format json
		[ "$status" -eq 0 ]
		reset=$(field reset_after "$output")
		[ "${reset%.*}" -le 120 ] || { echo "$algo: reset_after $reset"; return 1; }
	done
}

@test "a lockout begun with the clock a year ahead lasts its length from now" {
	at $((1000 + YEAR)) consume L --limit 1/60s --lockout 10m
	run at $((1000 + YEAR)) consume L --limit 1/60s --lockout 10m
	[ "$status" -eq 1 ]
	run --separate-stderr at 1001 consume L --limit 1/60s --lockout 10m --format json
	[ "$status" -eq 1 ]
	retry=$(field retry_after "$output")
	[ "${retry%.*}" -le 600 ] || { echo "retry_after $retry"; return 1; }
	run at 1602 consume L --limit 1/60s --lockout 10m
	[ "$status" -eq 0 ]
}

@test "hybrid: 50 processes racing on 5/50ms never leave a state the key refuses" {
	for round in 1 2 3 4 5; do
		for p in $(seq 50); do
			"$THROTTLE" -q consume race --limit 5/50ms --algorithm hybrid &
		done 2>/dev/null
		wait || true
		run "$THROTTLE" inspect race
		[ "$status" -le 1 ] || { echo "round $round: $status $output"; return 1; }
		run "$THROTTLE" consume race --limit 5/50ms --algorithm hybrid --lock-timeout 5s
		[ "$status" -le 1 ] || { echo "round $round: $status $output"; return 1; }
	done
}

@test "a small step back is waited out, not handed back as allowance" {
	# 1/60s: a step back of 10s (less than the limit's 60s) moves nothing
	at 1000 consume s --limit 1/60s
	run at 990 consume s --limit 1/60s
	[ "$status" -eq 1 ]
	run at 1050 consume s --limit 1/60s
	[ "$status" -eq 1 ]
	run at 1060 consume s --limit 1/60s
	[ "$status" -eq 0 ]
}

@test "a step back of exactly the horizon is waited out; a microsecond more moves the state" {
	# 1/60s: the horizon is the period
	at 1000 consume a --limit 1/60s
	run --separate-stderr at 940 consume a --limit 1/60s --format json
	[ "$(field retry_after "$output")" = 120 ]
	at 1000 consume a2 --limit 1/60s
	run --separate-stderr at 939.999999 consume a2 --limit 1/60s --format json
	[ "$(field retry_after "$output")" = 60 ]
	# a burst smaller than N: the horizon is still the period, not 0.2s
	at 1000 consume b --limit 10/1s --burst 2 --cost 2
	run --separate-stderr at 999.5 consume b --limit 10/1s --burst 2 --format json
	[ "$(field retry_after "$output")" = 0.6 ]
	# a burst larger than N: 4/3 s, rounded up to 1.333334s
	at 1000 consume c --limit 3/1s --burst 4 --cost 4
	run --separate-stderr at 998.666666 consume c --limit 3/1s --burst 4 --format json
	[ "$(field retry_after "$output")" = 1.667 ]
	at 1000 consume c2 --limit 3/1s --burst 4 --cost 4
	run --separate-stderr at 998.666665 consume c2 --limit 3/1s --burst 4 --format json
	[ "$(field retry_after "$output")" = 0.334 ]
}

@test "hybrid: a step back within the window, then forward, admits no more than without it" {
	# 4/60s: without the step, 4 in the window that began at 1000; the
	# step back to 950 used to start the window again there, ending it
	# at 1010, and 1050 gave 3 more
	for t in 1000 950 999 1050 1050 1050 1050; do
		at "$t" consume x --limit 4/60s --algorithm hybrid -q && echo "$t" >>allowed
	done
	[ "$(wc -l <allowed)" -eq 4 ] || { cat allowed; return 1; }
	run at 1059 consume x --limit 4/60s --algorithm hybrid
	[ "$status" -eq 1 ]
	run at 1060 consume x --limit 4/60s --algorithm hybrid
	[ "$status" -eq 0 ]
	# smooth: what the bucket had not earned at the step is still owed
	for n in 1 2 3 4; do at 2000 consume y --limit 4/60s --algorithm hybrid -q; done
	at 2060 consume y --limit 4/60s --algorithm hybrid -q
	run at 2040 consume y --limit 4/60s --algorithm hybrid
	[ "$status" -eq 1 ]
	run at 2074 consume y --limit 4/60s --algorithm hybrid
	[ "$status" -eq 1 ]
	run at 2075 consume y --limit 4/60s --algorithm hybrid
	[ "$status" -eq 0 ]
	# the last unit spent with the clock behind the window's start: the
	# debt it leaves counts from the window's end, not from now
	for t in 3000 3000 3000 2950 3025 3040 3055 3059 3060 3074 3075; do
		at "$t" consume z --limit 4/60s --algorithm hybrid -q && echo "$t" >>z
	done
	[ "$(echo $(cat z))" = "3000 3000 3000 2950 3060 3075" ] || { cat z; return 1; }
}

@test "hybrid: a debt from a far larger limit, kept across a change, leaves a state the key reads" {
	at 1 consume b --algorithm hybrid --limit 4000000000/1s --cost 3000000000
	# within the window (at 2 it is at rest, and new under another limit)
	run at 1.5 consume b --algorithm hybrid --limit 10/1d --cost 0
	[ "$status" -eq 0 ]
	run --separate-stderr at 3 consume b --algorithm hybrid --limit 10/1d
	[ "$status" -eq 1 ] || { echo "$status $stderr"; return 1; }
	run at 3 verify
	[ "$status" -eq 0 ]
}

@test "every algorithm: a step back and forward again admits no more than the limit, a refusal during the step and all" {
	for algo in $ALGOS; do
		for t in 100000 100000 100000; do
			run at $t consume "s-$algo" --limit 3/60s --algorithm "$algo"
			[ "$status" -eq 0 ] || { echo "$algo t=$t: $status $output"; return 1; }
		done
		# a day back: refused, for no longer than the period
		run --separate-stderr at $((100000 - 86400)) consume "s-$algo" --limit 3/60s --algorithm "$algo" --format json
		[ "$status" -eq 1 ] || { echo "$algo back: $status $output"; return 1; }
		retry=$(field retry_after "$output")
		[ "${retry%.*}" -le 60 ] || { echo "$algo back: retry_after $retry"; return 1; }
		# the clock put right: the three taken at 100000 still count
		run at 100000 consume "s-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 1 ] || { echo "$algo forward: $status $output"; return 1; }
		run at 100000 check "s-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 1 ] || { echo "$algo check: $status $output"; return 1; }
		run at 100060 consume "s-$algo" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 0 ] || { echo "$algo a period on: $status $output"; return 1; }
		run at 100060 verify
		[ "$status" -eq 0 ] || { echo "$algo verify: $status $output"; return 1; }
	done
}

@test "a key used while the clock is back drains, and what it took then counts when the clock is put right" {
	for t in 1000 1000 1000; do at $t consume d --limit 3/60s; done
	run at 0 consume d --limit 3/60s
	[ "$status" -eq 1 ]
	# on the stepped clock the key drains as time passes: one unit in 20s
	run at 20 consume d --limit 3/60s
	[ "$status" -eq 0 ]
	run at 20 consume d --limit 3/60s
	[ "$status" -eq 1 ]
	run at 20 verify
	[ "$status" -eq 0 ]
	# put right 20s later (1020): the one taken on the stepped clock
	# counts, so the next is 20s further on, not at once
	run --separate-stderr at 1020 consume d --limit 3/60s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 20 ]
	run at 1040 consume d --limit 3/60s
	[ "$status" -eq 0 ]
}

@test "a lockout is not cut short by a step back and forward again" {
	for t in 10000 10000 10000; do at $t consume L --limit 3/60s --lockout 600s; done
	run at 10001 consume L --limit 3/60s --lockout 600s
	[ "$status" -eq 1 ]
	run --separate-stderr at 1 consume L --limit 3/60s --lockout 600s --format json
	[ "$status" -eq 1 ]
	retry=$(field retry_after "$output")
	[ "${retry%.*}" -le 600 ] || { echo "retry_after $retry"; return 1; }
	run --separate-stderr at 10002 consume L --limit 3/60s --lockout 600s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 599 ]
	run at 10002 verify
	[ "$status" -eq 0 ]
	run at 10601 consume L --limit 3/60s --lockout 600s
	[ "$status" -eq 0 ]
}

# Under 3/60s and algorithm $1 at 100000: key $2 with its three taken, and
# key $3 the same and then locked out for 10m by a fourth.
taken_and_locked() {
	for t in 100000 100000 100000; do
		at $t consume "$2" --limit 3/60s --algorithm "$1"
		at $t consume "$3" --limit 3/60s --algorithm "$1" --lockout 10m
	done
	run at 100000 consume "$3" --limit 3/60s --algorithm "$1" --lockout 10m
	[ "$status" -eq 1 ]
}

@test "every algorithm: gc while the clock is back, or once it is put right, forgets no state or lockout it moved" {
	for algo in $ALGOS; do
		k="g-$algo" l="gl-$algo"
		taken_and_locked "$algo" "$k" "$l"
		# moved back to a clock a day behind (refused)
		run at 13600 consume "$k" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 1 ]
		run at 13600 consume "$l" --limit 3/60s --algorithm "$algo" --lockout 10m
		[ "$status" -eq 1 ]
		# their times on the stepped clock have passed once it is put
		# right: gc there must keep them until at rest on it
		run at 100001 gc
		[ "$status" -eq 0 ]
		run at 100001 consume "$k" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 1 ] || { echo "$algo: gc forgot the moved state"; return 1; }
		run at 100001 consume "$l" --limit 3/60s --algorithm "$algo" --lockout 10m
		[ "$status" -eq 1 ] || { echo "$algo: gc forgot the moved lockout"; return 1; }
		run at 100001 verify
		[ "$status" -eq 0 ]
	done
}

@test "every algorithm: a lockout begun while the clock is back lasts its length once the clock is put right" {
	for algo in $ALGOS; do
		k="b-$algo"
		for t in 100000 100000 100000; do at $t consume "$k" --limit 3/60s --algorithm "$algo" --lockout 10m; done
		# a day back: the moved state refuses, and starts the lockout
		# (where the state came from: 100000, so until 100600)
		run at 13600 consume "$k" --limit 3/60s --algorithm "$algo" --lockout 10m
		[ "$status" -eq 1 ]
		run --separate-stderr at 100001 consume "$k" --limit 3/60s --algorithm "$algo" --lockout 10m --format json
		[ "$status" -eq 1 ] || { echo "$algo: admitted at 100001: $output"; return 1; }
		# as inspect reads it, too
		run --separate-stderr at 100001 inspect "$k" --format json
		[ "$status" -eq 0 ]
		[ "$(field lockout_after "$output")" = 599 ] || { echo "$algo: $output"; return 1; }
		run at 100601 consume "$k" --limit 3/60s --algorithm "$algo" --lockout 10m
		[ "$status" -eq 0 ]
	done
}

@test "every algorithm: a clock put nearly right counts the gap left as a step back, not as time that passed" {
	for algo in $ALGOS; do
		k="n-$algo" l="nl-$algo"
		taken_and_locked "$algo" "$k" "$l"
		run at 50000 consume "$k" --limit 3/60s --algorithm "$algo"
		[ "$status" -eq 1 ]
		run at 50000 consume "$l" --limit 3/60s --algorithm "$algo" --lockout 10m
		[ "$status" -eq 1 ]
		# back to 59s short of where it came from, then on: nothing
		# more within the period of the three at 100000
		for t in 99941 99961 100000 100001; do
			run at $t consume "$k" --limit 3/60s --algorithm "$algo"
			[ "$status" -eq 1 ] || { echo "$algo: admitted at $t"; return 1; }
		done
		# and the lockout begun at 100000 holds to 100600
		for t in 99401 100002 100599; do
			run at $t consume "$l" --limit 3/60s --algorithm "$algo" --lockout 10m
			[ "$status" -eq 1 ] || { echo "$algo: lockout cut at $t"; return 1; }
		done
		run at 100001 verify
		[ "$status" -eq 0 ]
	done
}

@test "a refusal under another limit while the clock is back keeps where the state came from" {
	for t in 100000 100000 100000; do at $t consume o --limit 3/60s; done
	run at 50000 consume o --limit 3/60s
	[ "$status" -eq 1 ]
	run at 50000 consume o --limit 1/1d
	[ "$status" -eq 1 ]
	run at 100001 consume o --limit 3/60s
	[ "$status" -eq 1 ]
}

@test "a lockout begun on a clock a little back lasts its length from the latest time the key has seen" {
	# 3/1h waits out a step back of 300s; the lockout begun then runs
	# from 100000, where the key's state is, not from the stepped clock
	for t in 100000 100000 100000; do at $t consume a --limit 3/1h --lockout 10m; done
	run at 99700 consume a --limit 3/1h --lockout 10m
	[ "$status" -eq 1 ]
	run at 100301 consume a --limit 3/1h --lockout 10m
	[ "$status" -eq 1 ]
	run at 100600 consume a --limit 3/1h --lockout 10m
	[ "$status" -eq 0 ]
	# a step back longer than the lockout: it is moved back with the
	# clock (refused for its length, not the step's), and forward again
	for t in 100000 100000 100000; do at $t consume b --limit 3/1h --lockout 1m; done
	run --separate-stderr at 98200 consume b --limit 3/1h --lockout 1m --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 60 ]
	run at 100001 consume b --limit 3/1h --lockout 1m
	[ "$status" -eq 1 ]
	run at 100060 consume b --limit 3/1h --lockout 1m
	[ "$status" -eq 0 ]
	run at 100060 verify
	[ "$status" -eq 0 ]
}

@test "what a key takes afresh while the clock is back counts once it is put right" {
	# a lockout that ends on the stepped clock gives the allowance back
	# there; what is taken of it counts on the clock put right
	for t in 100000 100000 100000 100000; do at $t consume e --limit 3/60s --lockout 10m || true; done
	run at 13600 consume e --limit 3/60s --lockout 10m
	[ "$status" -eq 1 ]
	for t in 14200 14200 14200; do at $t consume e --limit 3/60s --lockout 10m; done
	run at 100600 consume e --limit 3/60s --lockout 10m
	[ "$status" -eq 1 ]
	# a limit new to the key, first used on the stepped clock, the same
	for t in 100000 100000 100000; do at $t consume f --limit 3/60s; done
	run at 13600 consume f --limit 3/60s
	[ "$status" -eq 1 ]
	for t in 13660 13660 13660 13720 13720; do at $t consume f --limit '3/60s;5/1h'; done
	run at 100180 consume f --limit '3/60s;5/1h'
	[ "$status" -eq 1 ]
	run at 100180 verify
	[ "$status" -eq 0 ]
}

@test "a lease taken while the clock was ahead holds its slot at most its TTL once the clock is put right" {
	# a year ahead, then right again: the slot was held for the year
	at 1031536000 acquire c --concurrency 1 --ttl 10s >/dev/null
	run --separate-stderr at 1000000011 inspect c --format json
	[[ "$output" == *'"expires_after":10'[,}]* ]] || { echo "$output"; return 1; }
	run at 1000000011 acquire c --concurrency 1
	[ "$status" -eq 1 ]
	# the refusal saved where the lease now ends: 10s from then
	run at 1000000020 acquire c --concurrency 1
	[ "$status" -eq 1 ]
	run at 1000000021 acquire c --concurrency 1
	[ "$status" -eq 0 ]
	# a lease without a TTL is held by its owner, whatever the clock
	at 1031536000 acquire o --concurrency 1 --ttl 0 --owner $$ >/dev/null
	run at 1000000011 acquire o --concurrency 1
	[ "$status" -eq 1 ]
}

@test "a lease taken while the clock was ahead whose owner is gone is deleted, not saved again" {
	needs_sqlite
	sleep 100 &
	owner=$!
	track "$owner"
	at 1031536000 acquire d --concurrency 2 --ttl 10s --owner "$owner" >/dev/null
	kill "$owner"
	wait "$owner" 2>/dev/null || true
	at 1000000011 acquire d --concurrency 2 >/dev/null
	[ "$(sqlite3 state.db "SELECT count(*) FROM rec WHERE kind = 3 AND key = CAST('d' AS BLOB)")" = 1 ]
}
