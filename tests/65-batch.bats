#!/usr/bin/env bats
# throttle batch: requests on stdin, one JSON answer per line, in order.

load lib

@test "batch: one answer per request, in order, each with its exit code" {
	run --separate-stderr at 100 batch <<-'EOF'
		consume k --limit 3/1m
		consume k --limit 3/1m
		consume k --limit 3/1m
		consume k --limit 3/1m
		check k --limit 3/1m --cost 0
		reset k
		consume k --limit 3/1m
	EOF
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 7 ]
	[ "$(field exit "${lines[0]}")" = 0 ]
	[ "$(field remaining "${lines[0]}")" = 2 ]
	[ "$(field remaining "${lines[2]}")" = 0 ]
	[ "$(field allowed "${lines[3]}")" = false ]
	[ "$(field exit "${lines[3]}")" = 1 ]
	[ "$(field retry_after "${lines[3]}")" = 20 ]
	[ "$(field exit "${lines[4]}")" = 0 ]
	[ "${lines[5]}" = '{"key":"k","exit":0}' ]
	[ "$(field remaining "${lines[6]}")" = 2 ]
}

@test "batch: an answer is the command's own --format json line plus exit" {
	single=$(THROTTLE_DB=other.db at 100 --format json consume k --limit 5/1m --cost 2)
	answer=$(echo "consume k --limit 5/1m --cost 2" | at 100 batch)
	[ "$answer" = "${single%\}},\"exit\":0}" ]
}

@test "batch: keys with spaces and quotes, quoted as a shell would" {
	at 100 batch >out <<-'EOF'
		consume 'login:alice smith' --limit 2/1m
		consume "it's \"quoted\"" --limit 2/1m
		consume back\ slash\\ --limit 2/1m
	EOF
	[ "$(sed -n 1p out | jget key)" = '"login:alice smith"' ]
	[[ "$(sed -n 2p out)" == '{"key":"it'"'"'s \"quoted\"",'* ]]
	[ "$(sed -n 3p out | jget key)" = '"back slash\\"' ]
	run "$THROTTLE" inspect --names
	[[ "$output" == *"login:alice smith"* ]]
	[[ "$output" == *"it's \"quoted\""* ]]
}

@test "batch: a line's CR LF ends it; a carriage return elsewhere is a character, as in a shell" {
	# lines from Windows: each CR LF is a line's end
	printf 'consume k --limit 2/1m\r\nconsume k --limit 2/1m\r\nconsume k --limit 2/1m\r\n' >crlf
	run --separate-stderr at 100 batch <crlf
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	[ "$(field remaining "${lines[1]}")" = 0 ]
	[ "$(field exit "${lines[2]}")" = 1 ]
	# a CR inside a word stays in it (a shell keeps it too)
	printf 'consume x\ry --limit 1/1m\n' | at 100 batch >out
	[ "$(jget key <out)" = '"x\u000dy"' ]
	# a line that begins with CR names no command: refused, never taken
	# for a request that only reads and then admitted by --on-error
	printf '\rconsume k --limit 1/1m\n\rconsume k --limit 1/1m\n' >cr
	run --separate-stderr at 100 --on-error allow batch <cr
	[ "${#lines[@]}" -eq 2 ]
	[ "$(field exit "${lines[0]}")" = 2 ] || { echo "$output"; return 1; }
	[ "$(field exit "${lines[1]}")" = 2 ]
	[[ "$stderr" == *'\x0dconsume: unknown command'* ]] || { echo "$stderr"; return 1; }
	[[ "$stderr" != *"internal error"* ]]
	# and on a file that does not exist yet, the same
	run --separate-stderr env THROTTLE_DB="$TMP/new.db" "$THROTTLE" batch <cr
	[ "$(field exit "${lines[0]}")" = 2 ]
	[ ! -e "$TMP/new.db" ]
}

@test "batch: blank lines and comments get no answer" {
	run at 100 batch <<-'EOF'

		# a comment
		consume k --limit 1/1s   # trailing words after # are a comment
	EOF
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$(field exit "${lines[0]}")" = 0 ]
}

@test "batch: a bad request gets an error answer and the batch goes on" {
	run --separate-stderr at 100 batch <<-'EOF'
		consume 'open
		frobnicate k
		run k --limit 1/1s -- true
		consume k --limit 1/1s --wait
		consume k --limit 1/1s --db elsewhere.db
		consume k --limit 1/1s --on-error deny
		consume k --limit 1/1s -q
		consume k --limit 1/1s --cost 5
		consume nolimit
		inspect
		consume k --limit 1/1s
	EOF
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 11 ]
	for n in 0 1 2 3 4 5 6 7 8 9; do
		[ "$(field exit "${lines[$n]}")" = 2 ]
	done
	[[ "${lines[0]}" == *"not closed"* ]]
	[[ "${lines[1]}" == *"frobnicate: unknown command"* ]]
	[[ "${lines[2]}" == *"run is not a batch request"* ]]
	[[ "${lines[3]}" == *"cannot --wait in a batch"* ]]
	[[ "${lines[4]}" == *"--db, --format, --lock-timeout, --on-error and -q once"* ]]
	# a request's --on-error or -q would be ignored: refused as well
	[[ "${lines[5]}" == *"--on-error and -q once, on the batch command"* ]]
	[[ "${lines[6]}" == *"--on-error and -q once, on the batch command"* ]]
	[[ "${lines[7]}" == *"--cost: 5 is more than the burst"* ]]
	[[ "${lines[8]}" == *"no limit for this key"* ]]
	[[ "${lines[9]}" == *"give the key"* ]]
	[ "$(field allowed "${lines[10]}")" = true ]
	# and every one of them is said on stderr, with its line number
	[[ "$stderr" == *"batch: line 2: frobnicate: unknown command"* ]]
	[ ! -e elsewhere.db ]
}

@test "batch: a store error answers each request with its key, as --on-error makes it" {
	needs_sqlite
	at 1 consume k --limit 5/1s
	hold_lock state.db
	run --separate-stderr at 1 batch --lock-timeout 0 <<-'EOF'
		consume k --limit 5/1s
		frobnicate j
	EOF
	[ "$status" -eq 3 ]
	[[ "${lines[0]}" == '{"key":"k","error":"'*'state.db: is locked by another process'*'"exit":3}' ]]
	[[ "${lines[1]}" == '{"error":"frobnicate: unknown command'*'"exit":2}' ]]
	run --separate-stderr at 1 batch --lock-timeout 0 --on-error allow <<<'consume k --limit 5/1s'
	[ "$status" -eq 0 ]
	[[ "$output" == '{"key":"k","allowed":true,"algorithm":"gcra","limit":5,"period":1,"burst":5,"cost":1,"remaining":0,"retry_after":0,"reset_after":0,"error":"'*'"exit":0}' ]]
	[[ "$stderr" == *"allowing anyway (--on-error allow)" ]]
	run --separate-stderr at 1 batch --lock-timeout 0 --on-error deny <<<'consume k --limit 5/1s'
	[[ "$output" == '{"key":"k","allowed":false,"algorithm":"gcra","limit":5,"period":1,"burst":5,"cost":1,"remaining":0,"retry_after":1,"reset_after":0,"error":"'*'"exit":1}' ]]
	let_go
}

@test "batch: check and inspect read beside a writer's lock, as they do on their own" {
	needs_sqlite
	at 1 consume k --limit 5/1s
	hold_lock state.db
	# the reads at the head of the input are a read transaction of their
	# own; the consume after them waits for the lock, as a single one does
	# (a comment or a bad line between them touches no store either)
	run --separate-stderr at 1 batch --lock-timeout 0 <<-'EOF'
		check k --limit 5/1s
		# a note
		frobnicate
		inspect k
		consume k --limit 5/1s
		check k --limit 5/1s --cost 0
	EOF
	let_go
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 5 ]
	[[ "${lines[0]}" == '{"key":"k","allowed":true,'*'"remaining":3,'*'"exit":0}' ]]
	[ "$(field exit "${lines[1]}")" = 2 ]
	[[ "${lines[2]}" == '{"key":"k",'*'"remaining":4,'*'"exit":0}' ]]
	[[ "${lines[3]}" == '{"key":"k","error":"'*'is locked by another process'*'"exit":3}' ]]
	[[ "${lines[4]}" == '{"key":"k","allowed":true,'*'"remaining":4,'*'"exit":0}' ]]
	# nothing was charged by the reads
	run at 1 check k --limit 5/1s --cost 0 --format json
	[ "$(field remaining "$output")" = 4 ]
}

@test "batch: reset, release and renew make no state file, as their single calls do" {
	needs_sqlite
	run --separate-stderr at 1 batch <<-'EOF'
		reset a
		release a --lease 0123456789abcdef
		renew a --lease 0123456789abcdef
		release a
	EOF
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	# (no "error" for a reset that did what it was asked: the file's
	# absence is a note on stderr, as for a single call)
	[ "${lines[0]}" = '{"key":"a","exit":0}' ]
	# a lease not held is answered, not an error: the command's own
	# {"key":...}, its note on stderr
	[ "${lines[1]}" = '{"key":"a","exit":1}' ]
	[ "${lines[2]}" = '{"key":"a","exit":1}' ]
	[[ "$stderr" == *"a: no lease 0123456789abcdef"* ]]
	[ "$(field exit "${lines[3]}")" = 0 ]
	[ ! -e state.db ] || { ls -la; return 1; }
	[ ! -e state.db-wal ]
	# a request that writes after them makes it, and decides as usual
	run --separate-stderr at 1 batch <<-'EOF'
		reset a
		consume a --limit 1/1m
		consume a --limit 1/1m
	EOF
	[ "$(field exit "${lines[1]}")" = 0 ]
	[ "$(field exit "${lines[2]}")" = 1 ]
	[ -e state.db ]
}

@test "batch: a request with options before its command is decided, after a read" {
	# its first word is an option: it was taken for a read, and failed
	# in the read group ("a write in a batch's read group")
	run --separate-stderr at 1 batch <<-'EOF'
		check a --limit 2/1m
		--cost 2 consume a --limit 2/1m
		check a --limit 2/1m --cost 0
	EOF
	[ "$status" -eq 0 ] || { echo "$output $stderr"; return 1; }
	[ "$(field exit "${lines[1]}")" = 0 ]
	[ "$(field remaining "${lines[1]}")" = 0 ]
	[ "$(field remaining "${lines[2]}")" = 0 ]
}

@test "batch: a batch that only reads makes no state file, and sees one made meanwhile" {
	needs_sqlite
	run --separate-stderr at 1 batch <<-'EOF'
		# only reads
		check k --limit 1/1m
		inspect k
	EOF
	[ "$status" -eq 0 ]
	[ "$(field exit "${lines[0]}")" = 0 ]
	# a key with no state is an answer, as inspect's own json
	[ "${lines[1]}" = '{"key":"k","exit":1}' ]
	[ ! -e state.db ]
	[ ! -e state.db-wal ]
	# the file another process makes while the batch reads is read: the
	# second check is written only once the first is answered
	mkfifo "$TMP/in"
	at 1 batch <"$TMP/in" >"$TMP/out" 2>/dev/null &
	pid=$!
	exec 8>"$TMP/in"
	echo 'check k --limit 1/1m' >&8
	for _ in $(seq 200); do
		[ -s "$TMP/out" ] && break
		sleep 0.05
	done
	at 1 consume k --limit 1/1m >/dev/null 2>&1
	echo 'check k --limit 1/1m' >&8
	exec 8>&-
	wait "$pid"
	mapfile -t lines <"$TMP/out"
	[ "$(field exit "${lines[0]}")" = 0 ]
	[ "$(field exit "${lines[1]}")" = 1 ] || { cat "$TMP/out"; return 1; }
	# and the first request that writes makes it
	rm -f state.db state.db-wal state.db-shm
	run --separate-stderr at 1 batch <<-'EOF'
		check k --limit 1/1m
		consume k --limit 1/1m
		consume k --limit 1/1m
	EOF
	[ "$(field exit "${lines[1]}")" = 0 ]
	[ "$(field exit "${lines[2]}")" = 1 ]
	[ -e state.db ]
}

@test "batch: leases, shedding and policies work as on the command line" {
	"$THROTTLE" policy set login --limit 2/1m
	run --separate-stderr at 100 batch <<-'EOF'
		acquire ci --concurrency 1
		acquire ci --concurrency 1
		consume login:bob
		consume login:bob
		consume login:bob
		shed s --utilization 0.5
	EOF
	[ "$(field allowed "${lines[0]}")" = true ]
	lease=$(field lease "${lines[0]}" | tr -d '"')
	[ "$(field exit "${lines[1]}")" = 1 ]
	[ "$(field allowed "${lines[3]}")" = true ]
	[ "$(field allowed "${lines[4]}")" = false ]
	[ "$(field exit "${lines[5]}")" = 0 ]
	echo "release ci --lease $lease" | "$THROTTLE" batch >out
	[ "$(jget released <out)" = true ]
	[ "$(jget exit <out)" = 0 ]
}

@test "batch: answers each line as it comes, holding no lock while it waits" {
	coproc BATCH { THROTTLE_NOW=100 "$THROTTLE" batch 2>/dev/null; }
	# bash forgets BATCH_PID once the coprocess has ended: keep it
	pid=$BATCH_PID
	track "$pid"
	echo "consume k --limit 2/1m" >&"${BATCH[1]}"
	read -r -t 10 first <&"${BATCH[0]}"
	[ "$(field remaining "$first")" = 1 ]
	# the batch is waiting for its next line; the file is free
	run at 100 --lock-timeout 1s consume k --limit 2/1m
	[ "$status" -eq 0 ]
	echo "consume k --limit 2/1m" >&"${BATCH[1]}"
	read -r -t 10 second <&"${BATCH[0]}"
	[ "$(field allowed "$second")" = false ]
	exec {BATCH[1]}>&-
	# it ends on end of input (bash may have reaped it already)
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	run kill -0 "$pid"
	[ "$status" -ne 0 ]
}

@test "batch: a state file removed or moved aside while it runs: the batch starts afresh with the others" {
	needs_sqlite
	coproc BATCH { THROTTLE_NOW=100 "$THROTTLE" batch 2>/dev/null; }
	pid=$BATCH_PID
	track "$pid"
	ask() {
		echo "$1" >&"${BATCH[1]}"
		read -r -t 10 reply <&"${BATCH[0]}"
	}
	ask "consume k --limit 2/1h"
	[ "$(field remaining "$reply")" = 1 ]
	# removed, as the man page says starts afresh: a single call and the
	# batch now share the new file, 2 in all
	rm -f state.db state.db-wal state.db-shm
	ask "consume k --limit 2/1h"
	[ "$(field remaining "$reply")" = 1 ] || { echo "$reply"; return 1; }
	run at 100 consume k --limit 2/1h
	[ "$status" -eq 0 ]
	ask "consume k --limit 2/1h"
	[ "$(field allowed "$reply")" = false ] || { echo "$reply"; return 1; }
	# moved aside with its files: the same
	mv state.db old.db
	mv state.db-wal old.db-wal
	mv state.db-shm old.db-shm
	run at 100 consume k --limit 2/1h
	[ "$status" -eq 0 ]
	ask "consume k --limit 2/1h"
	[ "$(field remaining "$reply")" = 0 ] || { echo "$reply"; return 1; }
	# a read of a key after the file is gone reads no file, makes none
	rm -f state.db state.db-wal state.db-shm
	ask "check k --limit 2/1h --cost 0"
	[ "$(field remaining "$reply")" = 2 ] || { echo "$reply"; return 1; }
	[ ! -e state.db ]
	exec {BATCH[1]}>&-
}

@test "batch: fed without end, it lets single calls have the lock in time" {
	# with input waiting, the batch takes it all into a group (up to
	# 10000 requests) and holds the lock up to 50 ms while no one waits,
	# but ends a group after 10 ms as soon as a single call waits
	at 1 consume warm --limit 1/1s
	# the calls each is paired with: beside the batch, as busy a machine,
	# but on a file of their own (on the Redis pass there is no lock)
	other=$TMP/other.db
	[ -z "${THROTTLE_TEST_REDIS:-}" ] || other=$THROTTLE_DB
	"$THROTTLE" --db "$other" consume warm --limit 1/1s
	# more input than it can take in the test's time, in a file, so
	# there is always input waiting however the CPUs are shared
	yes 'consume b --limit 1000000000/1s' | head -n 1500000 >"$TMP/in"
	# answers counted as they come, not kept: they come by the million
	"$THROTTLE" batch <"$TMP/in" 2>"$TMP/berr" |
	    awk 'NR % 10000 == 0 { print NR; fflush() }' >"$TMP/bout" &
	track $!
	for _ in $(seq 100); do
		[ -s "$TMP/bout" ] && break
		sleep 0.05
	done
	fails=0 slow=0
	for i in $(seq 40); do
		t0=$(date +%s%N)
		"$THROTTLE" --db "$other" consume "a$i" --limit 1/1h
		t1=$(date +%s%N)
		"$THROTTLE" consume "s$i" --limit 1/1h --lock-timeout 1s 2>>"$TMP/err" || fails=$((fails + 1))
		t2=$(date +%s%N)
		# how much longer than its pair: the wait for the lock
		ms=$((((t2 - t1) - (t1 - t0)) / 1000000))
		echo "$ms" >>"$TMP/extra"
		[ "$ms" -le 20 ] || slow=$((slow + 1))
	done
	[ "$fails" -eq 0 ] || { cat "$TMP/err"; return 1; }
	[ "$slow" -le 8 ] || { echo "$slow of 40 calls took 20 ms longer than their pair:" $(cat "$TMP/extra"); return 1; }
	[ ! -s "$TMP/berr" ]
	# and the batch goes on deciding
	n1=$(tail -n 1 "$TMP/bout")
	wait_until awk -v n1="$n1" 'END { exit !($1 > n1) }' "$TMP/bout"
}

@test "batch: a line too long to answer is refused and skipped" {
	{
		printf 'consume %s --limit 1/1s\n' "$(head -c 1100000 /dev/zero | tr '\0' x)"
		echo "consume k --limit 1/1s"
	} | at 100 batch >out 2>err
	[ "$(wc -l <out)" -eq 2 ]
	[[ "$(sed -n 1p out)" == *"too long"* ]]
	[ "$(sed -n 2p out | jget allowed)" = true ]
	# one too long as the input's last line, with no newline: answered,
	# and the batch ends (it spun at 100% CPU for good)
	{
		echo "consume k2 --limit 1/1s"
		head -c 1048577 /dev/zero | tr '\0' x
	} >in
	run --separate-stderr timeout 20 "$THROTTLE" batch <in
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[0]}" == *'"allowed":true'* ]]
	[[ "${lines[1]}" == *"too long"* ]]
}

@test "batch: inspect KEY is one line however many records the key has" {
	at 100 consume k --limit 5/1m
	at 100 acquire k --concurrency 3 --ttl 1h >/dev/null
	at 100 acquire k --concurrency 3 --ttl 1h >/dev/null
	run --separate-stderr at 100 batch <<-'EOF'
		inspect k
		consume k --limit 5/1m
	EOF
	[ "$status" -eq 0 ]
	# a reader taking a line a request stays in step
	[ "${#lines[@]}" -eq 2 ]
	[ "$(field remaining "${lines[0]}")" = 4 ]
	[[ "${lines[0]}" == *'"more":[{"key":"k","lease":'*'},{"key":"k","lease":'*'}],"exit":0}' ]]
	[ "$(field remaining "${lines[1]}")" = 3 ]
	# a key with one record answers as inspect --format json does
	run --separate-stderr at 100 batch <<<"inspect j"
	at 100 consume j --limit 5/1m
	run --separate-stderr at 100 batch <<<"inspect j"
	[ "$output" = "$(at 100 inspect j --format json | sed 's/}$/,"exit":0}/')" ]
}

@test "batch: among many policies, each key finds the one a single call finds" {
	n=0
	for p in a a:b a-b a:b:c b ab a:bb z; do
		n=$((n + 1))
		at 100 policy set "$p" --limit "$n/1h"
	done
	for i in $(seq 200); do at 100 policy set "q$i" --limit 7/1m; done
	keys="a a:x a:b a:b:x a:b:c:d a-b a-b:x ab:c a:bb:c b:1 z zz q17:x q200"
	for k in $keys; do printf 'check %s\n' "$k"; done >in
	run --separate-stderr at 100 batch <in
	i=0
	for k in $keys; do
		want=$(at 100 check "$k" --format json 2>/dev/null | jget limit)
		got=$(printf '%s\n' "${lines[$i]}" | jget limit)
		[ "$got" = "$want" ] || { echo "$k: batch $got, single $want: ${lines[$i]}"; return 1; }
		i=$((i + 1))
	done
}

@test "batch: a policy changed while a batch runs governs it within a second" {
	at 100 policy set api --limit 1000/1m
	coproc B { THROTTLE_NOW=100 "$THROTTLE" batch 2>/dev/null; }
	track "$B_PID"
	echo "check api:x" >&"${B[1]}"
	read -r -t 10 first <&"${B[0]}"
	[ "$(field limit "$first")" = 1000 ] || { echo "$first"; return 1; }
	at 100 policy set api --limit 1/1h
	sleep 1.2
	echo "check api:x" >&"${B[1]}"
	read -r -t 10 second <&"${B[0]}"
	eval "exec ${B[1]}>&-"
	[ "$(field limit "$second")" = 1 ] || { echo "$second"; return 1; }
}

@test "batch: several batches on one file never admit more than the limit" {
	for w in 1 2 3 4; do
		for n in $(seq 200); do echo "consume shared --limit 300/1h"; done >"in$w"
	done
	for w in 1 2 3 4; do
		at 100 batch <"in$w" >"out$w" 2>/dev/null &
	done
	wait
	[ "$(cat out1 out2 out3 out4 | wc -l)" -eq 800 ]
	[ "$(cat out1 out2 out3 out4 | grep -c '"allowed":true')" -eq 300 ]
	[ "$(cat out1 out2 out3 out4 | grep -c '"exit":1')" -eq 500 ]
}

@test "batch: a state file that is not ours answers each request with the error, untouched" {
	needs_sqlite
	sqlite3 state.db 'CREATE TABLE t (x)'
	sum=$(sha256sum state.db)
	# a co-process reading an answer a request gets one, never nothing
	run --separate-stderr "$THROTTLE" batch <<-EOF
		consume k --limit 1/1s
		consume j --limit 1/1s
		consume --limti 1/1s
	EOF
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[0]}" == '{"key":"k","error":"'*"not a throttle state file"*'"exit":3}' ]]
	[[ "${lines[1]}" == '{"key":"j","error":"'*'"exit":3}' ]]
	[ "$(field exit "${lines[2]}")" = 2 ]
	[ "$(grep -c "not a throttle state file" <<<"$stderr")" -eq 1 ] || { echo "$stderr"; return 1; }
	[[ "$stderr" == *"the same message for 2 more requests"* ]]
	# mapped by --on-error as a single call's is
	run --separate-stderr "$THROTTLE" --on-error deny batch <<<"consume k --limit 1/1s"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == '{"key":"k","allowed":false,'*'"exit":1}' ]]
	# but not for inspect and reset, which report the store as it is:
	# exit 3 whatever --on-error says, as on their own
	run --separate-stderr "$THROTTLE" --on-error allow batch <<-EOF
		inspect k
		reset k
		consume k --limit 1/1s
	EOF
	[ "$status" -eq 3 ]
	[[ "${lines[0]}" == '{"key":"k","error":"'*"not a throttle state file"*'"exit":3}' ]]
	[[ "${lines[1]}" == '{"key":"k","error":"'*"not a throttle state file"*'"exit":3}' ]]
	[[ "${lines[2]}" == '{"key":"k","allowed":true,'*'"exit":0}' ]]
	[ "$(grep -c "allowing anyway" <<<"$stderr")" -eq 1 ] || { echo "$stderr"; return 1; }
	[ "$(sha256sum state.db)" = "$sum" ]
	[ "$(sqlite3 state.db 'SELECT count(*) FROM sqlite_schema')" = 1 ]
}

@test "batch: a line holding a NUL byte is refused, never read as cut short" {
	run --separate-stderr "$THROTTLE" batch < <(printf 'consume a\0 --limit 1000/1s\n\0consume b --limit 1/1s\nconsume c --limit 1/1s\n')
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	[ "$(field exit "${lines[0]}")" = 2 ]
	[[ "${lines[0]}" == *"NUL byte"* ]]
	[ "$(field exit "${lines[1]}")" = 2 ]
	[ "$(field exit "${lines[2]}")" = 0 ]
	run "$THROTTLE" inspect a
	[ "$status" -eq 1 ]
}

@test "batch: a full disk under standard output is named once; the decisions stand" {
	[ -w /dev/full ] || skip "needs /dev/full"
	printf 'consume a --limit 2/1m\nconsume b --limit 2/1m\n' |
		THROTTLE_NOW=1 "$THROTTLE" batch >/dev/full 2>"$TMP/err"
	[ "$(cat "$TMP/err")" = "throttle: standard output: No space left on device" ] || { cat "$TMP/err"; return 1; }
	run at 1 check a --limit 2/1m --cost 0 --format json
	[ "$(field remaining "$output")" = 1 ]
	# answers longer than the output's buffer may fail inside a group
	# and leave nothing for its last flush: the reason is kept, and said
	# once, whatever their length
	for n in $(seq 20 70); do
		yes "consume many$n --limit 1000/1m" | head -n "$n" |
			THROTTLE_NOW=1 "$THROTTLE" batch >/dev/full 2>"$TMP/err"
		[ "$(cat "$TMP/err")" = "throttle: standard output: No space left on device" ] || { echo "$n lines:"; cat "$TMP/err"; return 1; }
	done
	# a reader that left is no error worth a word
	printf 'consume a --limit 2/1m\n' | THROTTLE_NOW=1 "$THROTTLE" batch 2>"$TMP/err" | true
	[ ! -s "$TMP/err" ]
}

@test "batch: THROTTLE_FORMAT, for single calls, does not apply; --format shell is refused" {
	# a script that exports THROTTLE_FORMAT=shell to eval its calls
	run --separate-stderr env THROTTLE_FORMAT=shell "$THROTTLE" batch <<<"consume k --limit 1/1m"
	[ "$status" -eq 0 ]
	[[ "$output" == '{"key":"k","allowed":true,'*'"exit":0}' ]]
	run --separate-stderr "$THROTTLE" batch --format shell <<<"consume k --limit 1/1m"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"leave --format out"* ]]
}

@test "batch: a request refused as written still names its key, where the line gives one first" {
	run --separate-stderr "$THROTTLE" batch <<-EOF
		consume c --limti 1/1m
		consume d --limit 5/15x
		consume --limti 1/1m e
	EOF
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == '{"key":"c","error":"--limti: unknown option'*'"exit":2}' ]]
	[[ "${lines[1]}" == '{"key":"d","error":"--limit: '*'"exit":2}' ]]
	# an option first: which word is the key cannot be told
	[[ "${lines[2]}" == '{"error":'* ]]
}

@test "batch: standard input that cannot be read exits 3; THROTTLE_FORMAT does not apply; --names said as such" {
	run --separate-stderr at 1 batch <"$TMP"
	[ "$status" -eq 3 ]
	[ "$stderr" = "throttle: batch: standard input: Is a directory" ]
	run --separate-stderr env THROTTLE_FORMAT=bogus THROTTLE_NOW=1 "$THROTTLE" batch <<<'check k --limit 1/1m'
	[ "$status" -eq 0 ]
	[ "$(field exit "$output")" = 0 ]
	run --separate-stderr at 1 batch <<<'inspect a --names'
	[[ "$output" == *'"error":"inspect --names lists every key, which a batch does not; run it on its own"'* ]]
}
