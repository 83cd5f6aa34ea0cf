#!/usr/bin/env bats
# Durations, limits, numbers and THROTTLE_NOW as the command line takes them.

load lib

@test "good limits and durations are accepted" {
	for l in 3/60s 5/15m 100/m 1000/1d 2/1h30m 10/0.5s 1/250ms 7/1w 4/90 1/1.5h; do
		run at 100 check k --limit "$l"
		[ "$status" -eq 0 ] || { echo "refused: $l: $output"; return 1; }
	done
}

@test "a bare unit means one of it, a bare number means seconds" {
	run at 100 check k --limit 100/m --format json
	[ "$(field period "$output")" = 60 ]
	run at 100 check k --limit 4/90 --format json
	[ "$(field period "$output")" = 90 ]
	run at 100 check k --limit 2/1h30m --format json
	[ "$(field period "$output")" = 5400 ]
	run at 100 check k --limit 1/250ms --format json
	[ "$(field period "$output")" = 0.25 ]
}

@test "units may be written as words: '10/hour;100/day', 15min, 2days, 1week" {
	run at 100 check k --limit '10/hour;100/day' --format json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"limits":[{"limit":10,"period":3600,'*'{"limit":100,"period":86400,'* ]]
	run at 100 check k --limit 5/15min --format json
	[ "$(field period "$output")" = 900 ]
	run at 100 check k --limit 3/2days --lockout 1week --format json
	[ "$(field period "$output")" = 172800 ]
	# written back in the short units
	run at 100 check k --limit 5/15minutes
	[ "$status" -eq 0 ]
	at 100 consume k --limit 1/1hour30min
	run at 100 inspect k
	[[ "$output" == *" 1/1h30m "* ]]
	run at 100 check k --limit 1/1month
	[ "$status" -eq 2 ]
}

@test "bad limits exit 2 naming --limit and the value" {
	for l in 5 /5s 5/ 0/1s 5/0s -1/1s a/1s 5/1x 5/1m1h 5/1s1s 5/1.s 5/0.0000001s \
	    18446744073709551615/1ms 1/1000000000w ''; do
		run at 100 check k --limit "$l"
		[ "$status" -eq 2 ] || { echo "accepted: '$l'"; return 1; }
		[[ "$output" == "throttle: --limit: '$l' "* ]] || { echo "$output"; return 1; }
	done
}

@test "the largest numbers give a clear answer, never an overflow" {
	run at 100 consume k --limit 9223372036854775807/1ms --cost 9223372036854775807
	[ "$status" -eq 0 ]
	run at 100 consume k2 --limit 1/1000000w
	[ "$status" -eq 0 ]
	run at 100 consume k2 --limit 1/1000000w --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 604800000000 ]
	run at 100 consume k3 --limit 1/1s --cost 9223372036854775808
	[ "$status" -eq 2 ]
	[[ "$output" == *"--cost"*"too large"* ]]
	run at 100 consume k4 --limit 1/1000000w --burst 10
	[ "$status" -eq 2 ]
	[[ "$output" == *"146000 years"* ]]
	# the limit alone is fine: the message names the burst, the value
	# at fault
	[[ "$output" == "throttle: --burst: 10 with --limit '1/1000000w':"*"give a smaller --burst" ]]
	run at 100 consume k4 --limit 1/1s --burst 9223372036854775807
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: --burst: 9223372036854775807 "* ]]
}

@test "--burst and --cost take whole numbers" {
	for b in 0 -1 1.5 x ''; do
		run at 1 check k --limit 1/1s --burst "$b"
		[ "$status" -eq 2 ]
		[[ "$output" == *"--burst: '$b'"* ]]
	done
	for c in -1 1.5 x ''; do
		run at 1 check k --limit 1/1s --cost "$c"
		[ "$status" -eq 2 ]
		[[ "$output" == *"--cost: '$c'"* ]]
	done
}

@test "a number refused says what to write instead: the least, an example, the most" {
	run at 1 check k --limit 1/1s --cost -1
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: --cost: '-1' is not a whole number; give 0 or more in digits, as in --cost 2" ]
	run at 1 acquire k --concurrency 1.5
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: --concurrency: '1.5' is not a whole number; give 1 or more in digits, as in --concurrency 2" ]
	run at 1 shed k --utilization .5 --seed abc
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: --seed: 'abc' is not a whole number; give 0 or more in digits, as in --seed 2" ]
	run at 1 check k --limit 1/1s --burst 99999999999999999999
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: --burst: '99999999999999999999' is too large; the most is 9223372036854775807" ]
}

@test "a compound limit with an empty part says so, naming the whole value" {
	for l in '5/1s;' ';5/1s' '5/1s;;3/1m' ';'; do
		run at 1 check k --limit "$l"
		[ "$status" -eq 2 ]
		[ "$output" = "throttle: --limit: '$l' has an empty limit beside a ';' (join limits with one ';', as in 10/1h;100/1d)" ] || { echo "$output"; return 1; }
	done
}

@test "blanks around a compound limit's parts are let be, as in '10/1h; 100/1d'" {
	run --separate-stderr at 1 check k --limit '10/1h; 100/1d' --format json
	[ "$status" -eq 0 ]
	[ "$output" = "$(THROTTLE_NOW=1 "$THROTTLE" check k --limit '10/1h;100/1d' --format json)" ]
	run at 1 check k --limit ' 5/1s '
	[ "$status" -eq 0 ]
	for l in '5/1s; ' ' ; 5/1s'; do
		run at 1 check k --limit "$l"
		[ "$status" -eq 2 ]
		[[ "$output" == *"has an empty limit beside a ';'"* ]] || { echo "$output"; return 1; }
	done
	# a blank inside a limit is not one around it
	run at 1 check k --limit '10 /1h'
	[ "$status" -eq 2 ]
}

@test "--lock-timeout takes a duration" {
	run at 1 check k --limit 1/1s --lock-timeout 250ms
	[ "$status" -eq 0 ]
	run at 1 check k --limit 1/1s --lock-timeout soon
	[ "$status" -eq 2 ]
	[[ "$output" == *"--lock-timeout: 'soon'"* ]]
}

@test "THROTTLE_NOW: decimal seconds; negative or non-numeric is exit 2" {
	run at 1000.25 consume k --limit 1/1s --format json
	[ "$status" -eq 0 ]
	run at 1000.5 consume k --limit 1/1s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 0.75 ]
	for t in -1 abc 1e9 '10 ' 99999999999999; do
		run at "$t" consume k --limit 1/1s
		[ "$status" -eq 2 ]
		[[ "$output" == "throttle: THROTTLE_NOW: '$t' "* ]]
	done
}

@test "an empty THROTTLE_NOW means the real clock" {
	run env THROTTLE_NOW= "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 0 ]
}

@test "--wait takes its bound as the next word or after =, as help shows it" {
	at 1000 consume w --limit 1/1h
	run --separate-stderr at 1000 consume w --limit 1/1h --wait 1m
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"more than --wait 1m allows"* ]]
	run --separate-stderr at 1000 consume w --limit 1/1h --wait=1m
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"more than --wait 1m allows"* ]]
	# a word that is not a duration is the next operand, as before
	run --separate-stderr at 1000 consume --wait w2 --limit 1/1h
	[ "$status" -eq 0 ]
	# so is one that is a unit's name (a key "day"): as a separate
	# word, a bound begins with a number
	for k in day hour m; do
		run --separate-stderr at 1000 consume --wait "$k" --limit 1/1h --format json
		[ "$status" -eq 0 ] || { echo "$k: $status $stderr"; return 1; }
		[[ "$output" == '{"key":"'"$k"'","allowed":true,'* ]]
	done
	# but a mistyped bound is named as one, not as an argument too many
	run --separate-stderr at 1000 consume w3 --limit 1/1h --wait 5x
	[ "$status" -eq 2 ]
	[[ "$stderr" == "throttle: --wait: '5x' is not a duration"*"goes before --wait" ]] || { echo "$stderr"; return 1; }
	# and a key that begins with a digit after --wait is still the key
	run --separate-stderr at 1000 consume --wait 10.0.0.1 --limit 5/1m --format json
	[ "$status" -eq 0 ]
	[[ "$output" == '{"key":"10.0.0.1","allowed":true,'* ]]
	run "$THROTTLE" help consume
	[[ "$output" == *"[--wait [MAX]]"* ]]
}
