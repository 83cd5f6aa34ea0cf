#!/usr/bin/env bats
# Soak: 8 processes x 2000 mixed calls (consume with every algorithm,
# check, acquire/release, shed) over 100 keys on one state file, at the
# default --lock-timeout: no errors, no lock timeouts, and exact admission
# counts for the keys whose count is known.

load ../lib

@test "soak: 8 x 2000 mixed calls over 100 keys: no errors, exact counts" {
	algos=(gcra fixed-window sliding-window hybrid)
	at 1 consume warm --limit 1/1s
	for p in $(seq 8); do
		(
			# bats runs tests with set -e; a throttled check or a shed
			# call (exit 1) must not end this worker
			set +e
			for n in $(seq 2000); do
				k=$(((p * 7919 + n * 104729) % 100))
				case $((n % 5)) in
				0 | 1)
					# keys 0..39: 25 a day, counted (a day: however slow a
					# loaded machine makes the soak, GCRA earns
					# nothing back meanwhile)
					if [ "$k" -lt 40 ]; then
						"$THROTTLE" consume "c$k" --limit 25/1d \
						    --algorithm "${algos[$((k % 4))]}" -q &&
						    echo "c$k" >>"$TMP/ok.$p"
					else
						"$THROTTLE" consume "r$k" --limit 50/1s -q
					fi
					;;
				2) "$THROTTLE" check "c$((k % 40))" --limit 25/1d --algorithm "${algos[$((k % 40 % 4))]}" -q ;;
				3)
					id=$("$THROTTLE" acquire "l$((k % 10))" --concurrency 3 --ttl 1m) &&
					    "$THROTTLE" release "l$((k % 10))" --lease "$id"
					;;
				4) "$THROTTLE" shed "s$((k % 5))" --utilization 0.5 -q ;;
				esac
				rc=$?
				[ "$rc" -le 1 ] || echo "exit $rc: call $n of $p" >>"$TMP/errors"
			done
		) 2>>"$TMP/stderr" &
	done
	wait
	[ ! -s "$TMP/errors" ] || { head "$TMP/errors"; return 1; }
	if grep -v 'throttled, retry in\|slots held\|slot held' "$TMP/stderr" | grep .; then
		return 1
	fi
	if grep 'locked' "$TMP/stderr"; then
		return 1
	fi
	# every counted key admitted exactly what its calls and limit allow
	bad=
	for k in $(seq 0 39); do
		calls=0
		for p in $(seq 8); do
			for n in $(seq 2000); do
				if [ $((n % 5)) -le 1 ] && [ $(((p * 7919 + n * 104729) % 100)) -eq "$k" ]; then
					calls=$((calls + 1))
				fi
			done
		done
		want=$((calls < 25 ? calls : 25))
		got=$(cat "$TMP"/ok.* 2>/dev/null | grep -cx "c$k" || true)
		[ "$got" -eq "$want" ] || { echo "c$k (${algos[$((k % 4))]}): admitted $got of $calls calls, wanted $want"; bad=1; }
	done
	[ -z "${bad:-}" ]
	sqlite_ok
}
