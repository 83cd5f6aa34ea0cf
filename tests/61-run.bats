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
	[[ "$stderr" == "throttle: nightly throttled, retry in 23h59m50s; not running sh" ]]
	run --separate-stderr at 20 run nightly --limit 1/1d --conflict-exit-code 0 -q -- sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	# 0 is a quiet skip for cron, -q or not: nothing to mail; a slot's
	# refusal and a --wait's too
	run --separate-stderr at 20 run nightly --limit 1/1d --conflict-exit-code 0 -- sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	run --separate-stderr at 20 run nightly --limit 1/1d --conflict-exit-code 0 --wait 1s -- sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	at 20 acquire slot --concurrency 1 >/dev/null
	for w in "" --wait=1s; do
		run --separate-stderr at 20 run slot --concurrency 1 --conflict-exit-code 0 $w -- sh -c 'echo ran'
		[ "$status" -eq 0 ]
		[ "$output" = "" ]
		[ "$stderr" = "" ] || { echo "$w: $stderr"; return 1; }
	done
	# any other code still says why
	run --separate-stderr at 20 run nightly --limit 1/1d --conflict-exit-code 9 -- sh -c 'echo ran'
	[ "$status" -eq 9 ]
	[[ "$stderr" == "throttle: nightly throttled, retry in"* ]]
	run at 86410 run nightly --limit 1/1d -- echo again
	[ "$status" -eq 0 ]
	[ "$output" = again ]
}

@test "run refused: one line on stderr, saying why, with --wait and with a lockout" {
	at 10 run nightly --limit 1/1d -- true
	run --separate-stderr at 20 run nightly --limit 1/1d --wait 1m -- sh -c 'echo ran'
	[ "$status" -eq 75 ]
	[ "$output" = "" ]
	[ "$stderr" = "throttle: nightly throttled, retry in 23h59m50s: more than --wait 1m allows; not running sh" ]
	at 10 run door --limit 1/1d --lockout never -- true
	at 20 run door --limit 1/1d --lockout never -- true || true
	run --separate-stderr at 30 run door --limit 1/1d --lockout never -- true
	[ "$status" -eq 75 ]
	[ "$stderr" = "throttle: door locked out until reset; throttle reset lifts it; not running true" ]
	run --separate-stderr at 30 run door --limit 1/1d --lockout never --wait -- true
	[ "$status" -eq 75 ]
	[ "$stderr" = "throttle: door locked out until reset; throttle reset lifts it; not waiting; not running true" ]
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
	# a path through a file is not found either (ENOTDIR), not 126
	touch "$TMP/plain"
	run -127 "$THROTTLE" run c --concurrency 1 -- "$TMP/plain/cmd"
	[ "$status" -eq 127 ]
	# the job gets SIGPIPE back at its default, though the wrapper
	# ignores it: a shell cannot undo a signal ignored at its start
	run "$THROTTLE" run c --concurrency 1 -- sh -c 'kill -PIPE $$; echo survived'
	[ "$status" -eq 141 ]
	[ -z "$output" ]
	run "$THROTTLE" inspect c
	[ "$status" -eq 1 ]
}

@test "run: the child holds no descriptor of the state file" {
	run "$THROTTLE" run fd --concurrency 1 -- sh -c 'ls -l /proc/$$/fd/ 2>/dev/null | grep -c state.db || true'
	[ "$status" -eq 0 ]
	[ "$output" = 0 ]
	run at 1 run fd2 --limit 1/1s -- sh -c 'ls -l /proc/$$/fd/ 2>/dev/null | grep -c state.db || true'
	[ "$output" = 0 ]
}

@test "run: refused while all slots are held; the command does not run" {
	"$THROTTLE" run busy --concurrency 1 -- sleep 5 &
	wrapper=$!
	track "$wrapper"
	wait_lease busy
	run --separate-stderr "$THROTTLE" run busy --concurrency 1 -- touch ran
	[ "$status" -eq 75 ]
	[ ! -e ran ]
	[[ "$stderr" =~ ^"throttle: busy has its one slot held (pid $wrapper, for "[0-9.]+"s), retry later; not running touch"$ ]]
	kill -TERM "$wrapper"
	wait "$wrapper" || true
}

@test "run --concurrency --ttl: the wrapper renews its lease while the job runs" {
	# the TTL bounds how long a gone wrapper's slot stays held, not how
	# long a job may run: a 3s job under --ttl 1s is never run twice
	"$THROTTLE" run long --concurrency 1 --ttl 1s -- sh -c 'sleep 3; touch "$0"' "$TMP/done" &
	wrapper=$!
	track "$wrapper"
	wait_lease long
	sleep 1.6
	run --separate-stderr "$THROTTLE" run long --concurrency 1 -- touch ran
	[ "$status" -eq 75 ] || { echo "$stderr"; return 1; }
	[ ! -e ran ]
	run --separate-stderr "$THROTTLE" inspect long --format json
	[[ "$output" == *'"expires_after":'* ]]
	wait "$wrapper"
	[ -e "$TMP/done" ]
	# its lease is gone with it, renewed or not
	run "$THROTTLE" run long --concurrency 1 -- touch ran
	[ "$status" -eq 0 ]
	[ -e ran ]
}

@test "run --concurrency --ttl --limit --wait: the lease is renewed while it waits for the rate" {
	"$THROTTLE" consume k --limit 1/4s -q
	# the slot is taken first, then --wait waits ~4s for the rate: a
	# --ttl of 1s ended the slot while the wrapper waited, and a second
	# job ran beside the first
	"$THROTTLE" run k --concurrency 1 --ttl 1s --limit 1/4s --wait 20s -q -- sh -c 'sleep 1; touch "$0"' "$TMP/first" &
	wrapper=$!
	track "$wrapper"
	wait_lease k
	sleep 2
	run --separate-stderr "$THROTTLE" run k --concurrency 1 -- touch "$TMP/second"
	[ "$status" -eq 75 ] || { echo "$stderr"; return 1; }
	wait "$wrapper"
	[ -e "$TMP/first" ]
	[ ! -e "$TMP/second" ]
}

@test "run --concurrency --limit --wait: a lease released while it waits for the rate means the job does not run" {
	for ttl in "" "--ttl 30s"; do
		"$THROTTLE" reset k
		"$THROTTLE" consume k --limit 1/2s -q
		# the slot first, then ~2s of waiting for the rate, with no
		# renewal due (none without --ttl; every 10s with it)
		# shellcheck disable=SC2086
		"$THROTTLE" run k --concurrency 1 $ttl --limit 1/2s --wait 20s -- touch "$TMP/first" 2>"$TMP/err" 3>&- &
		wrapper=$!
		track "$wrapper"
		wait_lease k
		id=$("$THROTTLE" inspect k --format json | grep -o '"lease":"[0-9a-f]*"' | cut -d'"' -f4)
		"$THROTTLE" release k --lease "$id"
		status=0
		wait "$wrapper" || status=$?
		[ "$status" -eq 75 ] || { echo "ttl '$ttl': exit $status: $(cat "$TMP/err")"; return 1; }
		[ ! -e "$TMP/first" ]
		grep -q "lease $id is no longer held (released" "$TMP/err" || { cat "$TMP/err"; return 1; }
		grep -q "lost its slot while it waited for --limit" "$TMP/err"
	done
}

@test "a signal throttle was started ignoring stays ignored (nohup, a script's background job)" {
	"$THROTTLE" acquire held --concurrency 1 --ttl 2s >/dev/null
	# a waiter started with SIGHUP ignored, as nohup starts it: a SIGHUP
	# does not end its wait; it takes the slot when the lease ends
	(trap '' HUP; exec "$THROTTLE" acquire held --concurrency 1 --ttl 2s --wait 20s) >"$TMP/id" 2>&1 3>&- &
	waiter=$!
	track "$waiter"
	sleep 0.5
	kill -HUP "$waiter"
	status=0
	wait "$waiter" || status=$?
	[ "$status" -eq 0 ] || { echo "exit $status: $(cat "$TMP/id")"; return 1; }
	# a rate waiter with SIGINT ignored (a script's background job) too
	"$THROTTLE" consume r --limit 1/2s -q
	(trap '' INT; exec "$THROTTLE" consume r --limit 1/2s --wait 20s) 3>&- &
	waiter=$!
	track "$waiter"
	sleep 0.5
	kill -INT "$waiter"
	status=0
	wait "$waiter" || status=$?
	[ "$status" -eq 0 ]
	# run's job, started ignoring SIGHUP with its wrapper, runs to its end
	(trap '' HUP; exec "$THROTTLE" run job --concurrency 1 -- sh -c ': >"$0"; sleep 1; echo done' "$TMP/started") >"$TMP/out" 3>&- &
	wrapper=$!
	track "$wrapper"
	wait_until test -e "$TMP/started"
	kill -HUP "$wrapper"
	status=0
	wait "$wrapper" || status=$?
	[ "$status" -eq 0 ]
	[ "$(cat "$TMP/out")" = done ]
}

@test "run forwards SIGTERM, SIGINT and SIGHUP to the command" {
	for sig in TERM INT HUP; do
		# a background job of a script starts with SIGINT ignored;
		# start this one as a terminal would, with defaults
		# (the job ends its own sleep: a background process of a
		# script ignores SIGINT, and would hold the slot until done)
		# (it says it is ready once its trap is set; the wrapper
		# forwards before it lets the job start)
		env --default-signal "$THROTTLE" run fwd --concurrency 1 -- sh -c "trap 'echo got-$sig; kill \$!; exit 9' $sig; : >'$TMP/ready.$sig'; sleep 5 & wait" >"$TMP/out" 3>&- &
		wrapper=$!
		track "$wrapper"
		wait_until test -e "$TMP/ready.$sig" || { echo "$sig: the job never started"; return 1; }
		kill -"$sig" "$wrapper"
		status=0
		wait "$wrapper" || status=$?
		[ "$status" -eq 9 ] || { echo "$sig: $status"; return 1; }
		[ "$(cat "$TMP/out")" = "got-$sig" ]
		# the job's killed sleep leaves its group soon, not at once
		wait_until is_free fwd || { echo "$sig: fwd still held"; return 1; }
	done
}

@test "run: a job ^C killed ends the wrapper by SIGINT too, so a shell's loop stops" {
	command -v python3 >/dev/null || skip "needs python3 to send ^C to a process group"
	printf '%s\n' 'for i in 1 2 3; do "$THROTTLE" run k --concurrency 1 -- sleep 3; echo "rc=$?"; done' \
	    'echo loop-done' >loop.sh
	# bash and what it runs in a group of their own, SIGINT at its
	# default, as at a terminal; ^C to the group once the job runs
	run env THROTTLE="$THROTTLE" python3 -c 'import os, signal, subprocess, sys, time
p = subprocess.Popen(["bash", "loop.sh"], start_new_session=True,
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
deadline = time.time() + 10
while time.time() < deadline and subprocess.run([sys.argv[1], "inspect", "k"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
    time.sleep(0.05)
os.killpg(p.pid, signal.SIGINT)
out = p.communicate(timeout=20)[0].decode()
print(p.returncode, repr(out))' "$THROTTLE"
	# bash itself died of SIGINT, before a second turn of the loop (the
	# wrapper used to exit 130, and bash took the job for one that
	# handled ^C and went on)
	[ "$output" = "-2 ''" ] || { echo "$output"; return 1; }
	wait_until is_free k
}

# wait_gone PID: until process PID has exited (at most 10 s)
wait_gone() {
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

@test "a SIGKILLed wrapper's job keeps its slot until its last process ends" {
	# the job's shell gets SIGTERM when its wrapper dies; the sleep it
	# started lives on in the job's process group, and holds the slot
	"$THROTTLE" run job --concurrency 1 -- sh -c 'sleep 3 & echo $! >"$0"; wait; touch "$0.done"' "$TMP/sleep.pid" 3>&- &
	wrapper=$!
	for _ in $(seq 50); do [ -s "$TMP/sleep.pid" ] && break; sleep 0.1; done
	sleeper=$(cat "$TMP/sleep.pid")
	kill -9 "$wrapper"
	wait "$wrapper" 2>/dev/null || true
	run --separate-stderr "$THROTTLE" run job --concurrency 1 -- echo second
	kill -0 "$sleeper" # the test is only meaningful while it lives
	[ "$status" -eq 75 ]
	[ "$output" = "" ]
	wait_gone "$sleeper"
	run "$THROTTLE" run job --concurrency 1 -- echo second
	[ "$status" -eq 0 ]
	[ "$output" = second ]
	[ ! -e "$TMP/sleep.pid.done" ] # the job's shell did not run on
}

@test "a job that leaves processes in its group keeps the slot until they end" {
	run --separate-stderr "$THROTTLE" run bg --concurrency 1 -- sh -c 'sleep 2 >/dev/null 2>&1 & echo $! >"$0"' "$TMP/bg.pid"
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"bg: sh left processes running in its process group"* ]]
	sleeper=$(cat "$TMP/bg.pid")
	group=${stderr##*process group }
	group=${group%%;*}
	run --separate-stderr "$THROTTLE" run bg --concurrency 1 -- echo second
	kill -0 "$sleeper"
	[ "$status" -eq 75 ]
	# the wrapper is gone: the refusal names the group that holds it
	[[ "$stderr" == "throttle: bg has its one slot held (process group $group, for "*"), retry later; not running echo" ]]
	wait_gone "$sleeper"
	run "$THROTTLE" run bg --concurrency 1 -- echo second
	[ "$status" -eq 0 ]
}

@test "a process that starts its own session (setsid) has left the job" {
	command -v setsid >/dev/null || skip "needs setsid (util-linux)"
	run "$THROTTLE" run ss --concurrency 1 -- sh -c 'setsid sleep 2 >/dev/null 2>&1 </dev/null & echo $! >"$0"' "$TMP/ss.pid"
	[ "$status" -eq 0 ]
	run "$THROTTLE" run ss --concurrency 1 -- echo second
	[ "$status" -eq 0 ]
	[ "$output" = second ]
	kill "$(cat "$TMP/ss.pid")" 2>/dev/null || true
}

@test "run --limit: a command that cannot be executed gives its unit back" {
	run -127 --separate-stderr at 10 run nightly --limit 1/1d -- "$TMP/no-such-backup"
	[[ "$stderr" == *"no-such-backup: No such file or directory; its unit is given back"* ]]
	touch "$TMP/not-executable"
	run -126 at 11 run nightly --limit 1/1d -- "$TMP/not-executable"
	# the fixed path runs at once, not a day later
	run at 12 run nightly --limit 1/1d -- echo ran
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
	run at 13 run nightly --limit 1/1d -- echo ran
	[ "$status" -eq 75 ]
	# on every algorithm, the last unit too: a hybrid key that spent it
	# was in smooth mode, owing most of it, after a release alone
	for algo in gcra fixed-window sliding-window hybrid; do
		for slot in "" "--concurrency 2"; do
			k="last-$algo${slot:+-slot}"
			at 20 run "$k" --limit 3/1d --algorithm "$algo" $slot -- true
			at 21 run "$k" --limit 3/1d --algorithm "$algo" $slot -- true
			run -127 at 22 run "$k" --limit 3/1d --algorithm "$algo" $slot -- "$TMP/no-such-backup"
			run at 23 run "$k" --limit 3/1d --algorithm "$algo" $slot -- echo ran
			[ "$status" -eq 0 ] || { echo "$algo $slot: $status $output"; return 1; }
			run at 24 run "$k" --limit 3/1d --algorithm "$algo" $slot -- echo ran
			[ "$status" -eq 75 ] || { echo "$algo $slot: a fourth ran"; return 1; }
		done
	done
}

@test "run --concurrency: a command that cannot be executed frees its slot" {
	run -127 --separate-stderr "$THROTTLE" run c --concurrency 1 -- "$TMP/no-such-command"
	[ "$stderr" = "throttle: run: $TMP/no-such-command: No such file or directory" ]
	run "$THROTTLE" inspect c
	[ "$status" -eq 1 ]
	# with a rate too: the slot freed, the unit given back, both said
	run -127 --separate-stderr at 10 run d --concurrency 1 --limit 1/1d -- "$TMP/no-such-command"
	[ "$stderr" = "throttle: run: $TMP/no-such-command: No such file or directory; its unit is given back" ]
	run at 10 run d --concurrency 1 --limit 1/1d -- echo ran
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
}

@test "run: a script without #! runs in sh, found by its path or in PATH, whatever the libc" {
	# POSIX execvp(); glibc's does it, musl's does not, so throttle does
	mkdir "$TMP/bin"
	printf 'echo "script ran: $1 $2"\nexit 4\n' >"$TMP/bin/no-shebang"
	chmod +x "$TMP/bin/no-shebang"
	run at 10 run nightly --limit 1/1d -- "$TMP/bin/no-shebang" a 'b c'
	[ "$status" -eq 4 ]
	[ "$output" = "script ran: a b c" ]
	run env PATH="$TMP/nothing-here::$TMP/bin:/usr/bin:/bin" THROTTLE_NOW=86410 \
	    "$THROTTLE" run nightly --limit 1/1d -- no-shebang x y
	[ "$status" -eq 4 ]
	[ "$output" = "script ran: x y" ]
	run env PATH="$TMP/bin:/usr/bin:/bin" "$THROTTLE" run c --concurrency 1 -- no-shebang p q
	[ "$status" -eq 4 ]
	[ "$output" = "script ran: p q" ]
	# a file in PATH that may not be executed, and none that may: 126
	chmod -x "$TMP/bin/no-shebang"
	run -126 --separate-stderr env PATH="$TMP/bin" "$THROTTLE" run c --concurrency 1 -- no-shebang
	[ "$stderr" = "throttle: run: no-shebang: Permission denied" ]
	# and none at all: 127
	run -127 --separate-stderr env PATH="$TMP/bin" "$THROTTLE" run c --concurrency 1 -- no-such-command
	[ "$stderr" = "throttle: run: no-such-command: No such file or directory" ]
}

@test "run needs a rate or a slot count, a key, and a command after --" {
	run "$THROTTLE" run k -- true
	[ "$status" -eq 2 ]
	[[ "$output" == *"give --limit (a rate), --concurrency (a number of slots), or both"* ]]
	run "$THROTTLE" run k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$output" == *"no command to run"* ]]
	run "$THROTTLE" run k --limit 1/1s true
	[ "$status" -eq 2 ]
	# a command without -- before it is named, and where it goes said
	[ "$output" = "throttle: run: 'true' after the key: the command goes after '--', as in throttle run KEY [options] -- COMMAND [ARGS...]" ]
	# lease options with no lease: said, not ignored
	for o in "--ttl 5s" "--priority high" "--reserve 1"; do
		run "$THROTTLE" run k --limit 1/1s $o -- true
		[ "$status" -eq 2 ]
		[ "$output" = "throttle: run: ${o%% *} applies to the slot --concurrency takes; give --concurrency N too, or leave it out" ] || { echo "$output"; return 1; }
	done
	# rate options with no rate: said, not ignored (a slot costs one
	# and locks no one out)
	for o in "--cost 5" "--lockout 1m"; do
		run "$THROTTLE" run k --concurrency 1 $o -- echo ran
		[ "$status" -eq 2 ]
		[ "$output" = "throttle: run: ${o%% *} goes with --limit (a rate); give the limit too, or leave it out" ] || { echo "$output"; return 1; }
	done
	run "$THROTTLE" run k --concurrency 1 --limit 5/1m --cost 2 --lockout 1m -- echo ran
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
	# a policy's --ttl is there for acquire: run with its limit runs
	at 1 policy set jobs --limit 5/1m --ttl 10m
	run at 1 run jobs:x -- echo hi
	[ "$status" -eq 0 ]
	[ "$output" = hi ]
	run "$THROTTLE" run --limit 1/1s -- true
	[ "$status" -eq 2 ]
	run "$THROTTLE" run k --limit 1/1s --conflict-exit-code 256 -- true
	[ "$status" -eq 2 ]
}

@test "run: a key that begins with a dash goes between two --" {
	run at 100 run --limit 1/1d -- -nightly -- echo ran -- on
	[ "$status" -eq 0 ]
	[ "$output" = "ran -- on" ]
	run at 200 run --limit 1/1d -- -nightly -- echo ran
	[ "$status" -eq 75 ]
	[[ "$output" == *"-nightly throttled"*"not running echo"* ]]
	run at 200 inspect -- -nightly
	[[ "$output" == *"1/1d"*"-nightly"* ]]
	# an ordinary key may be written so too; a -- in the command stays
	run at 100 run --limit 1/1d -- plain -- sh -c 'echo "$1"' sh --
	[ "$status" -eq 0 ]
	[ "$output" = "--" ]
	run at 100 run --limit 1/1d -- -nightly --
	[ "$status" -eq 2 ]
	[[ "$output" == *"no command to run after '-nightly --'"* ]]
	# mistyped, the message says what is wrong with that form
	run at 100 run --limit 1/1d -- -nightly echo ran
	[ "$status" -eq 2 ]
	[[ "$output" == *"'-nightly' is not a command; a key that begins with '-' goes between two '--'"* ]]
	run at 100 run -- -nightly --limit 1/1d -- echo ran
	[ "$status" -eq 2 ]
	[[ "$output" == *"'--limit' comes after '--', which ends the options"* ]]
	run at 100 run --limit 1/1d -- -nightly extra -- echo ran
	[ "$status" -eq 2 ]
	[[ "$output" == *"'extra' is one argument too many"* ]]
	# the first "--" ends the options: with no key before it and no
	# second "--", there is no key
	run at 100 run --limit 1/1d -- echo ran
	[ "$status" -eq 2 ]
	[[ "$output" == *"the key is missing"* ]]
}

@test "run --limit --concurrency: once a day and never two at once" {
	# README Recipes: "Both at once, as flock around a quota would"
	"$THROTTLE" run r --limit 2/1d --concurrency 1 -- sleep 3 &
	wrapper=$!
	track $wrapper
	wait_lease r
	# the slot is held: refused, and the rate is not charged for it
	run --separate-stderr "$THROTTLE" run r --limit 2/1d --concurrency 1 -- touch ran
	[ "$status" -eq 75 ]
	[ ! -e ran ]
	[[ "$stderr" == "throttle: r has its one slot held (pid $wrapper, for "*"), retry later; not running touch" ]]
	# --wait waits for the slot, says so, then takes the second unit
	run --separate-stderr "$THROTTLE" run r --limit 2/1d --concurrency 1 --wait 10s -- touch ran
	[ "$status" -eq 0 ]
	[ -e ran ]
	[[ "$stderr" == "throttle: r has its one slot held (pid $wrapper, for "*"), waiting for a slot (--wait at most 10s)" ]]
	wait "$wrapper"
	# the slot is free but the day's two units are spent: refused
	run --separate-stderr "$THROTTLE" run r --limit 2/1d --concurrency 1 -- touch again
	[ "$status" -eq 75 ]
	[ ! -e again ]
	[[ "$stderr" == "throttle: r throttled, retry in 11h59m"*"s; not running touch" ]]
	# and the refused call left no slot behind
	run "$THROTTLE" inspect r --format json
	[[ "$output" == *'"remaining":0'* && "$output" != *'"lease":'* ]]
	# a command that cannot be executed frees the slot and gives the unit back
	run -127 "$THROTTLE" run s --limit 1/1d --concurrency 1 -- ./no-such-command
	[ "$status" -eq 127 ]
	run "$THROTTLE" run s --limit 1/1d --concurrency 1 -- touch s-ran
	[ "$status" -eq 0 ]
	[ -e s-ran ]
}

@test "run --on-error: a store out of reach runs (allow) or refuses (deny) the command" {
	touch afile # a file where a folder should be: the store cannot open
	run --separate-stderr "$THROTTLE" --db "$TMP/afile/state.db" --on-error allow run k --limit 1/1d -- touch ran
	[ "$status" -eq 0 ]
	[ -e ran ]
	[[ "$stderr" == *"; running touch (--on-error allow)" ]]
	run --separate-stderr "$THROTTLE" --db "$TMP/afile/state.db" --on-error deny run k --concurrency 1 --conflict-exit-code 9 -- touch ran2
	[ "$status" -eq 9 ]
	[ ! -e ran2 ]
	# a usage error is never mapped, store or not
	run --separate-stderr "$THROTTLE" --db "$TMP/afile/state.db" --on-error allow consume k --limit 5/1m --algorithm fixed-window --burst 3
	[ "$status" -eq 2 ]
	run --separate-stderr "$THROTTLE" --db "$TMP/afile/state.db" --on-error allow run k --limit 1/1d --concurrency 1 --cost 2 -- true
	[ "$status" -eq 2 ]
}

@test "run --concurrency 1: a job in another PID namespace holds the slot, both ways" {
	unshare -pf --mount-proc true 2>/dev/null || skip "needs unshare -p (root, or user namespaces)"
	# the host holds it: a container with the same host name is refused
	"$THROTTLE" run k --concurrency 1 -- sh -c ": >'$TMP/up1'; sleep 3" 3>&- &
	track $!
	wait_until test -e "$TMP/up1"
	run --separate-stderr unshare -pf --mount-proc "$THROTTLE" run k --concurrency 1 -- echo second
	[ "$status" -eq 75 ] || { echo "$status $output $stderr"; return 1; }
	[ -z "$output" ]
	# a container holds it: the host, and another container, are
	# refused (its pid 1 is not the host's pid 1)
	unshare -pf --mount-proc "$THROTTLE" run j --concurrency 1 -- sh -c ": >'$TMP/up2'; sleep 3" 3>&- &
	track $!
	wait_until test -e "$TMP/up2"
	run --separate-stderr "$THROTTLE" run j --concurrency 1 -- echo second
	[ "$status" -eq 75 ] || { echo "$status $output $stderr"; return 1; }
	[[ "$stderr" == *"on $(hostname)/"[0-9]*","* ]] || { echo "$stderr"; return 1; }
	run --separate-stderr unshare -pf --mount-proc "$THROTTLE" run j --concurrency 1 -- echo second
	[ "$status" -eq 75 ]
}

@test "run at a terminal: a wrapper killed with SIGKILL frees the slot for the rest of its script" {
	command -v script >/dev/null || skip "needs script(1) for a terminal"
	# at a terminal the job stays in the shell's job, whose later
	# commands are the rest of the script: the lease used to name that
	# group, and the script's next run waited on itself
	cat >s.sh <<-'EOF'
		"$THROTTLE" run j --concurrency 1 -- sh -c 'kill -9 $PPID; sleep 0.2'
		echo "first: $?"
		"$THROTTLE" run j --concurrency 1 --wait 2s -- echo second
		echo "second: $?"
	EOF
	chmod +x s.sh
	run env THROTTLE="$THROTTLE" script -qec ./s.sh /dev/null
	[[ "$output" == *"first: 137"* ]] || { echo "$output"; return 1; }
	[[ "$output" == *"second: 0"* ]] || { echo "$output"; return 1; }
}

@test "run takes no --owner: its lease is the wrapper's and its job's" {
	run --separate-stderr "$THROTTLE" run own --concurrency 1 --owner $$ -- true
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"run: --owner does not apply to this command"* ]]
	run "$THROTTLE" inspect own
	[ "$status" -eq 1 ]
}
