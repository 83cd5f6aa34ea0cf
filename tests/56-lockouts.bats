#!/usr/bin/env bats
# Lockouts belong to the key: every request on a locked key is refused,
# whatever its options; inspect and check show it; reset lifts it; its
# end gives the whole allowance back, as pam_faillock's unlock does.

load lib

L=(--limit 3/15m --lockout 10m)

@test "lockout: a request without --lockout on a locked key is refused too" {
	for n in 1 2 3; do at 1000 consume u "${L[@]}"; done
	run at 1001 consume u "${L[@]}"
	[ "$status" -eq 1 ]
	# the rate alone would allow these after 5 minutes: the lockout holds
	run --separate-stderr at 1400 consume u --limit 3/15m
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"u locked out, retry in"* ]]
	run at 1400 consume u --limit 100/1s
	[ "$status" -eq 1 ]
	run at 1400 run u --limit 3/15m -- true
	[ "$status" -eq 75 ]
	printf '%s\n' "consume u --limit 3/15m" | at 1400 batch >out
	[ "$(jget exit <out)" = 1 ]
	# a slot is a request too: none is taken, nor waited for past
	# --wait, and the job does not run
	run --separate-stderr at 1400 acquire u --concurrency 5
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[ "$stderr" = "throttle: u locked out, retry in 3m21s" ]
	run --separate-stderr timeout 20 env THROTTLE_NOW=1400 "$THROTTLE" --format json acquire u --concurrency 5 --wait=1m
	[ "$status" -eq 1 ]
	[ "$output" = '{"key":"u","allowed":false,"active":0,"limit":5,"retry_after":201,"locked_until":1601,"lockout_after":201}' ]
	run at 1400 run u --concurrency 5 -- echo ran
	[ "$status" -eq 75 ]
	[ "$output" = "throttle: u locked out, retry in 3m21s; not running echo" ]
	# and once it ends, a slot is taken as ever
	run at 1601 acquire u --concurrency 5
	[ "$status" -eq 0 ]
}

@test "lockout: check, consume and inspect show it in every format" {
	for n in 1 2 3 4; do at 1000 consume u "${L[@]}" 2>/dev/null || true; done
	run --separate-stderr at 1100 check u --limit 3/15m --format json
	[ "$status" -eq 1 ]
	[ "$(field locked_until "$output")" = 1600 ]
	[ "$(field lockout_after "$output")" = 500 ]
	[ "$(field retry_after "$output")" = 500 ]
	run --separate-stderr at 1100 inspect u --format shell
	[[ "$output" == *"THROTTLE_LOCKED_UNTIL=1600"* ]]
	[[ "$output" == *"THROTTLE_LOCKOUT_AFTER=500"* ]]
	run --separate-stderr at 1100 inspect u
	# the lockout column, in the table a person reads
	[ "${lines[1]}" = "-              -            -          -          -          8m20s      -       u" ]
	# a key that is not locked shows no lockout
	at 1100 consume free --limit 3/15m
	run at 1100 inspect free --format json
	[[ "$output" != *locked* ]]
}

@test "lockout: inspect --locked lists the keys locked now, and only those" {
	for k in a b; do
		at 1000 consume "$k" --limit 1/1h --lockout 10m
		at 1000 consume "$k" --limit 1/1h --lockout 10m 2>/dev/null || true
	done
	at 1000 consume free --limit 1/1h
	run at 1100 inspect --locked --format json
	[ "${#lines[@]}" -eq 2 ]
	[ "${lines[0]}" = '{"key":"a","locked_until":1600,"lockout_after":500}' ]
	[ "${lines[1]}" = '{"key":"b","locked_until":1600,"lockout_after":500}' ]
	run at 1100 inspect free --locked
	[ "$status" -eq 1 ]
	[[ "$output" == *"free: not locked out"* ]]
	run at 1100 inspect a --locked
	[ "$status" -eq 0 ]
	# in text, each key and how long it stays locked, an end or none
	at 1000 consume c --limit 1/1h --lockout never
	at 1000 consume c --limit 1/1h --lockout never 2>/dev/null || true
	run --separate-stderr at 1100 inspect --locked
	[ "$output" = "a lockout_after=8m20s
b lockout_after=8m20s
c lockout_after=never" ]
	"$THROTTLE" reset c
	# ended lockouts are not listed
	run at 1600 inspect --locked
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run at 1100 inspect --locked --names
	[ "$status" -eq 2 ]
}

@test "lockout: release gives units back but shows the key locked, as inspect does" {
	for i in 1 2; do at 0 consume k --limit 2/1m --lockout 10m -q; done
	run at 0 consume k --limit 2/1m --lockout 10m
	[ "$status" -eq 1 ] # the refusal starts the lockout
	run --separate-stderr at 1 release k --cost 1 --limit 2/1m --format json
	[ "$status" -eq 0 ]
	[ "$(field allowed "$output")" = false ]
	[ "$(field remaining "$output")" = 0 ]
	[ "$(field locked_until "$output")" = 600 ]
	[ "$(field retry_after "$output")" = 599 ]
	run at 599 consume k --limit 2/1m
	[ "$status" -eq 1 ]
	# without --limit, once the rate's state is at rest (the lockout
	# outlasts it), the answer still says the key is locked
	run --separate-stderr at 300 release k --format json
	[ "$status" -eq 0 ]
	[ "$(field allowed "$output")" = false ] || { echo "$output"; return 1; }
	[ "$(field remaining "$output")" = 0 ]
	[ "$(field locked_until "$output")" = 600 ]
	[ "$(field retry_after "$output")" = 300 ]
	run at 600 consume k --limit 2/1m
	[ "$status" -eq 0 ]
}

@test "lockout: a request at the instant it ends is allowed, once; a step back of its length is waited out" {
	# refused at 1, locked out until 11: at 11 the key starts afresh,
	# and its one unit of 1/1h is gone at 12 (the lockout ended once)
	for t in 0 1 11 12; do
		rc=0
		at "$t" consume k --limit 1/1h --lockout 10s 2>/dev/null || rc=$?
		echo -n "$rc "
	done >codes
	[ "$(cat codes)" = "0 1 0 1 " ] || { cat codes; return 1; }
	# locked out at 1000 until 1010; the clock stepped back by exactly
	# the lockout's length is waited out: 20s from 990, not 10s
	at 1000 consume s --limit 1/1h --lockout 10s -q
	at 1000 consume s --limit 1/1h --lockout 10s -q || true
	run --separate-stderr at 990 consume s --limit 1/1h --lockout 10s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 20 ] || { echo "$output"; return 1; }
	[ "$(field locked_until "$output")" = 1010 ]
	# while locked, every limit of a compound one shows none remaining
	at 0 consume c --limit '1/1h;10/1d' --lockout 1m -q
	run --separate-stderr at 1 consume c --limit '1/1h;10/1d' --lockout 1m --format json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"limits":[{"limit":1,'*'"remaining":0,'*'{"limit":10,'*'"remaining":0,'* ]] || { echo "$output"; return 1; }
	[[ "$output" != *'"remaining":9'* ]]
}

@test "lockout: reset lifts it" {
	for n in 1 2 3 4; do at 1000 consume u "${L[@]}" 2>/dev/null || true; done
	run at 1100 consume u --limit 3/15m
	[ "$status" -eq 1 ]
	"$THROTTLE" reset u
	run at 1100 consume u --limit 3/15m
	[ "$status" -eq 0 ]
	run at 1100 inspect --locked
	[ -z "$output" ]
}

@test "lockout: its end gives the whole allowance back, as pam_faillock does" {
	# --limit 3/15m --lockout 10m: three tries, locked, then three again
	for n in 1 2 3; do
		run at 1000 consume u "${L[@]}"
		[ "$status" -eq 0 ]
	done
	run at 1000 consume u "${L[@]}"
	[ "$status" -eq 1 ]
	for n in 1 2 3; do
		run at 1600 consume u "${L[@]}"
		[ "$status" -eq 0 ] || { echo "try $n after the lockout refused"; return 1; }
	done
	run at 1600 consume u "${L[@]}"
	[ "$status" -eq 1 ]
	run --separate-stderr at 1600 consume u "${L[@]}" --format json
	[ "$(field lockout_after "$output")" = 600 ]
}

@test "lockout: --lockout never lasts until reset" {
	at 1000 consume u --limit 1/1h --lockout never
	run --separate-stderr at 1000 consume u --limit 1/1h --lockout never
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"u locked out until reset"* ]]
	run --separate-stderr at 99999999 consume u --limit 1/1h
	[ "$status" -eq 1 ]
	run --separate-stderr at 99999999 inspect u --format json
	[ "$(field locked_until "$output")" = null ]
	[ "$(field lockout_after "$output")" = null ]
	run at 99999999 inspect u
	[[ "${lines[1]}" == *" never "*" u" ]]
	"$THROTTLE" reset u
	run at 99999999 consume u --limit 1/1h
	[ "$status" -eq 0 ]
	run "$THROTTLE" consume u --limit 1/1h --lockout forever
	[ "$status" -eq 2 ]
	[[ "$output" == *"--lockout: 'forever'"*"or never (until reset)"* ]]
	# one shape for it, whatever asks: consume, check, a slot, a wait
	at 2000 consume n --limit 1/1h --lockout never
	at 2000 consume n --limit 1/1h --lockout never || true
	for cmd in "consume n --limit 1/1h" "check n --limit 1/1h" "acquire n --concurrency 1" "acquire n --concurrency 1 --wait"; do
		run --separate-stderr timeout 20 env THROTTLE_NOW=2000 "$THROTTLE" $cmd
		[ "$status" -eq 1 ] || { echo "$cmd: $status"; return 1; }
		[[ "$stderr" == "throttle: n locked out until reset; throttle reset lifts it"* ]] || { echo "$cmd: $stderr"; return 1; }
	done
}

@test "lockout: a slot's --wait waits out a lockout that ends within it, as a rate's does" {
	# (the real clock: the wait is slept)
	"$THROTTLE" consume s --limit 1/1h --lockout 1s
	"$THROTTLE" consume s --limit 1/1h --lockout 1s || true
	t0=$(date +%s%N)
	run --separate-stderr "$THROTTLE" acquire s --concurrency 1 --wait=20s
	t1=$(date +%s%N)
	[ "$status" -eq 0 ]
	# it waited for the lockout's second, not for all of --wait (a loose
	# bound: a busy machine may be slow, never 10 s slow here)
	[ $(((t1 - t0) / 1000000)) -lt 10000 ] || { echo "waited $(((t1 - t0) / 1000000)) ms"; return 1; }
	[[ "$stderr" == "throttle: s locked out, waiting "*" for it (--wait at most 20s)" ]] || { echo "$stderr"; return 1; }
	[[ "$output" =~ ^[0-9a-f]{16}$ ]]
	# one that ends later than --wait allows refuses at once
	"$THROTTLE" consume t --limit 1/1h --lockout 1h
	"$THROTTLE" consume t --limit 1/1h --lockout 1h || true
	run --separate-stderr timeout 20 "$THROTTLE" run t --concurrency 1 --wait=1m -- echo ran
	[ "$status" -eq 75 ]
	[[ "$stderr" == "throttle: t locked out, retry in 59m59"*"; not running echo" ]] || { echo "$stderr"; return 1; }
}

@test "lockout: inspect of a locked key with several limits says none remains, and never as null" {
	for i in 1 2 3 4; do at 100 consume v --limit '3/1m;10/1h' --lockout never || true; done
	# a release gives the limits' units back, the lockout stays
	at 100 release v --limit '3/1m;10/1h'
	run --separate-stderr at 100 inspect v --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
	[[ "$output" == *'"limits":[{"limit":3,"period":60,"burst":3,"remaining":0,"retry_after":null,"reset_after":null},{"limit":10,"period":3600,"burst":10,"remaining":0,"retry_after":null,"reset_after":null}]'* ]] || { echo "$output"; return 1; }
	# as check answers it
	run --separate-stderr at 100 check v --limit '3/1m;10/1h' --cost 0 --format json
	[ "$(field remaining "$output")" = 0 ]
}

@test "lockout: a key whose rate state was forgotten still shows its lockout" {
	at 1000 consume u --limit 1/1s --lockout 1h
	at 1000 consume u --limit 1/1s --lockout 1h 2>/dev/null || true
	# the rate state is at rest long before the lockout ends: gc drops it
	at 1100 gc >/dev/null
	run --separate-stderr at 1100 inspect u --format json
	[ "$status" -eq 0 ]
	[ "$output" = '{"key":"u","locked_until":4600,"lockout_after":3500}' ]
	run at 1100 consume u --limit 1/1s
	[ "$status" -eq 1 ]
}

@test "lockout: gc forgets ended lockouts and counts them" {
	at 1000 consume u --limit 1/1s --lockout 1m
	at 1000 consume u --limit 1/1s --lockout 1m 2>/dev/null || true
	# the lockout's start forgot the rate state; it lasts its minute
	run at 1010 gc --format json
	[ "$output" = '{"keys":0,"leases":0,"lockouts":0,"shedders":0}' ]
	run at 1010 consume u --limit 1/1s
	[ "$status" -eq 1 ]
	run at 1100 gc
	[ "$output" = "removed 0 keys at rest, 0 ended leases, 1 ended lockout and 0 idle shedders" ]
	run at 1100 inspect u
	[ "$status" -eq 1 ]
}

@test "lockout: a --wait that will be allowed in time starts none, on every algorithm" {
	for a in gcra fixed-window sliding-window hybrid; do
		at 100 consume "w-$a" --limit 1/300ms --lockout 1h --algorithm "$a"
		# the rate's wait is 300ms, within --wait: it waits, and is no
		# refusal to lock the key out for
		run --separate-stderr at 100 consume "w-$a" --limit 1/300ms --lockout 1h --algorithm "$a" --wait=5s
		[ "$status" -eq 0 ] || { echo "$a: $status $stderr"; return 1; }
		run --separate-stderr at 101 inspect "w-$a" --locked
		[ "$status" -eq 1 ] || { echo "$a locked: $output"; return 1; }
		# past --wait it is refused, and that refusal starts the lockout
		run --separate-stderr at 101 consume "w-$a" --limit 1/1h --lockout 1h --algorithm "$a"
		run --separate-stderr at 101 consume "w-$a" --limit 1/1h --lockout 1h --algorithm "$a" --wait=1s
		[ "$status" -eq 1 ]
		# a refusal past --wait that starts the lockout says both; one
		# that meets it, locked out
		at 101 consume "x-$a" --limit 1/1h --lockout 1h --algorithm "$a"
		run --separate-stderr at 101 consume "x-$a" --limit 1/1h --lockout 1h --algorithm "$a" --wait=1s
		[ "$status" -eq 1 ]
		[[ "$stderr" == "throttle: x-$a locked out, retry in 1h: the wait of "*" was more than --wait 1s allows" ]] || { echo "$a: $stderr"; return 1; }
		run --separate-stderr at 101 consume "x-$a" --limit 1/1h --lockout 1h --algorithm "$a" --wait=1s
		[ "$status" -eq 1 ]
		[ "$stderr" = "throttle: x-$a locked out, retry in 1h: more than --wait 1s allows" ]
		# a refusal past --wait that starts a lockout shorter than
		# --wait is final: no wait through it to the allowance its end
		# gives back
		at 101 consume "s-$a" --limit 1/1h --lockout 2s --algorithm "$a"
		run --separate-stderr at 101 consume "s-$a" --limit 1/1h --lockout 2s --algorithm "$a" --wait=3s
		[ "$status" -eq 1 ] || { echo "$a: $status $stderr"; return 1; }
		[[ "$stderr" == "throttle: s-$a locked out, retry in 2s: the wait of "*" was more than --wait 3s allows" ]]
		run --separate-stderr at 101 inspect "w-$a" --locked
		[ "$status" -eq 0 ] || { echo "$a not locked"; return 1; }
	done
}
