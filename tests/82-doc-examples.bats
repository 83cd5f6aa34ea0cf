#!/usr/bin/env bats
# Every example in README.md and the man pages, run as pasted: `doc HASH`
# gives a test the example's text as a reader sees it (tests/doc-examples
# lists them; tests/lint-docs fails `make lint` when an example has no
# test, so a doc change without a test change cannot land).  Only what a
# reader must change is changed: /usr/local/bin/ becomes the test's own
# bin folder, host names a server of the test's own.

load lib

ROOT=$BATS_TEST_DIRNAME/..

# throttle on PATH, as an installed one is, and stubs beside it
on_path() {
	mkdir -p "$TMP/bin"
	ln -sf "$THROTTLE" "$TMP/bin/throttle"
	export PATH="$TMP/bin:$PATH"
}

# stub NAME [SHELL CODE]: a program NAME in $TMP/bin that logs its name to
# $TMP/ran, then runs the code
stub() {
	mkdir -p "$TMP/bin"
	printf '#!/bin/sh\necho %s >>%s/ran\n%s\n' "$1" "$TMP" "${2:-}" >"$TMP/bin/$1"
	chmod +x "$TMP/bin/$1"
}

# cron_line TEXT: a crontab line's command (the five time fields dropped,
# continued lines joined), /usr/local/bin/ made the test's bin folder
cron_line() {
	printf '%s\n' "$1" | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' |
	    sed -E 's/^([^ ]+ +){5}//' | sed "s|/usr/local/bin/|$TMP/bin/|g"
}

# cron TEXT: run a crontab command as cron does (sh -c, cron's PATH)
cron() {
	env -i PATH=/usr/bin:/bin HOME="$TMP" SHELL=/bin/sh LOGNAME=root \
	    THROTTLE_DB="$THROTTLE_DB" ${THROTTLE_NOW:+THROTTLE_NOW=$THROTTLE_NOW} \
	    /bin/sh -c "$1"
}

ran() { [ -e "$TMP/ran" ] && grep -c "^$1\$" "$TMP/ran" || echo 0; }

@test "README: the first lines: at most 5 tries per 15 minutes" {
	on_path
	script=$(doc e864af544843)
	for n in 1 2 3 4 5; do
		THROTTLE_NOW=1000 bash -c "$script"
	done
	run env THROTTLE_NOW=1000 bash -c "$script"
	[ "$status" -eq 1 ]
}

@test "README Quick start: the first command's run, and every make target it names" {
	line=$(doc 1a720aa858e4)
	[[ "$line" == "apt-get update && apt-get install -y "*" && make && ./throttle consume hello --limit 3/1m --format json" ]]
	# the build and install are proven by make fresh-check in a fresh
	# Debian; here, the decision it ends with
	mkdir q && ln -s "$THROTTLE" q/throttle && cd q
	run bash -c "${line##*make && }"
	[ "$status" -eq 0 ]
	[[ "$output" == '{"key":"hello","allowed":true,"algorithm":"gcra","limit":3,"period":60,'* ]]
	# make check, make install and the Development list name real targets
	for h in d064dfa48b8d 2a5df156dfea 96ffd9b6ae07; do
		for t in $(doc "$h" | awk '$1 == "make" { print ($2 ~ /^[a-z-]+$/ ? $2 : "all") }'); do
			grep -q "^$t:" "$ROOT/Makefile" || { echo "make $t: no such target"; return 1; }
		done
	done
}

@test "README Output, man OUTPUT: the throttled line, as shown" {
	block=$(doc 2562d50aff6b)
	want=$(printf '%s\n' "$block" | sed -n 2p)
	[ "$want" = "$(doc 5aeaa3a9043e)" ]
	cmd=$(printf '%s\n' "$block" | sed -n 's/^\$ //p')
	on_path
	for n in 1 2 3 4 5; do THROTTLE_NOW=1000 bash -c "$cmd"; done
	# 5/15m: one try back every 180s; 12.5s before the next one
	run --separate-stderr env THROTTLE_NOW=1167.5 bash -c "$cmd"
	[ "$status" -eq 1 ]
	[ "$stderr" = "$want" ]
}

@test "README Output: the json line, as shown" {
	block=$(doc 2be0f121881d)
	on_path
	run --separate-stderr env THROTTLE_NOW=1000 bash -c "$(printf '%s\n' "$block" | sed -n 's/^\$ //p')"
	[ "$output" = "$(printf '%s\n' "$block" | sed -n 2p)" ]
}

@test "README Output: shell output, eval'd as shown, after one call" {
	block=$(doc c03c1b5e9956)
	on_path
	THROTTLE_NOW=1000 throttle consume api --limit 3/60s >/dev/null
	run env THROTTLE_NOW=1000 bash -c "$(printf '%s\n' "$block" | sed -n 's/^\$ //p')"
	[ "$output" = "$(printf '%s\n' "$block" | tail -n 1)" ]
}

@test "man OUTPUT: the inspect table, as shown" {
	on_path
	THROTTLE_NOW=1000 throttle consume login:alice --limit 5/15m
	THROTTLE_NOW=1000 throttle consume login:alice --limit 5/15m
	run env THROTTLE_NOW=1000 throttle inspect
	[ "$output" = "$(doc 21e622ec11f1)" ]
}

@test "README Recipes: a credit pool and a sliding window, as written" {
	on_path
	user=alice
	block=$(doc cfcdf45876d4)
	pool=$(printf '%s\n' "$block" | grep 'upload\|api:')
	window=$(printf '%s\n' "$block" | grep 'mail:')
	# 100 credits, 20 a call: five calls, then one credit a minute
	for n in 1 2 3 4 5; do
		THROTTLE_NOW=1000 user=$user bash -c "$pool" || { echo "call $n refused"; return 1; }
	done
	run env THROTTLE_NOW=1000 user=$user bash -c "$pool"
	[ "$status" -eq 1 ]
	run env THROTTLE_NOW=2200 user=$user bash -c "$pool"
	[ "$status" -eq 0 ]
	for n in $(seq 100); do
		THROTTLE_NOW=$((1000 + n)) user=$user bash -c "$window" || { echo "message $n refused"; return 1; }
	done
	run env THROTTLE_NOW=1101 user=$user bash -c "$window"
	[ "$status" -eq 1 ]
}

@test "README Recipes, man EXAMPLES: the paced loops sleep as told, never spin" {
	on_path
	export -f stub
	curl() { echo "$1" >>fetched; }
	urls="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"
	start=$(date +%s%N)
	eval "$(doc e9423b10bc29)"
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$(wc -l <fetched)" -eq 15 ]
	# 10 at once from rest, then one every 100ms: at least 5 x 100ms
	[ "$elapsed" -ge 450 ] || { echo "15 calls in ${elapsed}ms"; return 1; }
	# the man page's loop, on a key of its own
	loop=$(doc 117ef9e2eee2)
	start=$(date +%s%N)
	for n in $(seq 15); do eval "${loop//api/api2}"; done
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$elapsed" -ge 450 ] || { echo "15 calls in ${elapsed}ms"; return 1; }
	# a store error (a state file that is not one) stops both loops
	# after a URL went through, never going ahead on the last answer
	printf 'not a database\n' >notes.txt
	cat >loop.sh <<-EOF
		curl() { echo "\$1" >>fetched2; }
		urls="a b"
		THROTTLE_DB=$THROTTLE_DB
		for url in \$urls; do
			[ "\$url" = b ] && THROTTLE_DB=$TMP/notes.txt
			$(doc e9423b10bc29 | sed -n '/until/,/done/p')
			curl "\$url"
		done
	EOF
	run bash loop.sh
	[ "$status" -eq 1 ]
	[ "$(cat fetched2)" = a ]
	[[ "$output" == *"notes.txt: is not a throttle state file"* ]]
	run env THROTTLE_DB="$TMP/notes.txt" bash -c "$loop; echo went ahead"
	[ "$status" -eq 1 ]
	[[ "$output" != *"went ahead"* ]]
	# a key locked out until reset has no retry_after to sleep: the loop
	# polls once a second, never spins
	at 1 consume door --limit 1/1h --lockout never
	at 1 consume door --limit 1/1h --lockout never 2>/dev/null || true
	run timeout 2.5 bash -c "n=0; throttle() { n=\$((n + 1)); echo \$n >>'$TMP/calls'; command throttle \"\$@\"; }; ${loop//consume api --limit 10\/1s/consume door --limit 1\/1h}"
	[ "$status" -eq 124 ]
	[ "$(wc -l <"$TMP/calls")" -le 4 ]
}

@test "README Recipes, man EXAMPLES: two limits at once, --wait doing the sleeping" {
	on_path
	line=$(doc c37e22b177ff)
	[[ "$line" == *" && curl ..." ]]
	curl() { echo called >>curled; }
	start=$(date +%s%N)
	for n in $(seq 12); do eval "${line% ...}"; done
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$(wc -l <curled)" -eq 12 ]
	[ "$elapsed" -ge 150 ]
}

@test "README Recipes, man EXAMPLES: a failed upload gives its unit back" {
	on_path
	user=alice
	block=$(doc 9f96a5e89456)
	upload() { return 1; }
	export -f upload
	for n in $(seq 15); do
		THROTTLE_NOW=1000 user=$user bash -c "$block" || { echo "try $n refused"; return 1; }
	done
	upload() { return 0; }
	export -f upload
	for n in $(seq 10); do THROTTLE_NOW=1000 user=$user bash -c "$block"; done
	run env THROTTLE_NOW=1000 user=$user bash -c "$block"
	[ "$status" -eq 1 ]
}

@test "README Recipes, man EXAMPLES: the cron lines, run as cron runs them" {
	on_path
	stub backup
	stub reports
	stub report 'sleep 2'
	stub sync 'sleep 2'
	# at most once a day (README and man), silently
	for h in 01a09e1eb4ea 4935fd4ec21d; do
		line=$(cron_line "$(doc $h)")
		for t in 1000 1600 2200; do
			THROTTLE_NOW=$t cron "$line" >out 2>&1
			[ ! -s out ] || { cat out; return 1; } # cron mails nothing
		done
	done
	[ "$(ran backup)" -eq 2 ] # once for each: nightly-backup, nightly
	# never two at once (README and man): the second cron run skips quietly
	for h in 30e5a280ad4e 1e7c8053eebf 2ac9735cecaf 92f1023c816b; do
		throttle reset report # the README's and the man page's share it
		line=$(cron_line "$(doc $h)")
		cron "$line" &
		track $!
		wait_lease "$(printf '%s\n' "$line" | awk '{ print $3 }')"
		cron "$line" >out 2>&1
		[ ! -s out ] || { cat out; return 1; }
		wait
	done
	[ "$(ran sync)" -eq 2 ]
	[ "$(ran report)" -eq 2 ]
	# a day's report already ran: the next cron run skips it
	line=$(cron_line "$(doc 2ac9735cecaf)")
	cron "$line"
	[ "$(ran report)" -eq 2 ]
	# shed: whatever the load, a decision (0 or 1), never a usage error
	line=$(cron_line "$(doc 6b1c93e0ade5)")
	run cron "${line%%||*}"
	[ "$status" -le 1 ]
	cron "$line"
	run bash -c "$(doc 6dce232a09aa | sed 's/|| exit 0$//')"
	[ "$status" -le 1 ]
}

@test "README Recipes, CI: the jobs as written, each run" {
	on_path
	mkdir work && cd work
	printf '#!/bin/sh\necho deploy >>%s/ran\n' "$TMP" >deploy.sh
	chmod +x deploy.sh
	printf 'integration-test:\n\t@echo itest >>%s/ran\n' "$TMP" >Makefile
	bash -c "$(doc 6961daf591b9)"
	bash -c "$(doc 9c242d760411)"
	[ "$(ran deploy)" -eq 1 ]
	[ "$(ran itest)" -eq 2 ]
	# the GitLab and GitHub jobs: their script lines, as the runner runs them
	for h in 2ecbebc5705c d94c328f8a9f; do
		doc "$h" | sed -n 's/^ *- throttle /throttle /p; s/^ *run: throttle /throttle /p' >jobs
		[ "$(wc -l <jobs)" -eq 2 ]
		while read -r job; do bash -c "$job" || { echo "failed: $job"; return 1; }; done <jobs
	done
	[ "$(ran deploy)" -eq 3 ]
	[ "$(ran itest)" -eq 4 ]
}

@test "README PAM, man EXAMPLES: the by-hand flow locks out on the sixth try" {
	on_path
	# README: policy once, then the attempt, then the reset on success
	block=$(doc cdd1c3485213)
	policy=$(printf '%s\n' "$block" | grep 'policy set')
	attempt=$(printf '%s\n' "$block" | grep ' consume ')
	success=$(printf '%s\n' "$block" | grep ' reset ')
	bash -c "$policy"
	for n in 1 2 3 4 5; do
		THROTTLE_NOW=1000 PAM_USER=alice bash -c "$attempt" || { echo "try $n refused"; return 1; }
	done
	run env THROTTLE_NOW=1000 PAM_USER=alice bash -c "$attempt"
	[ "$status" -eq 1 ]
	# locked out: 15 minutes later still refused
	run env THROTTLE_NOW=1890 PAM_USER=alice bash -c "$attempt"
	[ "$status" -eq 1 ]
	PAM_USER=alice bash -c "$success"
	THROTTLE_NOW=1000 PAM_USER=alice bash -c "$attempt"
	# the man page's: authenticate between, the key reset on success
	authenticate() { echo try >>tries; return 1; }
	export -f authenticate
	script=$(doc 5c456e90c848)
	for n in $(seq 7); do THROTTLE_NOW=1000 user=bob bash -c "$script" || true; done
	[ "$(wc -l <tries)" -eq 5 ]
	# inspect and reset (man EXAMPLES)
	run env user=bob bash -c "$(doc 5716869f78b7)"
	[ "$status" -eq 0 ]
	[[ "$output" == *"login:bob"* ]]
	authenticate() { return 0; }
	export -f authenticate
	THROTTLE_NOW=1000 user=bob bash -c "$script"
	# on a state file it cannot use, the attempt is refused (deny)
	line=$(doc 96840184f447)
	run env THROTTLE_DB="$TMP" PAM_USER=carol bash -c "$line" 2>/dev/null
	[ "$status" -eq 1 ]
	run env PAM_USER=carol bash -c "$line"
	[ "$status" -eq 0 ]
}

@test "README batch: three lines in, three answers out, as shown" {
	on_path
	block=$(doc 880d3b070da3)
	cmd=$(printf '%s\n' "$block" | sed -n '/^\$ /,/throttle -q batch$/p' | sed 's/^\$ //')
	printf '%s\n' "$block" | grep '^{' >want
	run env THROTTLE_NOW=1000 bash -c "$cmd"
	[ "$status" -eq 0 ] # each answer carries its own exit
	n=0
	while read -r w; do
		n=$((n + 1))
		got=$(printf '%s\n' "$output" | sed -n "${n}p")
		# "..." stands for fields left out
		[[ "$got" == ${w//.../*} ]] || { echo "line $n: $got"; return 1; }
	done <want
	[ "$n" -eq 3 ]
	# the man page's batch line
	run env THROTTLE_NOW=1000 bash -c "printf '%s\n' \"$(doc ee41f62ad2c5)\" | throttle -q batch"
	[[ "$output" == '{"key":"login:alice smith","allowed":true,'* ]]
}

@test "README batch: the coprocess blocks the address that guesses too often" {
	on_path
	failed_logins() { for n in 1 2 3 4 5 6 7; do echo 10.0.0.1; done; echo 10.0.0.2; }
	block() { echo "$1" >>blocked; }
	eval "$(doc 68d0d360bcd5)"
	[ "$(cat blocked)" = "$(printf '10.0.0.1\n10.0.0.1')" ]
	# a state file that cannot be used: every request answered with the
	# error; under --on-error deny, as the text after it says, every
	# address is blocked (no answer at all used to block no one)
	rm blocked
	echo "not ours" >notours
	export THROTTLE_DB=$PWD/notours
	recipe=$(doc 68d0d360bcd5)
	eval "${recipe/throttle -q batch/throttle -q --on-error deny batch}"
	[ "$(wc -l <blocked)" -eq 8 ]
	[ "$(cat notours)" = "not ours" ]
}

@test "man EXAMPLES: single commands with a user, as written" {
	on_path
	user=alice token=t0k
	export user token
	for h in 97b7084f6838 706e9ea7c929 f5114462833c 05f0b3c21e31 1691eac72db8; do
		line=$(doc "$h")
		run env THROTTLE_NOW=1000 bash -c "$line"
		[ "$status" -eq 0 ] || { echo "$line: $output"; return 1; }
	done
	# 5 logins per 15 minutes: the sixth exits 1
	line=$(doc 97b7084f6838)
	for n in 2 3 4 5; do THROTTLE_NOW=1000 bash -c "$line"; done
	run env THROTTLE_NOW=1000 bash -c "$line"
	[ "$status" -eq 1 ]
	# a burst of 1000 at a cost of 50: 20 calls, then one more each 50s
	line=$(doc 1691eac72db8)
	for n in $(seq 19); do THROTTLE_NOW=1000 bash -c "$line"; done
	run env THROTTLE_NOW=1000 bash -c "$line"
	[ "$status" -eq 1 ]
	run env THROTTLE_NOW=1050 bash -c "$line"
	[ "$status" -eq 0 ]
}

@test "man EXAMPLES: a slot held across the steps of a script" {
	on_path
	step1() { throttle acquire db-migrate --concurrency 1 >/dev/null 2>&1 && echo got >>second; true; }
	step2() { throttle inspect db-migrate --format json >during; }
	export -f step1 step2
	run bash -c "$(doc 5dad51199e99)"
	[ "$status" -eq 0 ]
	[ ! -e second ] # held: no second holder during the steps
	grep -q '"lease":' during
	# freed on the way out
	run throttle inspect db-migrate --format json
	[[ "$output" != *'"lease":'* ]]
}

@test "man run: the refusal lines, as shown" {
	on_path
	block=$(doc 9e651d68eadf)
	mkdir w && cd w
	printf '#!/bin/sh\n' >backup.sh
	cp backup.sh sync.sh && chmod +x backup.sh sync.sh
	THROTTLE_NOW=1000 throttle run nightly --limit 1/1d -- ./backup.sh
	run --separate-stderr env THROTTLE_NOW=1010 throttle run nightly --limit 1/1d -- ./backup.sh
	[ "$status" -eq 75 ]
	[ "$stderr" = "$(printf '%s\n' "$block" | sed -n 1p)" ]
	throttle run sync --concurrency 1 -- sleep 3 &
	track $!
	wait_lease sync
	run --separate-stderr throttle run sync --concurrency 1 -- ./sync.sh
	[ "$status" -eq 75 ]
	want=$(printf '%s\n' "$block" | sed -n 2p)
	[[ "$stderr" == ${want//pid 4242, for 3m2s/pid +([0-9]), for +([0-9.])s} ]]
}

@test "README Redis, man STORES: the shared store's URL, on a server of our own" {
	command -v redis-server >/dev/null || skip "needs redis-server (apt-get install redis-server)"
	on_path
	stub deploy.sh
	port=$("$BATS_TEST_DIRNAME/redis-fleet" port)
	redis-server --port "$port" --bind 127.0.0.1 --requirepass secret --save '' \
	    --appendonly no --daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis.log"
	for _ in $(seq 50); do [ -s "$TMP/redis.pid" ] && break; sleep 0.1; done
	track "$(cat "$TMP/redis.pid")"
	for _ in $(seq 50); do redis-cli -p "$port" -a secret ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
	for h in b713b8031d16 87141b617d03; do
		script=$(doc "$h" | sed "s/redis.internal:6379/127.0.0.1:$port/; s|\./deploy.sh|deploy.sh|")
		for n in 1 2 3; do bash -c "$script" || { echo "$script"; return 1; }; done
	done
	# both on one server: the README's under its prefix, the man page's not
	[ "$(ran deploy.sh)" -eq 6 ]
	[ "$(redis-cli -p "$port" -a secret --no-auth-warning --scan --pattern 'ci:*' | wc -l)" -ge 1 ]
}
