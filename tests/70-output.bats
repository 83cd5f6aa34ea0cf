#!/usr/bin/env bats
# text, json and shell output; messages on stderr only.

load lib

@test "text: silent when allowed, one line on stderr when throttled" {
	run --separate-stderr at 100 consume login:alice --limit 1/25s
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	run --separate-stderr at 112.5 consume login:alice --limit 1/25s
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "throttle: login:alice throttled, retry in 12.5s" ]
}

@test "-q and --quiet silence the throttled line" {
	at 100 consume k --limit 1/1m
	run --separate-stderr at 100 consume k --limit 1/1m -q
	[ "$status" -eq 1 ]
	[ "$stderr" = "" ]
	run --separate-stderr at 100 consume k --limit 1/1m --quiet
	[ "$stderr" = "" ]
}

@test "-q: gc and verify print no summary in text, their counts in json" {
	at 100 consume k --limit 1/1m
	run --separate-stderr at 1000 gc -q
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	run --separate-stderr "$THROTTLE" verify --quiet
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
	at 2000 consume k --limit 1/1m
	run --separate-stderr at 3000 gc -q --format json
	[ "$output" = '{"keys":1,"leases":0,"lockouts":0,"shedders":0}' ]
	[ "$stderr" = "" ]
	# without -q, the line is there
	at 4000 consume k --limit 1/1m
	run at 5000 gc
	[ "$output" = "removed 1 key at rest, 0 ended leases, 0 ended lockouts and 0 idle shedders" ]
}

@test "verify's text line escapes the path: one line, nothing a terminal acts on" {
	d=$'odd\n\e[31m.db'
	at 100 consume k --limit 1/1m --db "$d"
	run --separate-stderr "$THROTTLE" verify --db "$d"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$output" = 'odd\n\x1b[31m.db: ok, 1 key and 0 leases' ]
}

@test "inspect KEY in shell: one set of variables, the shedder's only when it is all there is" {
	at 100 consume S --limit 1/1m --lockout 1h
	at 100 consume S --limit 1/1m --lockout 1h || true
	at 100 consume S --limit 1/1m --lockout 1h || true
	at 100 shed S --utilization 0.99 >/dev/null
	run --separate-stderr at 100 inspect S --format shell
	[ "$(grep -c '^THROTTLE_KEY=' <<<"$output")" = 1 ]
	[[ "$output" == *THROTTLE_LOCKOUT_AFTER=3600* && "$output" != *SHEDDING* ]]
	at 100 shed T --utilization 0.99 >/dev/null
	run --separate-stderr at 100 inspect T --format shell
	[[ "$output" == *THROTTLE_SHEDDING_AMOUNT=* ]]
}

@test "verify in json and shell: the counts; the path in json only, never THROTTLE_DB" {
	at 100 consume k --limit 1/1m
	run --separate-stderr "$THROTTLE" verify --format json
	[[ "$output" == '{"db":"'*'","ok":true,"keys":1,"leases":0}' ]]
	run --separate-stderr "$THROTTLE" verify --format shell
	[ "$output" = "THROTTLE_OK=1
THROTTLE_KEYS=1
THROTTLE_LEASES=0" ]
	# eval-ing it leaves the state file a script uses as it was
	was=$THROTTLE_DB
	"$THROTTLE" consume k --limit 1/1m --db "$TMP/other.db"
	eval "$("$THROTTLE" verify --format shell --db "$TMP/other.db")"
	[ "$THROTTLE_DB" = "$was" ]
}

@test "json: one object on stdout with every field, message on stderr" {
	run --separate-stderr at 100 consume k --limit 3/60s --format json
	[ "$output" = '{"key":"k","allowed":true,"algorithm":"gcra","limit":3,"period":60,"burst":3,"cost":1,"remaining":2,"retry_after":0,"reset_after":20}' ]
	[ "$stderr" = "" ]
	at 100 consume k --limit 3/60s --cost 2
	run --separate-stderr at 100.0005 consume k --limit 3/60s --format json
	[ "$status" -eq 1 ]
	[ "$output" = '{"key":"k","allowed":false,"algorithm":"gcra","limit":3,"period":60,"burst":3,"cost":1,"remaining":0,"retry_after":20,"reset_after":60}' ]
	[ "$stderr" = "throttle: k throttled, retry in 20s" ]
}

@test "times are rounded up to the millisecond, never down" {
	at 100 consume k --limit 3/60s --cost 3
	run at 100.0005 consume k --limit 3/60s --format json
	[ "$(field retry_after "$output")" = 20 ]
	run at 100.0015 consume k --limit 3/60s --format json
	[ "$(field retry_after "$output")" = 19.999 ]
	[ "$(field reset_after "$output")" = 59.999 ]
	# text, for a person: past a minute, whole seconds, the fraction
	# dropped (issue 18: "retry in 23h59m59s", not "86399.833s")
	at 2000 consume d --limit 1/1d
	run --separate-stderr at 2000.167 consume d --limit 1/1d
	[ "$stderr" = "throttle: d throttled, retry in 23h59m59s" ] || { echo "$stderr"; return 1; }
	run --separate-stderr at 2000.167 consume d --limit 1/1d --format json
	[ "$(field retry_after "$output")" = 86399.833 ]
	at 1000 consume h --limit 1/90.5s
	run --separate-stderr at 1000 consume h --limit 1/90.5s
	[[ "$stderr" == *"retry in 1m30s" ]] || { echo "$stderr"; return 1; }
}

@test "shell: eval-able variables, whole seconds rounded up" {
	run --separate-stderr at 100 consume k --limit 3/60s --format shell
	[ "$status" -eq 0 ]
	eval "$output"
	[ "$THROTTLE_ALLOWED" = 1 ]
	[ "$THROTTLE_REMAINING" = 2 ]
	[ "$THROTTLE_RETRY_AFTER" = 0 ]
	[ "$THROTTLE_RESET_AFTER" = 20 ]
	[ "$THROTTLE_RESET_AFTER_SECS" = 20 ]
	[ "$THROTTLE_KEY" = k ]
	[ "$THROTTLE_ALGORITHM" = gcra ]
	at 100 consume k --limit 3/60s --cost 2
	run --separate-stderr at 100.5 consume k --limit 3/60s --format shell
	[ "$status" -eq 1 ]
	eval "$output"
	[ "$THROTTLE_ALLOWED" = 0 ]
	[ "$THROTTLE_RETRY_AFTER" = 19.5 ]
	[ "$THROTTLE_RETRY_AFTER_SECS" = 20 ]
	[ "$THROTTLE_RESET_AFTER" = 59.5 ]
	[ "$THROTTLE_RESET_AFTER_SECS" = 60 ]
}

@test "THROTTLE_FORMAT chooses the format; --format overrides it" {
	run --separate-stderr env THROTTLE_FORMAT=json THROTTLE_NOW=1 "$THROTTLE" consume k --limit 2/1s
	[ "$(field remaining "$output")" = 1 ]
	run --separate-stderr env THROTTLE_FORMAT=json THROTTLE_NOW=1 "$THROTTLE" consume k --limit 2/1s --format shell
	[[ "$output" == THROTTLE_KEY=* ]]
	# a format that cannot show every key names where it came from: an
	# option the user did not give is not blamed
	run env THROTTLE_FORMAT=shell "$THROTTLE" inspect
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: inspect: THROTTLE_FORMAT=shell shows one key; give a key, or use --format json for all of them" ]
	run env THROTTLE_FORMAT=shell "$THROTTLE" policy list
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: policy list: THROTTLE_FORMAT=shell shows one policy;"* ]]
	run "$THROTTLE" inspect --format shell
	[[ "$output" == "throttle: inspect: --format shell shows one key;"* ]]
}

@test "hostile keys cannot break json, shell or the terminal" {
	key=$'it\'s "q" \\ $(touch pwned) `x`\nnext\x1b[31m'
	run --separate-stderr at 1 consume "$key" --limit 1/1h --format shell
	eval "$output"
	[ "$THROTTLE_KEY" = "$key" ]
	[ ! -e pwned ]
	run --separate-stderr at 1 consume "$key" --limit 1/1h --format json
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == '{"key":"it'"'"'s \"q\" \\ $(touch pwned) `x`\nnext\u001b[31m","allowed":false'* ]]
	[ "$stderr" = 'throttle: it'"'"'s "q" \\ $(touch pwned) `x`\nnext\x1b[31m throttled, retry in 1h' ]
}

@test "no message drives the terminal: policy names, commands, subcommands, batch lines" {
	esc=$'\x1b[31mX\x07'
	"$THROTTLE" policy set real --limit 1/1m
	run --separate-stderr "$THROTTLE" policy show -- "$esc"
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: policy show: no policy named '\x1b[31mX\x07'" ]
	run --separate-stderr "$THROTTLE" policy "$esc"
	[ "$stderr" = "throttle: policy: '\x1b[31mX\x07' is not set, list, show or delete" ]
	run -127 --separate-stderr "$THROTTLE" run k --concurrency 1 -- "$esc"
	[ "$stderr" = "throttle: run: \x1b[31mX\x07: No such file or directory" ]
	run --separate-stderr at 1 batch <<<"consume k --limit $esc"
	[[ "$stderr" == "throttle: batch: line 1: --limit: '\x1b[31mX\x07' "* ]]
	# valid UTF-8 is left as it is
	run --separate-stderr "$THROTTLE" policy show -- 'é'
	[ "$stderr" = "throttle: policy show: no policy named 'é'" ]
}

@test "json stays valid UTF-8 for keys that are not" {
	run --separate-stderr at 1 consume $'caf\xc3\xa9-\xff' --limit 1/1h --format json
	[[ "$output" == '{"key":"café-\ufffd",'* ]]
}

@test "help: aligned columns, no trailing spaces, policy does not offer --owner" {
	run "$THROTTLE" --help
	[ "$status" -eq 0 ]
	if grep -n ' $' <<<"$output"; then return 1; fi
	# every option's help starts in one column
	starts=$(grep -E '^  (    |-[a-z], )--' <<<"$output" |
	    awk '{ match($0, /[^ ]  +[^ ]/); print RSTART + RLENGTH - 1 }' | sort -u)
	[ "$(wc -l <<<"$starts")" -eq 1 ]
	[[ "$output" == *"--lock-timeout DURATION  how long"* ]]
	run "$THROTTLE" help policy
	[[ "$output" != *"--owner"* ]]
	[[ "$output" == *"--concurrency"* ]]
	run "$THROTTLE" help acquire
	[[ "$output" == *"--owner"* ]]
	run "$THROTTLE" help shed
	[[ "$output" == *"above 1: overloaded"* ]]
}

@test "options after -- are operands, and the message says so" {
	run --separate-stderr "$THROTTLE" consume -- -dash --limit 5/1m
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"'--limit' comes after '--', which ends the options"* ]]
	run "$THROTTLE" consume --limit 5/1m -- -dash
	[ "$status" -eq 0 ]
}

@test "release of a key with no state answers json and shell too" {
	run --separate-stderr at 100 release nokey --format json
	[ "$status" -eq 0 ]
	[ "$output" = '{"key":"nokey","released":0}' ]
	run --separate-stderr at 100 release nokey --format shell
	[ "$output" = "$(printf "THROTTLE_KEY='nokey'\nTHROTTLE_RELEASED=0")" ]
	run --separate-stderr at 100 release nokey
	[ "$output" = "" ]
}

@test "--on-error allow and deny still give a script remaining and retry_after" {
	printf 'not a database' >bad.db
	run --separate-stderr at 100 consume k --limit 5/1m --db bad.db --on-error allow --format shell
	[ "$status" -eq 0 ]
	eval "$output"
	[ "$THROTTLE_ALLOWED" = 1 ]
	[ "$THROTTLE_REMAINING" = 0 ]
	[ "$THROTTLE_RETRY_AFTER" = 0 ]
	[ "$THROTTLE_RETRY_AFTER_SECS" = 0 ]
	[[ "$THROTTLE_ERROR" == *"not a throttle state file"* ]]
	run --separate-stderr at 100 consume k --limit 5/1m --db bad.db --on-error deny --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 1 ]
	[ "$(field remaining "$output")" = 0 ]
}

@test "compound limits: limit, period, retry_after and reset_after are all the binding limit's" {
	run at 100 consume c --limit '2/1s;3/1m' --format json
	[ "$(field limit "$output")" = 2 ]
	[ "$(field period "$output")" = 1 ]
	# the binding 2/1s is back at rest in 0.5s, though 3/1m takes 20s
	[ "$(field reset_after "$output")" = 0.5 ]
	[[ "$output" == *'"limits":[{"limit":2,'*'"reset_after":0.5},{"limit":3,'*'"reset_after":20}]}' ]]
	at 100 consume c --limit '2/1s;3/1m'
	run at 100 consume c --limit '2/1s;3/1m' --format json
	[ "$(field limit "$output")" = 2 ]
	[ "$(field retry_after "$output")" = 0.5 ]
	[ "$(field reset_after "$output")" = 1 ]
}

@test "inspect in text: an aligned table, a row per limit, the key last and escaped" {
	at 100 consume 'c d' --limit '2/1s;10/1m'
	at 100 consume lock --limit 1/1h --lockout 10m
	at 100 consume lock --limit 1/1h --lockout 10m || true
	at 100 acquire jobs --concurrency 2 >/dev/null
	at 100 acquire jobs --concurrency 2 >/dev/null
	at 100 consume "$(printf 'esc\033[31m')" --limit 1/1s
	run --separate-stderr at 100.5 inspect
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "ALGORITHM      LIMIT        REMAINING  RETRY      RESET      LOCKOUT    LEASES  KEY" ]
	[ "${lines[1]}" = "gcra           2/1s         2          -          -          -          -       c d" ]
	[ "${lines[2]}" = "gcra           10/1m        9          -          5.5s       -          -       c d" ]
	[ "${lines[3]}" = 'gcra           1/1s         0          0.5s       0.5s       -          -       esc\x1b[31m' ]
	[ "${lines[4]}" = "-              -            -          -          -          9m59s      -       lock" ]
	[ "${lines[5]}" = "-              -            -          -          -          -          2       jobs" ]
	if grep -q $'\033' <<<"$output"; then return 1; fi
}

@test "inspect in text: a cell wider than its column moves the next ones only as far as it must" {
	at 100 consume big --limit 1000000000/1d --cost 7
	at 100 consume wide --limit 1000000000000/1d
	at 100 consume small --limit 5/1m
	run --separate-stderr at 100 inspect
	[ "$status" -eq 0 ]
	[ "${lines[1]}" = "gcra           1000000000/1d 999999993 -          0.001s     -          -       big" ]
	[ "${lines[2]}" = "gcra           5/1m         4          -          12s        -          -       small" ]
	[ "${lines[3]}" = "gcra           1000000000000/1d 999999999999 -    0.001s     -          -       wide" ]
}

@test "inspect of a compound key: one record in json and shell, the binding limit's" {
	at 100 consume c --limit '2/1s;10/1m'
	at 100 consume c --limit '2/1s;10/1m'
	run at 100 inspect c --format shell
	[ "$(grep -c '^THROTTLE_LIMIT=' <<<"$output")" = 1 ]
	eval "$output"
	[ "$THROTTLE_LIMIT" = 2 ]
	[ "$THROTTLE_PERIOD" = 1 ]
	[ "$THROTTLE_REMAINING" = 0 ]
	[ "$THROTTLE_RETRY_AFTER" = 0.5 ]
	[ "$THROTTLE_RESET_AFTER" = 1 ]
	run at 100 inspect c --format json
	[ "${#lines[@]}" = 1 ]
	[ "$(field limit "$output")" = 2 ]
	[[ "$output" == *'"limits":[{"limit":2,'*'},{"limit":10,"period":60,"burst":10,"remaining":8,'* ]]
}

@test "a shedder shows in inspect, goes with reset, and gc forgets it once idle" {
	at 100 shed w --utilization 0.9 --seed 1 >/dev/null
	run --separate-stderr at 101 inspect w --format json
	[ "$status" -eq 0 ]
	[[ "$output" == '{"key":"w","shedding_amount":'*',"changed_ago":1}' ]]
	run --separate-stderr at 101 inspect
	[[ "${lines[1]}" =~ ^"shedder        s=-0."[0-9]{3}" " ]]
	[[ "${lines[1]}" == *" w" ]]
	"$THROTTLE" reset w
	run --separate-stderr at 101 inspect w
	[ "$status" -eq 1 ]
	at 100 shed w --utilization 0.9 --seed 1 >/dev/null
	at 100000 gc >/dev/null
	run --separate-stderr at 100000 inspect w
	[ "$status" -eq 1 ]
}

@test "policy list escapes control characters; inspect --names leaves such names out" {
	"$THROTTLE" policy set "$(printf 'p\033x')" --limit 1/1s
	run "$THROTTLE" policy list
	[ "$output" = 'p\x1bx --limit 1/1s' ]
	# --names is for completion: a name is printed as it is, backslash
	# and all, or left out if no completion could type it back
	at 100 consume "$(printf 'k\033y')" --limit 1/1s
	at 100 consume 'back\slash' --limit 1/1s
	at 100 consume "$(printf 'bad\377')" --limit 1/1s
	at 100 consume 'é:ok' --limit 1/1s
	# a C1 control in UTF-8 (U+009B, CSI: ESC [ to some terminals)
	at 100 consume "$(printf 'c1\302\23331m')" --limit 1/1s
	run at 100 inspect --names
	[ "$output" = 'back\slash
é:ok' ]
	run at 100 inspect
	[[ "$output" == *' c1\xc2\x9b31m'* ]]
	run "$THROTTLE" policy set "$(printf 'q\302\233x')" --limit 1/1s
	run "$THROTTLE" policy list
	[[ "$output" == *'q\xc2\x9bx --limit 1/1s'* ]]
}

@test "--wait says on stderr what it waits for, how long, and at most; -q silences it" {
	# a pinned clock (a wait moves it on): each call comes at once
	at 1000 consume k --limit 1/300ms
	run --separate-stderr at 1000 consume k --limit 1/300ms --wait 5s
	[ "$status" -eq 0 ]
	[[ "$stderr" =~ ^"throttle: k throttled, waiting 0."[0-9]+"s for it (--wait at most 5s)"$ ]]
	run --separate-stderr at 1000 -q consume k --limit 1/300ms --wait
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	at 1000 acquire s --concurrency 1 --ttl 300ms >/dev/null
	run --separate-stderr at 1000 acquire s --concurrency 1 --wait
	[ "$status" -eq 0 ]
	[[ "$stderr" =~ ^"throttle: s has its one slot held (lease "[0-9a-f]{16}", no owner, for "[0-9.]+"s), waiting for a slot"$ ]]
}

@test "inspect KEY in text: the shedder is a row of the table, the lease lines after it" {
	at 100 consume k --limit 5/1m -q
	at 100 acquire k --concurrency 2 >/dev/null
	at 100 shed k --utilization 0.5 >/dev/null 2>&1 || true
	run --separate-stderr at 101 inspect k
	[ "$status" -eq 0 ]
	[[ "${lines[1]}" == "gcra "* ]]
	[[ "${lines[2]}" == "shedder "* ]] || { echo "$output"; return 1; }
	[[ "${lines[3]}" == "k lease="* ]]
}

@test "inspect's text rounds a shedding amount to the nearest, as json's is" {
	for t in 0 10 20 30 40 50 60 70 80; do at $t shed s --utilization 0.95 -q || true; done
	run --separate-stderr at 80 inspect s --format json
	[ "$(field shedding_amount "$output")" = 0.266667 ]
	run --separate-stderr at 80 inspect s
	[[ "${lines[1]}" =~ ^"shedder        s=0.267 " ]] || { echo "$output"; return 1; }
}

@test "json and shell answer every request on a key; --names too; shell shows a key with only leases" {
	# reset, inspect of a key with no state and a lease not held printed
	# nothing in json; shell answers as json does
	for fmt in json shell; do
		want='{"key":"a"}'
		[ "$fmt" = json ] || want="THROTTLE_KEY='a'"
		for req in "reset a:0" "inspect a:1" \
		    "release a --lease 0123456789abcdef:1" \
		    "renew a --lease 0123456789abcdef:1"; do
			run --separate-stderr at 1 ${req%:*} --format "$fmt"
			[ "$status" -eq "${req##*:}" ] || { echo "$fmt $req: $status"; return 1; }
			[ "$output" = "$want" ] || { echo "$fmt $req: $output"; return 1; }
		done
	done
	run --separate-stderr at 1 policy set web --limit 5/1m --format json
	[ "$output" = '{"name":"web","options":"--limit 5/1m"}' ]
	run --separate-stderr at 1 policy set web --limit 5/1m
	[ "$output" = "" ]
	run --separate-stderr at 1 policy delete web --format json
	[ "$output" = '{"name":"web"}' ]
	at 1 consume 'a b' --limit 1/1m
	at 1 acquire l --concurrency 2 >/dev/null
	run --separate-stderr at 1 inspect --names --format json
	[ "${lines[0]}" = '{"key":"a b"}' ]
	[ "${lines[1]}" = '{"key":"l"}' ]
	run --separate-stderr at 1 inspect l --format shell
	[ "$status" -eq 0 ]
	[ "$output" = "THROTTLE_KEY='l'
THROTTLE_LEASES=1" ]
	# run's stdout is its job's: nothing added to it in json
	run --separate-stderr at 1 run job --concurrency 1 --format json -- printf 'data\n'
	[ "$status" -eq 0 ]
	[ "$output" = data ]
	# one set of variables a policy: eval keeps the last of several
	run --separate-stderr at 1 policy list --format shell
	[ "$status" -eq 2 ]
}
