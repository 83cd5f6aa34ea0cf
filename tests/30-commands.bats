#!/usr/bin/env bats
# The commands and the command line: release, reset, inspect, help, usage.

load lib

@test "release gives units back, never beyond capacity" {
	at 10 consume k --limit 5/50s --cost 4
	run at 10 release k --cost 2 --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 3 ]
	run at 10 release k --cost 100 --format json
	[ "$(field remaining "$output")" = 5 ]
	[ "$(field reset_after "$output")" = 0 ]
	for n in 1 2 3 4 5; do at 10 consume k --limit 5/50s; done
	run at 10 consume k --limit 5/50s
	[ "$status" -eq 1 ]
}

@test "release beyond what was charged: every algorithm and compound limits stop at capacity" {
	for algo in gcra fixed-window sliding-window hybrid; do
		L=(--limit 3/60s --algorithm "$algo")
		run at 100 consume "r-$algo" "${L[@]}"
		[ "$status" -eq 0 ]
		run at 100 release "r-$algo" --cost 100 --format json
		[ "$status" -eq 0 ]
		[ "$(field remaining "$output")" = 3 ] || { echo "$algo: $output"; return 1; }
		# and from empty (hybrid: in its smooth mode)
		run at 100 consume "r-$algo" "${L[@]}" --cost 3
		[ "$status" -eq 0 ]
		run at 100 release "r-$algo" --cost 100 --format json
		[ "$status" -eq 0 ]
		[ "$(field remaining "$output")" = 3 ] || { echo "$algo: $output"; return 1; }
		# exactly N admitted afterwards, and the key stays usable
		for n in 1 2 3; do
			run at 101 consume "r-$algo" "${L[@]}"
			[ "$status" -eq 0 ] || { echo "$algo: consume $n: $status $output"; return 1; }
		done
		run at 101 consume "r-$algo" "${L[@]}"
		[ "$status" -eq 1 ] || { echo "$algo: a 4th was allowed"; return 1; }
		run at 101 inspect "r-$algo" --format json
		[ "$status" -eq 0 ]
		[ "$(field remaining "$output")" = 0 ]
	done
	# a compound limit: each of its limits stops at its own capacity
	run at 100 consume c --limit '2/1s;5/1m'
	run at 100 release c --cost 50 --format json
	[ "$(field remaining "$output")" = 2 ]
	for n in 1 2; do
		run at 100 consume c --limit '2/1s;5/1m'
		[ "$status" -eq 0 ]
	done
	run at 100 consume c --limit '2/1s;5/1m'
	[ "$status" -eq 1 ]
	run at 101 consume c --limit '2/1s;5/1m' --cost 2
	[ "$status" -eq 0 ]
	run at 102 consume c --limit '2/1s;5/1m' --cost 2
	[ "$status" -eq 1 ] # 5 in the minute: 1 + 2 + 2, then the release gave none extra
}

@test "release uses the key's stored limit, and a key with no state is a no-op" {
	at 10 consume k --limit 2/20s --cost 2
	run at 10 release k
	[ "$status" -eq 0 ]
	run at 10 consume k --limit 2/20s
	[ "$status" -eq 0 ]
	run at 10 release nothing-here
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	run "$THROTTLE" inspect nothing-here
	[ "$status" -eq 1 ]
	# with a limit too: it answers as that limit, full, and writes nothing
	run --separate-stderr at 10 release nothing-here --limit 5/1m --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 5 ] || { echo "$output"; return 1; }
	run "$THROTTLE" inspect nothing-here
	[ "$status" -eq 1 ] || { echo "$output"; return 1; }
}

@test "release on a key at rest, again and again, keeps one state a limit" {
	at 0 consume k --limit 2/1m
	for t in 1 2 3; do at $t release k --cost 1 --limit 2/1m; done
	# one state, not one more each release (a state at rest was taken
	# along as a limit of its own, beside its limit's new one)
	run --separate-stderr at 3 inspect k --format json
	[ "$status" -eq 0 ]
	[[ "$output" != *'"limits"'* ]] || { echo "$output"; return 1; }
	run --separate-stderr at 3 consume k --limit '2/1m;5/1h' --format json
	[ "$(grep -o '"limit":' <<<"$output" | wc -l)" = 3 ] || { echo "$output"; return 1; }
	# a key whose only state is at rest has nothing to give back, as one
	# gc has tidied
	run --separate-stderr at 4000 release k --format json
	[ "$output" = '{"key":"k","released":0}' ]
}

@test "reset forgets the key, and exits 0 for a key with no state" {
	at 10 consume k --limit 1/1h
	run at 11 consume k --limit 1/1h
	[ "$status" -eq 1 ]
	run "$THROTTLE" reset k
	[ "$status" -eq 0 ]
	run at 11 consume k --limit 1/1h
	[ "$status" -eq 0 ]
	run "$THROTTLE" reset never-seen
	[ "$status" -eq 0 ]
}

@test "inspect shows a key's remembered limit and state without limit options" {
	at 100 consume login:alice --limit 5/15m --cost 2
	run at 100 inspect login:alice
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "ALGORITHM      LIMIT        REMAINING  RETRY      RESET      LOCKOUT    LEASES  KEY" ]
	[ "${lines[1]}" = "gcra           5/15m        3          -          6m         -          -       login:alice" ]
	run at 100 inspect login:alice --format json
	[ "$output" = '{"key":"login:alice","algorithm":"gcra","limit":5,"period":900,"burst":5,"remaining":3,"retry_after":0,"reset_after":360}' ]
	run at 400 inspect login:alice --format json
	[ "$(field remaining "$output")" = 4 ]
	[ "$(field reset_after "$output")" = 60 ]
}

@test "inspect without a key lists every key; a key with no state exits 1" {
	at 100 consume b --limit 1/1m
	at 100 consume a --limit 2/1h
	run at 100 inspect
	[ "$status" -eq 0 ]
	[ "${lines[1]}" = "gcra           2/1h         1          -          30m        -          -       a" ]
	[ "${lines[2]}" = "gcra           1/1m         0          1m         1m         -          -       b" ]
	run at 100 inspect --format json
	[ "${#lines[@]}" -eq 2 ]
	run --separate-stderr "$THROTTLE" inspect zzz
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: zzz: no state (never used, reset, or forgotten)" ]
	run "$THROTTLE" inspect --format shell
	[ "$status" -eq 2 ]
}

@test "inspect on a file with no keys lists nothing" {
	run --separate-stderr "$THROTTLE" inspect
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	at 1 consume k --limit 1/1s
	at 1 reset k
	run --separate-stderr at 100 inspect
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
}

@test "a changed limit keeps the time the key comes back to rest" {
	at 0 consume k --limit 3/30s --cost 3
	run at 0 check k --limit 6/60s --cost 0 --format json
	[ "$(field reset_after "$output")" = 30 ]
	[ "$(field remaining "$output")" = 3 ]
	run at 0 inspect k --format json
	[ "$(field limit "$output")" = 3 ]
	at 0 consume k --limit 6/60s
	run at 0 inspect k --format json
	[ "$(field limit "$output")" = 6 ]
}

@test "a save at the epoch (THROTTLE_NOW=0) is converted from its time, not from now" {
	# 0 once stood for "saved when, not known", converted as of now,
	# which gave back what had been taken
	for n in 1 2 3 4 5; do at 0 consume g --limit 5/15m -q; done
	run at 180 check g --limit 5/1h
	[ "$status" -eq 1 ]
	run at 719 consume g --limit 5/1h
	[ "$status" -eq 1 ]
	run at 720 consume g --limit 5/1h
	[ "$status" -eq 0 ]
	for n in 1 2 3 4 5; do at 0 consume h --limit 5/15m --algorithm hybrid -q; done
	run at 900 consume h --limit 5/1h --algorithm hybrid
	[ "$status" -eq 1 ]
	at 0 consume d --limit 10/1h --cost 10
	run --separate-stderr at 3000 check d --limit 10/10h --cost 0 --format json
	[ "$(field remaining "$output")" = 0 ]
}

@test "a longer period counts what was taken: 5 failures under 5/15m leave none of 5/1h" {
	for algo in gcra fixed-window sliding-window hybrid; do
		k="login-$algo"
		for n in 1 2 3 4 5; do at 1000 consume "$k" --limit 5/15m --algorithm "$algo" -q; done
		# tightened, at once or 10 minutes on (a refusal saves
		# nothing): the key reads as if 5/1h had been its limit
		for t in 1000 1600; do
			run --separate-stderr at "$t" consume "$k" --limit 5/1h --algorithm "$algo" --format json
			[ "$status" -eq 1 ] || { echo "$algo at $t: $output"; return 1; }
		done
		if [ "$algo" = gcra ]; then
			# a unit of 5/1h drips back every 12 minutes
			run at 1719 consume "$k" --limit 5/1h --algorithm "$algo"
			[ "$status" -eq 1 ]
			run at 1720 consume "$k" --limit 5/1h --algorithm "$algo"
			[ "$status" -eq 0 ]
		else
			# refused while 5/15m would still count them: a
			# refusal saves nothing, and by 1900 the key is at
			# rest under 5/15m (the sliding window's sub-window
			# of 1000 slid out at 1890), so new under 5/1h
			run at 1880 consume "$k" --limit 5/1h --algorithm "$algo"
			[ "$status" -eq 1 ] || { echo "$algo at 1880: $output"; return 1; }
			# (hybrid's penalty keeps it from rest until 2620)
			run at 3000 consume "$k" --limit 5/1h --algorithm "$algo"
			[ "$status" -eq 0 ] || { echo "$algo at 3000: $output"; return 1; }
		fi
	done
	# 10 taken under 10/1h: none of 10/10h for 10 hours (gcra and
	# hybrid kept the time of rest, and let 9 more in at once)
	for algo in gcra hybrid fixed-window sliding-window; do
		k="day-$algo"
		at 1000 consume "$k" --limit 10/1h --algorithm "$algo" --cost 10
		run --separate-stderr at 1000 check "$k" --limit 10/10h --algorithm "$algo" --cost 0 --format json
		[ "$(field remaining "$output")" = 0 ] || { echo "$algo: $output"; return 1; }
		run at 1000 consume "$k" --limit 10/10h --algorithm "$algo"
		[ "$status" -eq 1 ] || { echo "$algo: $output"; return 1; }
	done
	# hybrid owes at most a quota and its penalty of the new limit:
	# 5 under 5/15m owe 9 units, but 1/1h is owed 1 (its own whole
	# quota, taken at once, would be allowed again in an hour), not 9
	at 1000 consume hq --limit 5/15m --algorithm hybrid --cost 5
	run at 1000 check hq --limit 1/1h --algorithm hybrid --cost 0 --format json
	[ "$(field remaining "$output")" = 0 ] || { echo "$output"; return 1; }
	# ... and the wait is no longer than until 5/15m is at rest (2620),
	# where the key starts afresh under 1/1h: 1620, not the 3600 its
	# converted state would take
	run at 1000 check hq --limit 1/1h --algorithm hybrid --format json
	[ "$(field retry_after "$output")" = 1620 ] || { echo "$output"; return 1; }
	run at 2620 consume hq --limit 1/1h --algorithm hybrid
	[ "$status" -eq 0 ]
	# a fixed window lengthened, shortened and lengthened again ends no
	# later than the new period from its last save
	at 1000 consume fq --limit 5/1m --algorithm fixed-window --cost 5
	at 1010 consume fq --limit 5/1h --algorithm fixed-window --cost 0
	at 1020 consume fq --limit 5/1m --algorithm fixed-window --cost 0
	run at 1030 check fq --limit 5/1h --algorithm fixed-window --cost 0 --format json
	[ "$(field remaining "$output")" = 0 ] || { echo "$output"; return 1; }
	# (converted, its window would end at 4620, the new period from the
	# last save; but the 5/1m state saved then is at rest at 4600, and
	# a key at rest starts afresh: the wait ends there)
	run at 1030 check fq --limit 5/1h --algorithm fixed-window --format json
	[ "$(field retry_after "$output")" = 3570 ] || { echo "$output"; return 1; }
	run at 4599.999999 consume fq --limit 5/1h --algorithm fixed-window
	[ "$status" -eq 1 ]
	run at 4600 consume fq --limit 5/1h --algorithm fixed-window
	[ "$status" -eq 0 ]
	# a shorter unit keeps the time of rest: 3/30s to 6/60s leaves 3
	at 0 consume u --limit 3/30s --cost 3
	run at 0 check u --limit 6/60s --cost 0 --format json
	[ "$(field remaining "$output")" = 3 ]
}

@test "under a new limit a refusal changes nothing, and gc changes no answer" {
	needs_sqlite
	for algo in gcra fixed-window sliding-window hybrid; do
		for with_gc in 0 1; do
			k="g-$algo-$with_gc"
			for n in 1 2 3 4 5; do at 1000 consume "$k" --limit 5/15m --algorithm "$algo" -q; done
			before=$(sqlite3 state.db .dump)
			run at 1100 consume "$k" --limit 5/1h --algorithm "$algo"
			[ "$status" -eq 1 ]
			[ "$(sqlite3 state.db .dump)" = "$before" ] || { echo "$algo: a refusal wrote"; return 1; }
			# a refusal under the longer limit leaves the shorter
			# one as it was: as a key never asked under it
			for n in 1 2 3 4 5; do at 1000 consume "c$k" --limit 5/15m --algorithm "$algo" -q; done
			a=$(at 1180 consume "$k" --limit 5/15m --algorithm "$algo" --format json; echo " $?")
			b=$(at 1180 consume "c$k" --limit 5/15m --algorithm "$algo" --format json; echo " $?")
			[ "${a#*\"allowed\"}" = "${b#*\"allowed\"}" ] || { echo "$algo: $a / $b"; return 1; }
			[ "$with_gc" = 0 ] || at 1850 gc -q
			run at 1850 consume "$k" --limit 5/1h --algorithm "$algo"
			[ "$status" -eq 1 ] || { echo "$algo gc=$with_gc at 1850: $output"; return 1; }
			[ "$with_gc" = 0 ] || at 3000 gc -q
			run at 3000 consume "$k" --limit 5/1h --algorithm "$algo" --format json
			[ "$status" -eq 0 ] || { echo "$algo gc=$with_gc at 3000: $output"; return 1; }
			echo "$algo $(field remaining "$output")" >>"remaining.$with_gc"
		done
	done
	cmp remaining.0 remaining.1
}

@test "global options go before or after the command" {
	run env THROTTLE_NOW=1 "$THROTTLE" --format json --db "$TMP/x.db" consume k --limit 1/1s
	[ "$status" -eq 0 ]
	[ "$(field allowed "$output")" = true ]
	run env THROTTLE_NOW=1 "$THROTTLE" consume k --limit=1/1s --db="$TMP/x.db" --format=json
	[ "$status" -eq 1 ]
	[ "$(field allowed "$output")" = false ]
	run env THROTTLE_NOW=1 "$THROTTLE" --limit 1/1s consume -- -dash-key
	[ "$status" -eq 0 ]
}

@test "usage errors exit 2 and say what is wrong" {
	run "$THROTTLE"
	[ "$status" -eq 2 ]
	[[ "$output" == usage:* ]]
	run "$THROTTLE" frobnicate k
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: frobnicate: unknown command"* ]]
	run "$THROTTLE" cons k --limit 1/1s
	[ "$status" -eq 2 ]
	run "$THROTTLE" consume k --limit 1/1s --frob
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: --frob: unknown option"* ]]
	# a key that begins with a dash, taken for an option: where it goes
	run "$THROTTLE" consume -k --limit 1/1s
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: -k: unknown option; see throttle --help (a key that begins with a dash goes after the options and '--', as in throttle consume --limit 5/1m -- -k)" ]
	# one dash before a long option's name is a typo, said so
	run "$THROTTLE" consume k -limit 1/1s
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: -limit: unknown option; did you mean --limit?" ]
	run at 1 consume --limit 1/1s --db "$TMP/dash.db" -- -k
	[ "$status" -eq 0 ]
	run "$THROTTLE" consume k
	[ "$status" -eq 2 ]
	[[ "$output" == *"no limit for this key"*"--limit"* ]]
	run "$THROTTLE" consume --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"the key is missing"* ]]
	run "$THROTTLE" consume a b --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"'b' is one argument too many"* ]]
	run "$THROTTLE" consume k --limit
	[ "$status" -eq 2 ]
	[[ "$output" == *"--limit: needs a value"* ]]
	# an option before the command that took the command's name as
	# its value: named, not "k: unknown command"
	run "$THROTTLE" --lock-timeout consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: --lock-timeout took 'consume' as its value, which left 'k' as the command: give --lock-timeout a value"* ]]
	# a negative wait is not "-1s: unknown option"
	run "$THROTTLE" consume k --limit 1/1s --wait -1s
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: --wait: '-1s' is negative; give the longest wait"* ]]
	run "$THROTTLE" consume k --burst 3
	[ "$status" -eq 2 ]
	[[ "$output" == *"--burst goes with --limit"* ]]
	run "$THROTTLE" reset k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"--limit does not apply"* ]]
	run "$THROTTLE" consume k --limit 1/1s --algorithm leaky
	[ "$status" -eq 2 ]
	[[ "$output" == *"--algorithm: 'leaky' is not an algorithm"* ]]
	run "$THROTTLE" consume k --limit 1/1s --format xml
	[ "$status" -eq 2 ]
	run "$THROTTLE" consume k --limit 1/1s --on-error open
	[ "$status" -eq 2 ]
	run "$THROTTLE" consume k --limit 1/1s --quiet=yes
	[ "$status" -eq 2 ]
	run env THROTTLE_FORMAT=yaml "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"THROTTLE_FORMAT: 'yaml'"* ]]
	[ ! -e state.db ]
}

@test "keys: empty is refused, 1024 bytes is the most" {
	run "$THROTTLE" consume "" --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"the key is empty"* ]]
	k1024=$(printf 'k%.0s' $(seq 1024))
	run at 1 consume "$k1024" --limit 1/1s
	[ "$status" -eq 0 ]
	run at 1 consume "${k1024}x" --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"1025 bytes, longer than the 1024 allowed"* ]]
	run at 1 consume "$k1024" --limit 1/1s
	[ "$status" -eq 1 ]
}

@test "hostile keys are kept apart, bound as data, never as SQL" {
	keys=("it's" '%' '_' 'a%' 'a_' 'ab' "x'); DROP TABLE rec; --" $'new\nline' 'ключ:пароль' '*' '\' '"' ' ')
	for k in "${keys[@]}"; do
		run at 1 consume "$k" --limit 1/1h
		[ "$status" -eq 0 ] || { echo "first use of [$k] refused"; return 1; }
	done
	for k in "${keys[@]}"; do
		run at 2 consume "$k" --limit 1/1h
		[ "$status" -eq 1 ] || { echo "second use of [$k] allowed"; return 1; }
	done
	if [ -z "${THROTTLE_TEST_REDIS:-}" ]; then
		[ "$(sqlite3 state.db 'SELECT count(*) FROM rec WHERE kind = 1')" -eq "${#keys[@]}" ]
	else # a glob character in a key must not reach a SCAN pattern
		[ "$(at 2 inspect --format json | wc -l)" -eq "${#keys[@]}" ]
	fi
	run at 2 consume "a" --limit 1/1h
	[ "$status" -eq 0 ]
}

@test "--help, help COMMAND and --version" {
	run "$THROTTLE" --help
	[ "$status" -eq 0 ]
	[[ "$output" == usage:* ]]
	for c in consume check release inspect reset help; do
		[[ "$output" == *"  $c "* ]] || { echo "no $c in --help"; return 1; }
	done
	run "$THROTTLE" help consume
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "usage: throttle consume KEY --limit N/PERIOD"* ]]
	[[ "$output" == *"--cost N"* ]]
	run "$THROTTLE" consume --help
	[[ "${lines[0]}" == "usage: throttle consume"* ]]
	run "$THROTTLE" help nope
	[ "$status" -eq 2 ]
	run "$THROTTLE" --version
	[ "$status" -eq 0 ]
	[[ "$output" == "throttle "[0-9]*"sqlite"* ]]
	# the C library, which decides how users and hosts are found
	[[ "$output" =~ \;\ libc:\ (musl|glibc)\)$ ]]
}

@test "a message goes to stderr in one write, so parallel callers' lines never interleave" {
	command -v strace >/dev/null || skip "needs strace to count the writes"
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	at 1 consume $'k\x01ey' --limit 1/1m
	# a refusal naming a key with a control byte (escaped on the way)
	run -1 env THROTTLE_NOW=2 strace -f -o "$TMP/trace" -e trace=write,writev "$THROTTLE" consume $'k\x01ey' --limit 1/1m
	[ "$(grep -cE '^[0-9]+ +writev?\(2,' "$TMP/trace")" -eq 1 ] || { cat "$TMP/trace"; return 1; }
	grep -q 'throttle: k\\\\x01ey throttled' "$TMP/trace" || { cat "$TMP/trace"; return 1; }
	# and a usage error
	run -2 strace -f -o "$TMP/trace" -e trace=write,writev "$THROTTLE" consume k --limit 5/0s
	[ "$(grep -cE '^[0-9]+ +writev?\(2,' "$TMP/trace")" -eq 1 ] || { cat "$TMP/trace"; return 1; }
}

@test "a full disk under standard output is named; a decision stands and so does its exit code, a report exits 3" {
	[ -w /dev/full ] || skip "needs /dev/full"
	run --separate-stderr at 1 consume k --limit 2/1m --format json
	[ "$status" -eq 0 ]
	at 1 consume k --limit 2/1m --format json >/dev/full 2>"$TMP/err" && s=0 || s=$?
	[ "$s" -eq 0 ]
	[ "$(cat "$TMP/err")" = "throttle: standard output: No space left on device" ] || { cat "$TMP/err"; return 1; }
	# the second unit was taken: the key is empty now
	run -1 at 1 consume k --limit 2/1m
	# a command whose answer is its output did not do what was asked
	for cmd in "inspect k" "verify" "gc" "help consume" "--version"; do
		at 1 $cmd >/dev/full 2>"$TMP/err" && s=0 || s=$?
		[ "$s" -eq 3 ] || { echo "$cmd: $s"; return 1; }
		grep -qx "throttle: standard output: No space left on device" "$TMP/err"
	done
	# its reader gone (| head) is no failure
	run bash -c 'set -o pipefail; "$1" inspect k | true' sh "$THROTTLE"
	[ "$status" -eq 0 ]
	# a listing longer than the output's buffer may fail inside a record
	# and leave nothing for the last flush: its reason is kept all the
	# same, whatever the listing's length
	for n in $(seq 20 90); do
		at 1 consume "key-number-$n" --limit 9/1m
		at 1 inspect >/dev/full 2>"$TMP/err" && s=0 || s=$?
		[ "$s" -eq 3 ]
		[ "$(cat "$TMP/err")" = "throttle: standard output: No space left on device" ] || { echo "$n keys:"; cat "$TMP/err"; return 1; }
	done
}
