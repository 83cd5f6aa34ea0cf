#!/usr/bin/env bats
# Concurrency leases: acquire, release --lease, renew, TTLs, owners that
# die, priorities with a reserve, and racing processes.

load lib

@test "seed 004: 60 acquire+release pairs, then 5 of 5 and the 6th refused" {
	for n in $(seq 60); do
		id=$("$THROTTLE" acquire k --concurrency 5)
		[ "${#id}" -eq 16 ]
		"$THROTTLE" release k --lease "$id"
	done
	for n in 1 2 3 4 5; do
		run --separate-stderr "$THROTTLE" acquire k --concurrency 5
		[ "$status" -eq 0 ]
		[[ "$output" =~ ^[0-9a-f]{16}$ ]]
	done
	run --separate-stderr "$THROTTLE" acquire k --concurrency 5
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	# one shape with consume's: what holds it, and when to retry (the
	# soonest TTL, 1h by default, less the time since: rounded up)
	[[ "$stderr" =~ ^"throttle: k has all 5 slots held (longest: lease "[0-9a-f]{16}", no owner, for "[0-9.]+"s), retry in "(1h|59m[0-9]+s)$ ]] || { echo "$stderr"; return 1; }
}

@test "acquire: json and shell output" {
	run --separate-stderr at 100 acquire k --concurrency 2 --ttl 90s --format json
	[ "$status" -eq 0 ]
	[ "$(field allowed "$output")" = true ]
	[ "$(field active "$output")" = 1 ]
	[ "$(field limit "$output")" = 2 ]
	[ "$(field expires_after "$output")" = 90 ]
	[[ "$(field lease "$output")" =~ ^\"[0-9a-f]{16}\"$ ]]
	run --separate-stderr at 100 acquire k --concurrency 2 --format shell
	eval "$output"
	[ "$THROTTLE_ALLOWED" = 1 ]
	[ "$THROTTLE_ACTIVE" = 2 ]
	[ "$THROTTLE_EXPIRES_AFTER_SECS" = 3600 ]
	run --separate-stderr at 130 acquire k --concurrency 2 --format json
	[ "$status" -eq 1 ]
	[ "$(field allowed "$output")" = false ]
	[ "$(field retry_after "$output")" = 60 ]
}

@test "release --lease frees that slot only; an unknown or freed lease exits 1" {
	a=$("$THROTTLE" acquire k --concurrency 2)
	b=$("$THROTTLE" acquire k --concurrency 2)
	run --separate-stderr "$THROTTLE" release k --lease 0000000000000000
	[ "$status" -eq 1 ]
	[[ "$stderr" == "throttle: k: no lease 0000000000000000"* ]]
	run "$THROTTLE" release k --lease "$a"
	[ "$status" -eq 0 ]
	run "$THROTTLE" release k --lease "$a"
	[ "$status" -eq 1 ]
	run "$THROTTLE" release other --lease "$b"
	[ "$status" -eq 1 ]
	run "$THROTTLE" inspect k --format json
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"\"lease\":\"$b\""* ]]
	# release without --lease keeps its meaning: give units back
	run "$THROTTLE" release k --lease "$b" --limit 1/1s
	[ "$status" -eq 2 ]
	# --cost says nothing to a lease: refused rather than ignored
	run "$THROTTLE" release k --lease "$b" --cost 2
	[ "$status" -eq 2 ]
	[[ "$output" == *"release: --lease frees one slot, whatever --cost says; leave --cost out"* ]]
}

@test "a lease ends when its TTL passes, to the microsecond" {
	at 1000 acquire k --concurrency 1 --ttl 10s
	run at 1009.999999 acquire k --concurrency 1
	[ "$status" -eq 1 ]
	run at 1010 acquire k --concurrency 1
	[ "$status" -eq 0 ]
}

@test "renew extends a live lease; a lapsed one cannot be renewed" {
	id=$(at 2000 acquire k --concurrency 1 --ttl 10s)
	run at 2008 renew k --lease "$id" --format json
	[ "$status" -eq 0 ]
	[ "$(field expires_after "$output")" = 10 ]
	run at 2015 acquire k --concurrency 1
	[ "$status" -eq 1 ]
	run at 2016 renew k --lease "$id" --ttl 1m --format json
	[ "$(field expires_after "$output")" = 60 ]
	run --separate-stderr at 2077 renew k --lease "$id"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"no live lease $id"* ]]
	run "$THROTTLE" renew k
	[ "$status" -eq 2 ]
}

@test "--ttl 0 means no expiry and needs --owner" {
	run "$THROTTLE" acquire k --concurrency 1 --ttl 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--ttl: 0 (no expiry) needs --owner"* ]]
	sleep 300 3>&- &
	pid=$!
	track "$pid"
	run at 1 acquire k --concurrency 1 --ttl 0 --owner "$pid" --format json
	[ "$status" -eq 0 ]
	[ "$(field expires_after "$output")" = null ]
	run at 999999999 acquire k --concurrency 1
	[ "$status" -eq 1 ]
	kill "$pid"
}

@test "renew --ttl 0 on a lease with no owner is refused, and the lease is left as it was" {
	id=$(at 100 acquire k --concurrency 1)
	run --separate-stderr at 101 renew k --lease "$id" --ttl 0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--ttl: 0 (no expiry) needs a lease with an owner"* ]] || { echo "$stderr"; return 1; }
	run --separate-stderr at 102 inspect k --format json
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	[ "$(field expires_after "$output")" = 3598 ]
}

@test "a lease whose owner is killed heals at the next acquire" {
	sleep 300 3>&- &
	pid=$!
	track "$pid"
	"$THROTTLE" acquire k --concurrency 1 --owner "$pid"
	run "$THROTTLE" acquire k --concurrency 1
	[ "$status" -eq 1 ]
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	run "$THROTTLE" acquire k --concurrency 1
	[ "$status" -eq 0 ]
}

@test "an owner killed but not yet reaped (a zombie) holds no slot" {
	# the inner sleep's parent becomes the outer one, which never reaps
	# it: killed, it stays a zombie while the outer sleep lives
	sh -c 'sleep 300 & echo $! >"$0"; exec sleep 300' "$TMP/zpid" 3>&- &
	track $!
	for _ in $(seq 50); do [ -s "$TMP/zpid" ] && break; sleep 0.1; done
	z=$(cat "$TMP/zpid")
	"$THROTTLE" acquire k --concurrency 1 --owner "$z"
	run "$THROTTLE" acquire k --concurrency 1
	[ "$status" -eq 1 ]
	kill -9 "$z"
	for _ in $(seq 50); do
		[ "$(awk '{print $3}' "/proc/$z/stat" 2>/dev/null)" = Z ] && break
		sleep 0.1
	done
	[ "$(awk '{print $3}' "/proc/$z/stat")" = Z ]
	run "$THROTTLE" acquire k --concurrency 1
	[ "$status" -eq 0 ]
}

@test "a reused pid is not mistaken for the owner: start time must match" {
	needs_sqlite
	sleep 300 3>&- &
	pid=$!
	track "$pid"
	"$THROTTLE" acquire k --concurrency 1 --owner "$pid"
	# the same pid with another start time: a different process
	lease_edit 6 '$0 - 1'
	run "$THROTTLE" acquire k --concurrency 1
	[ "$status" -eq 0 ]
	kill "$pid"
}

@test "an owner's host that rebooted, or another host, is judged rightly" {
	needs_sqlite
	sleep 300 3>&- &
	pid=$!
	track "$pid"
	"$THROTTLE" acquire a --concurrency 1 --owner "$pid"
	"$THROTTLE" acquire b --concurrency 1 --owner "$pid"
	# a: this host, an earlier boot: the owner is gone
	lease_edit 7 '"00000000-0000-0000-0000-0000000000ff"' a
	# b: another host: its owner cannot be checked here, so it holds
	lease_edit 8 '"elsewhere"' b
	run "$THROTTLE" acquire a --concurrency 1
	[ "$status" -eq 0 ]
	run "$THROTTLE" acquire b --concurrency 1
	[ "$status" -eq 1 ]
	kill "$pid"
}

@test "--owner must name a live process" {
	run "$THROTTLE" acquire k --concurrency 1 --owner 2147483646
	[ "$status" -eq 2 ]
	[[ "$output" == *"--owner: no process 2147483646 on this host"* ]]
	run "$THROTTLE" acquire k --concurrency 1 --owner abc
	[ "$status" -eq 2 ]
}

@test "reserve: 8 normal of 10 with --reserve 2, then only critical" {
	L=(--concurrency 10 --reserve 2)
	for n in $(seq 8); do "$THROTTLE" acquire f "${L[@]}" >/dev/null; done
	run --separate-stderr "$THROTTLE" acquire f "${L[@]}"
	[ "$status" -eq 1 ]
	[[ "$stderr" == "throttle: f has 8 of 10 slots held and the rest reserved for critical work (longest: lease "* ]]
	run "$THROTTLE" acquire f "${L[@]}" --priority low
	[ "$status" -eq 1 ]
	run "$THROTTLE" acquire f "${L[@]}" --priority high
	[ "$status" -eq 1 ]
	run "$THROTTLE" acquire f "${L[@]}" --priority critical
	[ "$status" -eq 0 ]
	run "$THROTTLE" acquire f "${L[@]}" --priority critical
	[ "$status" -eq 0 ]
	run "$THROTTLE" acquire f "${L[@]}" --priority critical
	[ "$status" -eq 1 ]
}

@test "reserve as a percentage rounds up; a reserve above N is refused" {
	for n in $(seq 7); do "$THROTTLE" acquire p --concurrency 10 --reserve 25% >/dev/null; done
	run "$THROTTLE" acquire p --concurrency 10 --reserve 25%
	[ "$status" -eq 1 ]
	run "$THROTTLE" acquire q --concurrency 10 --reserve 11
	[ "$status" -eq 2 ]
	run "$THROTTLE" acquire q --concurrency 10 --reserve 101%
	[ "$status" -eq 2 ]
	run "$THROTTLE" acquire q --concurrency 10 --priority urgent
	[ "$status" -eq 2 ]
	run "$THROTTLE" acquire q
	[ "$status" -eq 2 ]
	[[ "$output" == *"--concurrency is missing"* ]]
}

@test "a reserve of every slot leaves them all to critical work; --owner 0 is no process" {
	run "$THROTTLE" acquire p --concurrency 2 --reserve 2
	[ "$status" -eq 1 ]
	run "$THROTTLE" acquire p --concurrency 2 --reserve 2 --priority critical
	[ "$status" -eq 0 ]
	run "$THROTTLE" acquire p --concurrency 2 --reserve 100% --priority critical
	[ "$status" -eq 0 ]
	run "$THROTTLE" acquire p --concurrency 2 --reserve 2 --priority critical
	[ "$status" -eq 1 ]
	# work that no slot is ever kept for is refused at once, --wait or
	# not, and told so (never: retry_after null)
	for w in "" --wait "--wait 1h"; do
		run timeout 20 "$THROTTLE" acquire n --concurrency 2 --reserve 100% --priority high $w
		[ "$status" -eq 1 ] || { echo "$w: $status $output"; return 1; }
		[ "$output" = "throttle: n keeps all 2 of its slots for critical work (--reserve), so high work never takes one; give --priority critical, or a smaller --reserve" ]
	done
	run --separate-stderr timeout 20 "$THROTTLE" --format json acquire p --concurrency 2 --reserve 2 --wait
	[ "$status" -eq 1 ]
	[ "$output" = '{"key":"p","allowed":false,"active":2,"limit":2,"retry_after":null}' ]
	run timeout 20 "$THROTTLE" run n --concurrency 2 --reserve 2 --wait -- echo ran
	[ "$status" -eq 75 ]
	[ "$output" = "throttle: n keeps all 2 of its slots for critical work (--reserve), so normal work never takes one; give --priority critical, or a smaller --reserve; not running echo" ]
	run "$THROTTLE" acquire o --concurrency 2 --owner 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--owner: '0' is not a process id"* ]]
}

@test "inspect lists live leases with owner, host, age and expiry" {
	at 100 consume k --limit 1/1m
	id=$(at 100 acquire k --concurrency 3 --ttl 1h --priority high)
	run at 160 inspect k
	[ "$status" -eq 0 ]
	[ "${lines[1]}" = "gcra           1/1m         1          -          -          -          1       k" ]
	[ "${lines[2]}" = "k lease=$id priority=high owner=none host=$(hostname) age=1m expires_after=59m" ]
	# no owner is none to a script too: json null, never a pid 0
	run --separate-stderr at 160 inspect k --format json
	[[ "${lines[1]}" == *'"priority":"high","owner":null,"host":'* ]]
	run at 4000 inspect k
	[ "${#lines[@]}" -eq 2 ]
	run at 160 inspect --format json
	[ "${#lines[@]}" -eq 2 ]
	run at 160 inspect only-leases
	[ "$status" -eq 1 ]
}

@test "20 processes racing for 3 slots never hold more than 3 at once" {
	: >"$TMP/log"
	for p in $(seq 20); do
		(
			for n in 1 2 3; do
				if id=$("$THROTTLE" acquire slots --concurrency 3 2>/dev/null); then
					echo "+ $id" >>"$TMP/log"
					sleep 0.05
					echo "- $id" >>"$TMP/log"
					"$THROTTLE" release slots --lease "$id"
				fi
			done
		) &
	done
	wait
	# replay the log: holders may never exceed 3
	max=$(awk '$1 == "+" { n++; if (n > m) m = n } $1 == "-" { n-- } END { print m + 0 }' "$TMP/log")
	[ "$max" -le 3 ]
	[ "$(grep -c '^+' "$TMP/log")" -ge 3 ]
	run "$THROTTLE" inspect slots
	[ "$status" -eq 1 ]
}

@test "--lease: an id acquire never prints is a lease not held (exit 1), and is not echoed" {
	id=$(at 1 acquire k --concurrency 1)
	for l in $'nope\x1b[31m' ABCDEF0123456789 12345 "$id "; do
		run --separate-stderr at 1 release k --lease "$l"
		[ "$status" -eq 1 ] || { echo "$l: $status"; return 1; }
		[ "$stderr" = "throttle: k: no such lease: --lease takes the 16 lower-case hex digits acquire printed" ]
		run --separate-stderr at 1 renew k --lease "$l" --format json
		[ "$status" -eq 1 ]
		[ "$output" = '{"key":"k"}' ]
	done
	# and the lease held is untouched
	run at 1 release k --lease "$id"
	[ "$status" -eq 0 ]
}

@test "a host without a boot id: a live owner holds its slot, on every store" {
	# a /proc with the owner's stat but no boot id, as in some containers
	sleep 300 3>&- &
	pid=$!
	track "$pid"
	mkdir -p "$TMP/fake/$pid"
	cp "/proc/$pid/stat" "$TMP/fake/$pid/stat"
	THROTTLE_PROC=$TMP/fake "$THROTTLE" acquire k --concurrency 1 --owner "$pid" >/dev/null
	run env THROTTLE_PROC="$TMP/fake" "$THROTTLE" acquire k --concurrency 1
	[ "$status" -eq 1 ]
	run env THROTTLE_PROC="$TMP/fake" "$THROTTLE" inspect k --format json
	[ "$status" -eq 0 ]
	[[ "$output" == *'"owner":'"$pid"* ]]
	# a lease taken where the boot id could be read, judged where it
	# cannot: nothing there tells that its owner is gone
	"$THROTTLE" acquire m --concurrency 1 --owner "$pid" >/dev/null
	mkdir "$TMP/empty"
	run env THROTTLE_PROC="$TMP/empty" "$THROTTLE" acquire m --concurrency 1
	[ "$status" -eq 1 ]
}

@test "an owner /proc does not show (hidepid) holds its slot, for acquire and run" {
	needs_sqlite
	needs_unshare
	command -v setpriv >/dev/null || skip "needs setpriv (util-linux)"
	unpriv "$TMP/u"
	# two users of one group share a file; the second's /proc hides the
	# first's processes, as hidepid=invisible (ProtectProc) does
	chmod 2770 "$TMP/u"
	chgrp 4242 "$TMP/u"
	a=(setpriv --reuid=1234 --regid=4242 --groups=4242 --)
	b=(setpriv --reuid=1235 --regid=4242 --groups=4242 --)
	db=$TMP/u/s.db
	"${a[@]}" "$UTHROTTLE" consume seed --limit 1/1h --db "$db"
	chmod g+w "$db" "$db-wal" "$db-shm"
	"${a[@]}" sleep 300 3>&- &
	owner=$!
	track "$owner"
	"${a[@]}" "$UTHROTTLE" acquire j --concurrency 1 --owner "$owner" --ttl 0 --db "$db" >/dev/null
	"${a[@]}" "$UTHROTTLE" run r --concurrency 1 --db "$db" -- sleep 300 3>&- &
	wrapper=$!
	track "$wrapper"
	held() { "${a[@]}" "$UTHROTTLE" inspect r --db "$db" --format json 2>/dev/null | grep -q '"lease":'; }
	wait_until held
	hidden() {
		unshare -m sh -c 'mount --make-rprivate / && mount -t proc -o hidepid=invisible proc /proc && exec "$@"' sh "${b[@]}" "$UTHROTTLE" --db "$db" "$@"
	}
	run --separate-stderr hidden acquire j --concurrency 1
	[ "$status" -eq 1 ] || { echo "$status $output $stderr"; return 1; }
	run --separate-stderr hidden run r --concurrency 1 -- echo ran
	[ "$status" -eq 75 ] || { echo "$status $output $stderr"; return 1; }
	[ "$output" = "" ]
	run --separate-stderr hidden inspect j --format json
	[[ "$output" == *'"owner":'"$owner"* ]] || { echo "$output"; return 1; }
	# an owner that is gone is still told apart from one hidden
	kill "$owner"
	wait "$owner" 2>/dev/null || true
	run --separate-stderr hidden acquire j --concurrency 1
	[ "$status" -eq 0 ] || { echo "$status $stderr"; return 1; }
}

@test "a stored lease or shed state out of range is refused, exit 3" {
	needs_sqlite
	at 1 acquire c --concurrency 2 >/dev/null
	# a lease's first line is its priority (0-2)
	sqlite3 state.db "UPDATE rec SET data = CAST('9' AS BLOB) ||
	    substr(data, instr(data, X'0A')) WHERE kind = 3"
	run --separate-stderr at 1 acquire c --concurrency 2
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the key 'c' has a lease out of range"* ]]
	at 1 shed s --utilization 0.5 -q || true
	# a shedder is "AMOUNT CHANGED"
	sqlite3 state.db "UPDATE rec SET data = CAST('999999999999999999 ' ||
	    substr(CAST(data AS TEXT), instr(CAST(data AS TEXT), ' ') + 1)
	    AS BLOB) WHERE kind = 4"
	run --separate-stderr at 1 shed s --utilization 0.5
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the key 's' has a shedder state out of range"* ]]
}
