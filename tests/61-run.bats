#!/usr/bin/env bats
# throttle run: the wrapper for cron and CI.

load lib

@test "run --limit: the command runs while allowed, with its own status" {
	run at 10 run nightly --limit 1/1d -- sh -c 'echo ran; exit 3'
	[ "$status" -eq 3 ]
	[ "$output" = ran ]
	run --separate-stderr at 20 run nightly --limit 1/1d -- sh -c 'echo ran'
	[ "$status" -eq 75 ]
	[ "$output" = "" ]
	[[ "$stderr" == "throttle: nightly throttled, retry in 86390s; not running sh" ]]
	run --separate-stderr at 20 run nightly --limit 1/1d --conflict-exit-code 0 -q -- sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	run at 86410 run nightly --limit 1/1d -- echo again
	[ "$status" -eq 0 ]
	[ "$output" = again ]
}

@test "run works with every algorithm" {
	for algo in gcra fixed-window sliding-window hybrid; do
		run at 5 run "r-$algo" --limit 1/1h --algorithm "$algo" -- true
		[ "$status" -eq 0 ]
		run at 6 run "r-$algo" --limit 1/1h --algorithm "$algo" -- true
		[ "$status" -eq 75 ]
	done
}

@test "run --concurrency: a slot is held while the command runs, then freed" {
	run "$THROTTLE" run slot --concurrency 1 -- sh -c '"$0" inspect slot --format json' "$THROTTLE"
	[ "$status" -eq 0 ]
	[[ "$output" == *'"lease":'*'"owner":'* ]]
	run "$THROTTLE" inspect slot
	[ "$status" -eq 1 ]
}

@test "run --concurrency: exit status, 128+N for a signal, 127 for no command" {
	run "$THROTTLE" run c --concurrency 1 -- sh -c 'exit 42'
	[ "$status" -eq 42 ]
	run "$THROTTLE" run c --concurrency 1 -- sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
	run "$THROTTLE" run c --concurrency 1 -- sh -c 'kill -KILL $$'
	[ "$status" -eq 137 ]
	run -127 --separate-stderr "$THROTTLE" run c --concurrency 1 -- no-such-command-here
	[ "$status" -eq 127 ]
	[[ "$stderr" == *"no-such-command-here: No such file or directory"* ]]
	run "$THROTTLE" inspect c
	[ "$status" -eq 1 ]
}

@test "run: the child holds no descriptor of the state file" {
	run "$THROTTLE" run fd --concurrency 1 -- sh -c 'ls -l /proc/$$/fd/ | grep -c state.db || true'
	[ "$status" -eq 0 ]
	[ "$output" = 0 ]
	run at 1 run fd2 --limit 1/1s -- sh -c 'ls -l /proc/$$/fd/ | grep -c state.db || true'
	[ "$output" = 0 ]
}

@test "run: refused while all slots are held; the command does not run" {
	"$THROTTLE" run busy --concurrency 1 -- sleep 5 &
	wrapper=$!
	sleep 0.5
	run --separate-stderr "$THROTTLE" run busy --concurrency 1 -- touch ran
	[ "$status" -eq 75 ]
	[ ! -e ran ]
	[ "$stderr" = "throttle: busy has its one slot held; not running touch" ]
	kill -TERM "$wrapper"
	wait "$wrapper" || true
}

@test "run forwards SIGTERM, SIGINT and SIGHUP to the command" {
	for sig in TERM INT HUP; do
		# a background job of a script starts with SIGINT ignored;
		# start this one as a terminal would, with defaults
		env --default-signal "$THROTTLE" run fwd --concurrency 1 -- sh -c "trap 'echo got-$sig; exit 9' $sig; sleep 5 & wait" >"$TMP/out" &
		wrapper=$!
		sleep 0.5
		kill -"$sig" "$wrapper"
		status=0
		wait "$wrapper" || status=$?
		[ "$status" -eq 9 ] || { echo "$sig: $status"; return 1; }
		[ "$(cat "$TMP/out")" = "got-$sig" ]
		run "$THROTTLE" inspect fwd
		[ "$status" -eq 1 ]
	done
}

@test "a SIGKILLed wrapper loses no slot, and its command does not run on" {
	"$THROTTLE" run job --concurrency 1 -- sh -c 'sleep 30; touch finished' &
	wrapper=$!
	sleep 0.5
	kill -9 "$wrapper"
	wait "$wrapper" 2>/dev/null || true
	sleep 0.3
	run "$THROTTLE" run job --concurrency 1 -- echo next
	[ "$status" -eq 0 ]
	[ "$output" = next ]
	sleep 0.2
	! pgrep -f 'sleep 30; touch finished' >/dev/null
}

@test "run needs a rate or a slot count, a key, and a command after --" {
	run "$THROTTLE" run k -- true
	[ "$status" -eq 2 ]
	run "$THROTTLE" run k --limit 1/1s --concurrency 1 -- true
	[ "$status" -eq 2 ]
	run "$THROTTLE" run k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"no command to run"* ]]
	run "$THROTTLE" run k --limit 1/1s true
	[ "$status" -eq 2 ]
	run "$THROTTLE" run --limit 1/1s -- true
	[ "$status" -eq 2 ]
	run "$THROTTLE" run k --limit 1/1s --conflict-exit-code 256 -- true
	[ "$status" -eq 2 ]
}
