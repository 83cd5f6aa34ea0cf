#!/usr/bin/env bats
# Named policies, compound limits, --wait, lockouts and gc.

load lib

@test "policy set/list/show/delete" {
	run "$THROTTLE" policy set login --limit 5/15m --lockout 10m
	[ "$status" -eq 0 ]
	"$THROTTLE" policy set api --limit '10/1s;1000/1d' --algorithm gcra
	run "$THROTTLE" policy list
	[ "${lines[0]}" = "api --limit 10/1s;1000/1d --algorithm gcra" ]
	[ "${lines[1]}" = "login --limit 5/15m --lockout 10m" ]
	run "$THROTTLE" policy show login --format json
	[ "$output" = '{"name":"login","options":"--limit 5/15m --lockout 10m"}' ]
	run "$THROTTLE" policy delete login
	[ "$status" -eq 0 ]
	run --separate-stderr "$THROTTLE" policy show login
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: policy show: no policy named 'login'" ]
	run "$THROTTLE" policy delete login
	[ "$status" -eq 1 ]
}

@test "policy set keeps a compound limit written with blanks, as --limit takes it" {
	run "$THROTTLE" policy set api --limit ' 2/1h;	3/1d ' --lockout 1m
	[ "$status" -eq 0 ]
	run "$THROTTLE" policy show api
	[ "$output" = "api --limit 2/1h;3/1d --lockout 1m" ]
	run "$THROTTLE" consume api:x
	[ "$status" -eq 0 ]
	run "$THROTTLE" --format json check api:x --cost 0
	[[ "$output" == *'"limits":[{"limit":2,"period":3600,'*'{"limit":3,"period":86400,'* ]]
	run "$THROTTLE" policy set api --limit '2/1h; 3/1d' --ttl '5 s'
	[ "$status" -eq 2 ]
	[[ "$output" == *"--ttl"* ]]
}

@test "policy set validates what it stores" {
	run "$THROTTLE" policy set bad --limit 5/0s
	[ "$status" -eq 2 ]
	run "$THROTTLE" policy set bad
	[ "$status" -eq 2 ]
	[[ "$output" == *"give the options the policy holds"* ]]
	run "$THROTTLE" policy set bad --burst 3
	[ "$status" -eq 2 ]
	# a --reserve alone could never apply: a command line's
	# --concurrency drops it
	run "$THROTTLE" policy set bad --reserve 1
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: policy set: --reserve goes with --concurrency; give the slot count too" ]
	run "$THROTTLE" policy set bad --limit 1/1s --cost 2
	[ "$status" -eq 2 ]
	run "$THROTTLE" policy frob x
	[ "$status" -eq 2 ]
	run --separate-stderr "$THROTTLE" policy list
	[ "$output" = "" ]
}

@test "a key uses the policy named like it or its longest prefix before ':'" {
	"$THROTTLE" policy set login --limit 3/1m
	"$THROTTLE" policy set login:admin --limit 1/1m
	for n in 1 2 3; do at 5 consume login:alice; done
	run at 5 consume login:alice
	[ "$status" -eq 1 ]
	at 5 consume login:admin:ssh
	run at 5 consume login:admin:ssh
	[ "$status" -eq 1 ]
	run at 5 consume login --format json
	[ "$(field limit "$output")" = 3 ]
	# "loginx" is not under "login"
	run at 5 consume loginx
	[ "$status" -eq 2 ]
	[[ "$output" == *"no limit for this key"*"policy"* ]]
	# a one-letter policy governs its keys too
	"$THROTTLE" policy set a --limit 1/1m
	at 5 consume a:b
	run at 5 consume a:b
	[ "$status" -eq 1 ]
}

@test "command-line options override the policy's, one by one" {
	"$THROTTLE" policy set login --limit 3/1m --lockout 10m
	run at 5 consume login:bob --limit 10/1m --format json
	[ "$(field limit "$output")" = 10 ]
	run at 6 consume login:carol --burst 5 --format json
	[ "$(field limit "$output")" = 3 ]
	[ "$(field burst "$output")" = 5 ]
	run at 7 check login:dave --cost 2 --format json
	[ "$(field remaining "$output")" = 1 ]
}

@test "--limit on the command line keeps the policy's lockout and algorithm" {
	"$THROTTLE" policy set login --limit 5/15m --lockout 1h --algorithm fixed-window
	run at 100 consume login:eve --limit 1/1m --format json
	[ "$status" -eq 0 ]
	[ "$(field limit "$output")" = 1 ]
	[ "$(field period "$output")" = 60 ]
	[[ "$output" == *'"algorithm":"fixed-window"'* ]]
	# refused: the policy's lockout starts, though the line named a limit
	run --separate-stderr at 101 consume login:eve --limit 1/1m
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: login:eve locked out, retry in 1h" ]
	run at 200 consume login:eve --limit 1/1m
	[ "$status" -eq 1 ]
}

@test "an option the user did not give is never blamed" {
	# --burst and --granularity belong with the policy's own limit and
	# algorithm: a line that names another algorithm or limit drops them
	"$THROTTLE" policy set mail --limit 100/1h --algorithm sliding-window --granularity 1m
	run --separate-stderr at 100 consume mail:x --algorithm gcra --format json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"algorithm":"gcra"'* ]]
	[ "$(field limit "$output")" = 100 ]
	run --separate-stderr at 100 consume mail:y --limit 10/1s --format json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"algorithm":"sliding-window"'* ]]
	"$THROTTLE" policy set api --limit 5/1s --burst 10
	run at 100 consume api:x --algorithm fixed-window --format json
	[ "$status" -eq 0 ]
	[ "$(field burst "$output")" = 5 ]
	# --reserve belongs with the policy's --concurrency
	"$THROTTLE" policy set pool --concurrency 10 --reserve 5
	run "$THROTTLE" acquire pool:a --concurrency 1
	[ "$status" -eq 0 ]
	# what the user gave and the policy cannot take is named, with the
	# policy's part said as the policy's
	run --separate-stderr at 100 consume mail:z --burst 3
	[ "$status" -eq 2 ]
	[ "$stderr" = "throttle: --burst: sliding-window has no burst (only gcra does); leave --burst out (the policy 'mail' gives --limit 100/1h --algorithm sliding-window --granularity 1m)" ]
	# a command's own refusal of an option the policy gave says so too,
	# on the command line and in a batch
	"$THROTTLE" policy set t0 --concurrency 2 --ttl 0
	run --separate-stderr "$THROTTLE" acquire t0:a
	[ "$status" -eq 2 ]
	[ "$stderr" = "throttle: --ttl: 0 (no expiry) needs --owner, or a slot could be held forever (the policy 't0' gives --concurrency 2 --ttl 0)" ]
	"$THROTTLE" policy set bb --limit 5/1m --burst 2
	run --separate-stderr at 100 consume bb:x --cost 3
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"raise --burst (the policy 'bb' gives --limit 5/1m --burst 2)" ]]
	run --separate-stderr at 100 batch <<<'consume bb:x --cost 3'
	[[ "$output" == *"raise --burst (the policy 'bb' gives --limit 5/1m --burst 2)\",\"exit\":2}" ]]
}

@test "a policy can hold a concurrency limit for acquire and run" {
	"$THROTTLE" policy set staging --concurrency 1
	"$THROTTLE" acquire staging >/dev/null
	run "$THROTTLE" acquire staging
	[ "$status" -eq 1 ]
	run "$THROTTLE" run staging -- true
	[ "$status" -eq 75 ]
}

@test "a policy this throttle cannot use is refused, exit 3" {
	needs_sqlite
	"$THROTTLE" policy set x --limit 1/1s
	sqlite3 state.db "UPDATE rec SET data = CAST('--db /tmp/evil' AS BLOB) WHERE kind = 5"
	run at 1 consume x
	[ "$status" -eq 3 ]
	[[ "$output" == *"the policy 'x' holds options this throttle cannot use"* ]]
	# and verify, which reads every record as a command would, finds it
	# before a key does: a value no parser takes, an option no policy
	# holds, a name with a NUL
	run --separate-stderr "$THROTTLE" verify
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the policy 'x' holds options this throttle cannot use"* ]]
	for opts in '--limit 5/zz' '--cost 3' '--limit' '--limit 5/15m --granularity 1m' \
	    '--concurrency 2 --reserve 5' '--reserve 10%' '--limit 1/1s --limit 5/1m --burst 3'; do
		sqlite3 state.db "UPDATE rec SET data = CAST('$opts' AS BLOB) WHERE kind = 5"
		run --separate-stderr "$THROTTLE" verify
		[ "$status" -eq 3 ] || { echo "'$opts': $status $stderr"; return 1; }
	done
	sqlite3 state.db "UPDATE rec SET key = X'7800', data = CAST('--limit 1/1s' AS BLOB) WHERE kind = 5"
	run --separate-stderr "$THROTTLE" verify
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"holds a policy this throttle cannot read"* ]]
	sqlite3 state.db "UPDATE rec SET key = CAST('x' AS BLOB) WHERE kind = 5"
	run "$THROTTLE" verify
	[ "$status" -eq 0 ]
	# every policy policy set takes, verify takes
	"$THROTTLE" policy set 'a b' --limit '1/1s;5/1m' --limit 10/1h --algorithm sliding-window --granularity 1s --lockout never
	"$THROTTLE" policy set c --concurrency 5 --reserve 10% --ttl 30s
	"$THROTTLE" policy set h --limit 5/1m --algorithm hybrid --lockout 1m --concurrency 3 --reserve 1
	"$THROTTLE" policy set g --limit 5/1m --burst 10
	run "$THROTTLE" verify
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	"$THROTTLE" policy delete 'a b'
	"$THROTTLE" policy delete c
	"$THROTTLE" policy delete h
	"$THROTTLE" policy delete g
	# options cut short by a NUL: refused by a batch as by a single call
	sqlite3 state.db "UPDATE rec SET data = CAST('--limit 1/1s' AS BLOB) || X'00' || CAST('x' AS BLOB) WHERE kind = 5"
	run at 1 consume x
	[ "$status" -eq 3 ]
	run --separate-stderr at 1 batch <<<"consume x"
	[ "$(field exit "$output")" = 3 ] || { echo "$output"; return 1; }
}

@test "compound limits: 2/1s and 5/1m, the issue's example" {
	L=(--limit 2/1s --limit 5/1m)
	run at 0 consume k "${L[@]}"
	[ "$status" -eq 0 ]
	run at 0 consume k "${L[@]}"
	[ "$status" -eq 0 ]
	run --separate-stderr at 0 consume k "${L[@]}" --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 0.5 ]
	[ "$(field limit "$output")" = 2 ]
	at 1 consume k "${L[@]}"
	at 1 consume k "${L[@]}"
	run at 2 consume k "${L[@]}"
	[ "$status" -eq 0 ]
	run --separate-stderr at 2.5 consume k "${L[@]}" --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 9.5 ]
	[ "$(field limit "$output")" = 5 ]
	[[ "$output" == *'"limits":[{"limit":2,"period":1,"burst":2,"allowed":true,'*'{"limit":5,"period":60,"burst":5,"allowed":false,"remaining":0,"retry_after":9.5,'* ]]
}

@test "compound limits: a cost no limit could allow names that limit, not --burst" {
	run --separate-stderr at 0 consume k --limit 100/1h --limit 5/1m --cost 10
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[[ "$stderr" == *"--cost: 10 is more than --limit 5/1m allows at once (5)"*"raise that limit's count"* ]]
	[[ "$stderr" != *"--burst"* ]]
	run at 0 check k --limit 100/1h --limit 5/1m
	[ "$status" -eq 0 ]
}

@test "compound limits: ;-joined, inspect shows each, release gives back to all" {
	at 0 consume k --limit '2/1s;5/1m' --cost 2
	run at 0 inspect k
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[1]}" == "gcra           2/1s         0 "*" k" ]]
	[[ "${lines[2]}" == "gcra           5/1m         3 "*" k" ]]
	run at 0 release k --cost 2 --format json
	[ "$(field remaining "$output")" = 2 ]
	run at 0 consume k --limit '2/1s;5/1m' --cost 2
	[ "$status" -eq 0 ]
	# dropping a limit forgets its state
	at 10 consume k --limit 100/1s --cost 1
	run at 10 inspect k
	[ "${#lines[@]}" -eq 2 ]
	run at 0 consume k --limit 1/1s --limit 2/1s --burst 2
	[ "$status" -eq 2 ]
}

@test "compound limits: written in another order, each limit keeps its own state" {
	at 0 consume o --limit '10/1h;1000/1d' --cost 10
	run at 0 consume o --limit '10/1h;1000/1d'
	[ "$status" -eq 1 ]
	# the same two limits, the other way round: still 10 an hour
	for i in $(seq 5); do
		run at 0 consume o --limit '1000/1d;10/1h'
		[ "$status" -eq 1 ] || { echo "admitted: $output"; return 1; }
	done
	run at 0 consume o --limit 1000/1d --limit 10/1h --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 360 ]
	[[ "$output" == *'"limits":[{"limit":1000,"period":86400,"burst":1000,"allowed":true,"remaining":990,'* ]] # refused: nothing charged
	# and back: each state went where its limit now is
	run at 360 consume o --limit '10/1h;1000/1d' --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 0 ]
	run at 360 inspect o
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[1]}" == "gcra           10/1h        0 "* ]]
	[[ "${lines[2]}" == "gcra           1000/1d      993 "* ]]
	# one limit changed and moved: the state of the one it replaced
	# carries over (an hour from rest, as 10/1h used up was), not a
	# fresh one that would admit 20 at once
	run at 360 consume o --limit '1000/1d;20/1h' --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 180 ]
	[[ "$output" == *'{"limit":20,"period":3600,"burst":20,"allowed":false,"remaining":0,'* ]]
}

@test "compound limits: a limit changed, period and all, keeps its state wherever it is written" {
	for i in $(seq 10); do at 1000 consume c --limit '10/1h;100/1d' -q; done
	# 10/1h became 10/10h: the 10 units count, in either order (given
	# first, it took the place's state; given last, the one left over)
	for l in '10/10h;100/1d' '100/1d;10/10h'; do
		run --separate-stderr at 1001 check c --limit "$l" --format json
		[ "$status" -eq 1 ] || { echo "$l: $output"; return 1; }
		[ "$(field retry_after "$output")" = 3599 ] || { echo "$l: $output"; return 1; }
	done
	run at 1001 consume c --limit '100/1d;10/10h'
	[ "$status" -eq 1 ]
	run at 4600 consume c --limit '100/1d;10/10h'
	[ "$status" -eq 0 ]
}

@test "compound limits: a member at rest takes no place, whether or not gc has forgotten it" {
	for with_gc in 0 1; do
		k="q$with_gc"
		for i in $(seq 0 9); do
			at $((1000 + 60 * i)) consume "$k" --limit '1/1m;10/1d' --algorithm fixed-window -q
		done
		# 1/1m is at rest by 1700; the day's quota, lowered to 8, is
		# still the day's 10 (gc or not: the minute's place is no
		# sign that 8/1d replaced it)
		[ "$with_gc" = 0 ] || at 1700 gc -q
		admitted=0
		for i in $(seq 0 9); do
			at $((1700 + i)) consume "$k" --limit 8/1d --algorithm fixed-window -q && admitted=$((admitted + 1))
		done
		[ "$admitted" = 0 ] || { echo "gc=$with_gc: $admitted admitted"; return 1; }
	done
	# nor does a member at rest keep its own limit from the state in
	# its place when that is its only sign: 2/1m, at rest after a cost
	# of 0, answers as once gc has forgotten it
	for with_gc in 0 1; do
		k="z$with_gc"
		at 1000 consume "$k" --limit 2/15m -q
		at 1000 consume "$k" --limit '3/1h;2/1m' --cost 0 -q
		[ "$with_gc" = 0 ] || at 1000 gc -q
		at 1000.2 consume "$k" --limit 2/1m --cost 0 --format json |
		    sed 's/"key":"z[01]"//' >"answer.$with_gc"
	done
	grep -q '"remaining":0,' answer.0
	cmp answer.0 answer.1
}

@test "compound limits: the answer is the same in either order, the later rest binding a tie" {
	# after one unit both limits wait 0 with 0 left: the day's is
	# the key's rest, whichever is written first
	for l in '1/1m;1/1d' '1/1d;1/1m'; do
		run at 0 consume "o$l" --limit "$l" --format json
		[ "$(field reset_after "$output")" = 86400 ] || { echo "$l: $output"; return 1; }
		[ "$(field period "$output")" = 86400 ]
		run at 0 check "o$l" --limit "$l" --cost 0 --format json
		[ "$(field reset_after "$output")" = 86400 ] || { echo "$l: $output"; return 1; }
		run at 0 inspect "o$l" --format json
		[ "$(field reset_after "$output")" = 86400 ] || { echo "$l: $output"; return 1; }
	done
}

@test "compound limits: a refusal in another order keeps each state where it was found" {
	at 2000 consume k --limit '10/1h;2/1s' --cost 2
	# the clock 1000s back: the 2/1s state is moved back to it (its
	# horizon is 1s), the 10/1h one is not (1h); refused, only the moved
	# one is written, and to its own place, not over the other's
	run at 1000 consume k --limit '2/1s;10/1h'
	[ "$status" -eq 1 ]
	run at 1000 inspect k
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[1]}" == "gcra           10/1h        5 "* ]]
	[[ "${lines[2]}" == "gcra           2/1s         0 "* ]]
}

@test "compound limits: a limit gc forgot at rest starts at rest, and takes no other's state" {
	for t in 0 60 120 180 240 300 360 420 480 540; do
		at $t consume api --limit '10/1m;1000/1d' --cost 10 >/dev/null
	done
	# by 1000 the minute limit is at rest and gc forgets it; the day's
	# 100 units stay
	run at 1000 gc
	[ "$output" = "removed 1 key at rest, 0 ended leases, 0 ended lockouts and 0 idle shedders" ]
	run at 1000 inspect api
	[ "$status" -eq 0 ]
	[[ "${lines[1]}" == "gcra           1000/1d      911 "*" api" ]]
	run at 1000 verify
	[[ "$output" == *": ok, 1 key and 0 leases" ]]
	# the minute limit alone: at rest, not the day's state converted
	run at 1000 check api --limit 10/1m --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 9 ]
	# both again: the day limit still counts its 100 units
	run at 1000 consume api --limit '10/1m;1000/1d' --format json
	[ "$status" -eq 0 ]
	[[ "$output" == *'{"limit":1000,"period":86400,"burst":1000,"allowed":true,"remaining":910,'* ]]
}

@test "compound limits: 20 racing processes admit exactly what the tightest allows" {
	pids=()
	for p in $(seq 20); do
		(for c in $(seq 10); do at 10 consume hot --limit 1000/1s --limit 30/1h -q && echo ok; done) >"$TMP/out.$p" &
	done
	wait
	[ "$(cat "$TMP"/out.* | grep -c ok)" -eq 30 ]
	run at 10 inspect hot --format json
	[ "${#lines[@]}" -eq 1 ]
	# the looser limit was charged exactly 30 too
	[[ "$output" == *'"limits":[{"limit":1000,"period":1,"burst":1000,"remaining":970,'* ]]
}

# placed N: caller N is through, or says it waits (which it does once its
# reservation is made)
placed() {
	grep -qs "^$1 " "$TMP/order" || grep -qs waiting "$TMP/err.$1"
}

@test "--wait: six callers one after another on 2/1s all succeed, in order, ~2s" {
	: >"$TMP/order"
	start=$(date +%s%N)
	for n in 1 2 3 4 5 6; do
		("$THROTTLE" consume k --limit 2/1s --wait 2>"$TMP/err.$n" && echo "$n $(date +%s%N)" >>"$TMP/order") &
		# each has its place before the next comes
		wait_until placed "$n"
	done
	wait
	[ "$(wc -l <"$TMP/order")" -eq 6 ]
	[ "$(cut -d' ' -f1 "$TMP/order" | tr -d '\n')" = 123456 ]
	last=$(tail -1 "$TMP/order" | cut -d' ' -f2)
	ms=$(((last - start) / 1000000))
	# two at once, then one each 500ms: the sixth at 2s, never sooner
	[ "$ms" -ge 1900 ] && [ "$ms" -le 8000 ] || { echo "${ms}ms"; return 1; }
}

@test "--wait: a reservation's reset_after counts from when it wakes, whatever its place in line" {
	# the clock pinned at 1000 for each: the second is second in line
	at 1000 consume k --limit 1/1s -q
	at 1000 consume k --limit 1/1s --wait -q
	run --separate-stderr at 1000 consume k --limit 1/1s --wait --format json
	[ "$status" -eq 0 ]
	# it waited 2s, and is at rest 1s after it woke (it said 2: its wait)
	[ "$(field retry_after "$output")" = 0 ]
	[ "$(field reset_after "$output")" = 1 ] || { echo "$output"; return 1; }
}

@test "--wait: a reservation too far off for a state to hold is not made, and the key stays usable" {
	# a refill of 145,000 years: reserving it would store a time past
	# what a state may hold, and every later call would fail
	at 1000 consume k --limit 1/1d --burst 53000000 --cost 53000000
	THROTTLE_NOW=1000 timeout 0.5 "$THROTTLE" consume k --limit 1/1d --burst 53000000 --cost 53000000 --wait 2>/dev/null || true
	run --separate-stderr at 1000 check k --limit 1/1d --burst 53000000 --cost 0
	[ "$status" -eq 0 ] || { echo "$status $stderr"; return 1; }
	run --separate-stderr at 1000 consume k --limit 5/1m
	[ "$status" -eq 1 ] || { echo "$status $stderr"; return 1; }
	run at 1000 verify
	[ "$status" -eq 0 ]
}

@test "--wait=MAX refuses at once when the wait would be longer" {
	at 0 consume k --limit 1/1m
	start=$(date +%s%N)
	run --separate-stderr at 0 consume k --limit 1/1m --wait=10s
	end=$(date +%s%N)
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: k throttled, retry in 1m: more than --wait 10s allows" ]
	[ $(((end - start) / 1000000)) -lt 1000 ]
	# a bound that rounds to the wait is shown as given, not as equal
	run --separate-stderr at 0 consume k --limit 1/1m --wait=59.999999s
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: k throttled, retry in 1m: more than --wait 59.999999s allows" ]
	# and with the digits given, not zeros added
	run --separate-stderr at 0 consume k --limit 1/1m --wait=59.9999s
	[ "$stderr" = "throttle: k throttled, retry in 1m: more than --wait 59.9999s allows" ]
	run at 0 inspect k --format json
	[ "$(field retry_after "$output")" = 60 ]
	# a wait within MAX is taken
	run at 0 consume w --limit 4/1s --cost 4
	run at 0 consume w --limit 4/1s --wait=1s
	[ "$status" -eq 0 ]
	# and a wait exactly MAX long too, reserved or polled
	for algo in gcra fixed-window; do
		at 0 consume "e$algo" --limit 1/300ms --algorithm "$algo"
		run --separate-stderr at 0 consume "e$algo" --limit 1/300ms --algorithm "$algo" --wait=300ms
		[ "$status" -eq 0 ] || { echo "$algo: $stderr"; return 1; }
	done
}

@test "an interrupted waiter gives its place back" {
	"$THROTTLE" consume k --limit 1/10s
	env --default-signal "$THROTTLE" consume k --limit 1/10s --wait 2>"$TMP/err" &
	waiter=$!
	track "$waiter"
	# it says it waits once its reservation is made
	wait_until grep -qs waiting "$TMP/err"
	kill -INT "$waiter"
	status=0
	wait "$waiter" || status=$?
	[ "$status" -eq 130 ]
	run "$THROTTLE" inspect k --format json
	r=$(field retry_after "$output")
	# one unit's wait (10s) remains, not two
	[ "${r%%.*}" -lt 10 ]
}

@test "a waiter interrupted in the middle of the line leaves its place empty: never two at one time" {
	# 1 per 0.5s, no burst: four waiters, four behind them, the first
	# four interrupted, four more; the ones that run are 0.5s apart
	# (giving the first four's places back let each newcomer have the
	# time a waiter behind them had: two at once, 8 in 3.5s)
	o=(--limit 1/0.5s --burst 1)
	"$THROTTLE" consume q "${o[@]}"
	cut=()
	for i in 1 2 3 4; do
		env --default-signal "$THROTTLE" consume q "${o[@]}" --wait=60s -q &
		cut+=($!)
		track $!
		sleep 0.05
	done
	ran=()
	# four waiters that note when they run
	four() {
		for i in 1 2 3 4; do
			("$THROTTLE" consume q "${o[@]}" --wait=60s -q && date +%s%N >>"$TMP/ts") &
			ran+=($!)
			track $!
			sleep 0.05
		done
	}
	four
	kill -TERM "${cut[@]}"
	four
	wait "${ran[@]}"
	[ "$(wc -l <"$TMP/ts")" -eq 8 ]
	gaps=$(sort -n "$TMP/ts" | awk 'NR > 1 { printf "%d ", ($1 - prev) / 1000000 } { prev = $1 }')
	echo "gaps (ms): $gaps"
	# (0.5s apart; two at once was 0: room for a loaded machine)
	for g in $gaps; do [ "$g" -ge 300 ]; done
}

# ms since START (date +%s%N)
since() {
	echo $((($(date +%s%N) - $1) / 1000000))
}

@test "--wait polls the other algorithms and leases" {
	# a pinned clock (a wait moves it on) at the start of a window:
	# the lower bounds hold however slowly the calls start
	run at 999.9 consume f --limit 1/300ms --algorithm fixed-window
	[ "$status" -eq 0 ]
	start=$(date +%s%N)
	run at 999.9 consume f --limit 1/300ms --algorithm fixed-window --wait=2s
	[ "$status" -eq 0 ]
	ms=$(since "$start")
	# it waited for the window to end, and no longer than it must
	[ "$ms" -ge 280 ] && [ "$ms" -lt 2000 ] || { echo "waited ${ms}ms"; return 1; }
	# and on the real clock (read again after each wait), on a window
	# that slides
	run "$THROTTLE" consume g --limit 1/300ms --algorithm sliding-window
	[ "$status" -eq 0 ]
	start=$(date +%s%N)
	run "$THROTTLE" consume g --limit 1/300ms --algorithm sliding-window --wait=5s
	[ "$status" -eq 0 ]
	ms=$(since "$start")
	[ "$ms" -lt 5000 ] || { echo "waited ${ms}ms"; return 1; }
	id=$(at 2000 acquire l --concurrency 1 --ttl 400ms)
	[ -n "$id" ]
	start=$(date +%s%N)
	run at 2000 acquire l --concurrency 1 --wait=3s
	[ "$status" -eq 0 ]
	ms=$(since "$start")
	[ "$ms" -ge 380 ] && [ "$ms" -lt 3000 ] || { echo "waited ${ms}ms"; return 1; }
	start=$(date +%s%N)
	run at 2000 acquire l --concurrency 1 --wait=200ms
	[ "$status" -eq 1 ]
	ms=$(since "$start")
	[ "$ms" -ge 180 ] && [ "$ms" -lt 2000 ] || { echo "waited ${ms}ms"; return 1; }
}

@test "run --wait takes its turn" {
	"$THROTTLE" run r --concurrency 1 -- sh -c 'touch "$0.started"; sleep 2; echo done >"$0"' "$TMP/first" 3>&- &
	track $!
	for _ in $(seq 100); do [ -e "$TMP/first.started" ] && break; sleep 0.05; done
	# it runs only once the first job has ended
	run --separate-stderr "$THROTTLE" run r --concurrency 1 --wait=10s -- cat "$TMP/first"
	[ "$status" -eq 0 ]
	[ "$output" = done ]
	[[ "$stderr" == "throttle: r has its one slot held (pid "*"), waiting for a slot (--wait at most 10s)" ]]
}

@test "lockout: 3/60s with --lockout 600s, the issue's example" {
	L=(--limit 3/60s --lockout 600s)
	for n in 1 2 3; do at 0 consume k "${L[@]}"; done
	run --separate-stderr at 1 consume k "${L[@]}" --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 600 ]
	run --separate-stderr at 100 consume k "${L[@]}" --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 501 ]
	# the rate alone would allow it, but nothing can be taken while
	# locked: none remains, and nothing is charged
	[ "$(field remaining "$output")" = 0 ]
	run at 600.999999 check k "${L[@]}"
	[ "$status" -eq 1 ]
	run at 601 consume k "${L[@]}"
	[ "$status" -eq 0 ]
}

@test "lockout: check never starts one, and reset ends it" {
	L=(--limit 1/60s --lockout 1h)
	at 0 consume k "${L[@]}"
	# it answers as consume would, the lockout this refusal would start
	# included, and writes nothing
	run --separate-stderr at 1 check k "${L[@]}" --format json
	[ "$status" -eq 1 ]
	[ "$output" = '{"key":"k","allowed":false,"algorithm":"gcra","limit":1,"period":60,"burst":1,"cost":1,"remaining":0,"retry_after":3600,"reset_after":3600,"locked_until":3601,"lockout_after":3600}' ]
	[ "$stderr" = "throttle: k locked out, retry in 1h" ]
	run at 1 check k "${L[@]}"
	[ "$status" -eq 1 ]
	run at 61 consume k "${L[@]}"
	[ "$status" -eq 0 ]
	run at 62 consume k "${L[@]}"
	[ "$status" -eq 1 ]
	run at 200 consume k "${L[@]}"
	[ "$status" -eq 1 ]
	"$THROTTLE" reset k
	run at 200 consume k "${L[@]}"
	[ "$status" -eq 0 ]
}

@test "gc: a key at rest is gone, a key still limiting stays and refuses" {
	at 0 consume a --limit 1/1s
	at 0 consume b --limit 1/1h
	# one key, however many limits it has
	at 0 consume c --limit 1/1s --limit 2/2s
	at 0 acquire l --concurrency 1 --ttl 10s >/dev/null
	run at 100 gc
	[ "$status" -eq 0 ]
	[ "$output" = "removed 2 keys at rest, 1 ended lease, 0 ended lockouts and 0 idle shedders" ]
	run at 100 inspect a
	[ "$status" -eq 1 ]
	run at 100 consume b --limit 1/1h
	[ "$status" -eq 1 ]
	run at 100 gc --format json
	[ "$output" = '{"keys":0,"leases":0,"lockouts":0,"shedders":0}' ]
}

@test "gc: a key is at rest at the very instant its reset_after ends" {
	at 100 consume k --limit 1/10s
	run at 110 gc --format json
	[ "$output" = '{"keys":1,"leases":0,"lockouts":0,"shedders":0}' ]
	# gone from the file, not only counted: a clock behind it would
	# still see it
	run at 105 inspect k
	[ "$status" -eq 1 ] || { echo "$output"; return 1; }
}

@test "consume tidies keys at rest on its own, so the file stays bounded" {
	needs_sqlite
	# one write in 16 forgets up to 64 rows at rest from a random place
	# near the key it wrote, so what is left varies widely: over 400
	# writes, 16 to 301 in 38 runs (300 or more about once in 20, which
	# failed this test in a CI run); over 1200, 5 to 519 in 40 runs.  With
	# no tidying all 1200 would be left
	for n in $(seq 1200); do at "$n" consume "k$n" --limit 1/1s; done
	left=$(sqlite3 state.db 'SELECT count(*) FROM rec WHERE kind = 1')
	[ "$left" -lt 900 ] || { echo "$left left"; return 1; }
}

@test "consume's tidying is not stopped by keys in use in front of those at rest" {
	needs_sqlite
	# 64 keys in use sort first, 300 at rest after them; the writes all go
	# to one key among the first.  Tidying from random bytes alone looked
	# at the first 64 keys only, and forgot none of the 300.
	{
		for i in $(seq -w 0 63); do echo "consume login:a$i --limit 1/1d"; done
		for i in $(seq -w 0 299); do echo "consume login:z$i --limit 1/1s"; done
	} | at 0 batch >/dev/null
	for n in $(seq 300); do at 100 consume login:a00x --limit 1000000/1s -q; done
	left=$(sqlite3 state.db 'SELECT count(*) FROM rec WHERE kind = 1')
	# in 12 runs every key at rest was gone (65 left)
	[ "$left" -lt 200 ] || { echo "$left left"; return 1; }
	run at 100 inspect login:a10
	[ "$status" -eq 0 ]
}

@test "a policy cannot name an owner process" {
	run "$THROTTLE" policy set p --concurrency 1 --owner $$
	[ "$status" -eq 2 ]
	[[ "$output" == *"--owner does not apply"* ]]
}

@test "compound limits: a refused request shows each limit as it stands, none charged" {
	at 0 consume c --limit 2/1s --limit 5/1m -q
	at 0 consume c --limit 2/1s --limit 5/1m -q
	run at 0 consume c --limit 2/1s --limit 5/1m --format json
	[ "$status" -eq 1 ]
	[[ "$output" == *'"limits":[{"limit":2,'*'"allowed":false,"remaining":0,'*'{"limit":5,'*'"allowed":true,"remaining":3,"retry_after":0,"reset_after":24}]}' ]] || { echo "$output"; return 1; }
	# as the next request finds them
	run at 0 check c --limit 5/1m --cost 0 --format json
	[ "$(field remaining "$output")" = 3 ]
	[ "$(field reset_after "$output")" = 24 ]
}
