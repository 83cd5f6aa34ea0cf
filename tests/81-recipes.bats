#!/usr/bin/env bats
# The README's and the man page's recipes, pasted as a user would paste
# them: each test names the section it covers.

load lib

@test "README Recipes, Scripts: the paced loop sleeps as told, never spins" {
	urls="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"
	curl() { echo "$1" >>fetched; }
	start=$(date +%s%N)
	# the recipe, as the README writes it (throttle is $THROTTLE here)
	for url in $urls; do
		until eval "$("$THROTTLE" consume api --limit 10/1s --format shell -q)"
		      [ "$THROTTLE_ALLOWED" = 1 ]; do
			sleep "${THROTTLE_RETRY_AFTER:-1}"
		done
		curl "$url"
	done
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$(wc -l <fetched)" -eq 15 ]
	# 10 at once from rest, then one every 100ms: at least 5 x 100ms
	[ "$elapsed" -ge 450 ] || { echo "15 calls in ${elapsed}ms"; return 1; }
}

@test "README Recipes, Scripts: --wait does the sleeping" {
	start=$(date +%s%N)
	for n in $(seq 12); do
		"$THROTTLE" -q consume api --limit 10/1s --wait
	done
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$elapsed" -ge 150 ]
}

@test "README Output: shell output is safe to eval, times in whole seconds" {
	eval "$(at 1000 consume api --limit 3/60s --format shell)"
	eval "$(at 1000 consume api --limit 3/60s --format shell)"
	[ "$THROTTLE_ALLOWED $THROTTLE_REMAINING $THROTTLE_RESET_AFTER_SECS" = "1 1 40" ]
}

@test "README Recipes, PAM: the by-hand flow locks out on the sixth try" {
	"$THROTTLE" policy set login --limit 5/15m --lockout 15m
	for n in 1 2 3 4 5; do
		run at 1000 --on-error deny -q consume "login:alice"
		[ "$status" -eq 0 ] || { echo "try $n refused"; return 1; }
	done
	run at 1000 --on-error deny -q consume "login:alice"
	[ "$status" -eq 1 ]
	run at 1000 inspect --locked
	[[ "$output" == "login:alice lockout_after=15m"* ]]
	"$THROTTLE" reset "login:alice"
	run at 1000 --on-error deny -q consume "login:alice"
	[ "$status" -eq 0 ]
}
