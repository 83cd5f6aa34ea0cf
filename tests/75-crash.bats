#!/usr/bin/env bats
# Crash safety: consumers SIGKILLed at random moments, hundreds of times.
# Afterwards the file is intact, every key answers, nothing is locked, and
# no key ever admitted more than its limit: the admissions its surviving
# callers saw are at most what the state says was taken, which is at most
# the limit.

load lib

@test "hundreds of kill -9 at random moments: intact, unlocked, never over the limit" {
	keys="a b c"
	at 1 consume warm --limit 1/1s
	# bash reports every killed job on stderr: the race runs apart
	(
	kills=0
	while [ "$kills" -lt 300 ]; do
		pids=()
		for p in 1 2 3 4 5 6; do
			(
				for n in $(seq 30); do
					k=$(echo $keys | cut -d' ' -f$((RANDOM % 3 + 1)))
					"$THROTTLE" consume "$k" --limit 150/1d -q && echo "$k" >>"$TMP/admitted.$BASHPID"
				done
			) &
			pids+=($!)
		done
		sleep "0.0$((RANDOM % 9 + 1))"
		# kill the loops and whatever throttle each is running (its
		# children, as /proc lists them: never by name)
		for pid in "${pids[@]}"; do
			for c in $(cat "/proc/$pid/task/"*/children 2>/dev/null); do
				kill -9 "$c" 2>/dev/null && kills=$((kills + 1))
			done
			kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
		done
		wait
	done
	echo "$kills" >"$TMP/kills"
	) 2>/dev/null
	[ "$(cat "$TMP/kills")" -ge 300 ]
	[ "$(cat "$TMP"/admitted.* | wc -l)" -gt 0 ] # the race did admit
	sqlite_ok
	for k in $keys; do
		run "$THROTTLE" inspect "$k" --format json --lock-timeout 1s
		[ "$status" -eq 0 ] || [ "$status" -eq 1 ] # answers, not locked
		if [ "$status" -eq 0 ]; then
			taken=$((150 - $(field remaining "$output")))
		else
			taken=0
		fi
		seen=$(cat "$TMP"/admitted.* 2>/dev/null | grep -cx "$k" || true)
		# every admission a caller saw was counted (so no more than
		# the limit was ever admitted): the state took at least as many
		[ "$seen" -le "$taken" ] || { echo "$k: callers saw $seen, state took $taken"; return 1; }
	done
	# and the file still takes writes
	run "$THROTTLE" consume fresh --limit 1/1s --lock-timeout 1s
	[ "$status" -eq 0 ]
}
