#!/usr/bin/env bats
# The Redis store on a Redis Cluster: three masters on loopback ports,
# started once for this file (tests/redis-fleet) and stopped at its end.
# Each test works under a prefix of its own.  (The whole suite also runs a
# third time with every key on a cluster: tests/run.)

load lib

setup_file() { fleet_start cluster; }

teardown_file() { fleet_stop; }

setup() {
	fleet_setup
	M1=$(fleet_port m1)
	M2=$(fleet_port m2)
	M3=$(fleet_port m3)
}

# slot KEY: the hash slot of throttle KEY's hash under this test's prefix.
slot() { redis-cli -p "$M1" cluster keyslot "$PFX{$1}"; }

# owner SLOT: the port of the master that serves SLOT now.
owner() {
	redis-cli -p "$M1" cluster nodes | awk -v s="$1" '
	    $3 ~ /master/ {
		for (i = 9; i <= NF; i++) {
			if ($i !~ /^[0-9]+(-[0-9]+)?$/) continue
			n = split($i, r, "-"); if (n == 1) r[2] = r[1]
			if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) {
				split($2, a, "[:@]"); print a[2]
			}
		}
	    }'
}

# holder KEY: the port of the master whose data holds KEY's hash (found
# by SCAN, which no node answers with MOVED).
holder() {
	local p
	for p in "$M1" "$M2" "$M3"; do
		[ -n "$(redis-cli -p "$p" --scan --pattern "$PFX{$1}")" ] && echo "$p"
	done
	return 0
}

id_of() { redis-cli -p "$1" cluster myid; }

# moved: the MOVED and ASK replies the masters have given so far.
moved() {
	local p n=0 c
	for p in "$M1" "$M2" "$M3"; do
		for c in $(redis-cli -p "$p" info errorstats | tr -d '\r' |
		    sed -n 's/^errorstat_\(MOVED\|ASK\):count=//p'); do
			n=$((n + c))
		done
	done
	echo "$n"
}

# keys_on PORT N [NAME]: N keys (NAME1, NAME2, ...; NAME is k if not
# given) whose hash slots PORT serves.
keys_on() {
	local port=$1 want=$2 name=${3:-k} i s got=0
	for i in $(seq 1 500); do
		s=$(slot "$name$i")
		[ "$(owner "$s")" = "$port" ] || continue
		echo "$name$i"
		got=$((got + 1))
		[ "$got" -eq "$want" ] && return 0
	done
}

# set_slot SLOT FROM TO: finish moving SLOT from port FROM to port TO, its
# keys with it, as redis-cli --cluster does it one slot at a time.
set_slot() {
	local s=$1 from=$2 to=$3 keys p
	redis-cli -p "$to" cluster setslot "$s" importing "$(id_of "$from")" >/dev/null
	redis-cli -p "$from" cluster setslot "$s" migrating "$(id_of "$to")" >/dev/null
	keys=$(redis-cli -p "$from" cluster getkeysinslot "$s" 1000)
	[ -z "$keys" ] || redis-cli -p "$from" migrate 127.0.0.1 "$to" "" 0 5000 keys $keys >/dev/null
	for p in "$M1" "$M2" "$M3"; do
		redis-cli -p "$p" cluster setslot "$s" node "$(id_of "$to")" >/dev/null
	done
}

@test "cluster: keys on every master decide as on one server, each sent straight to its node" {
	before=$(moved)
	for p in "$M1" "$M2" "$M3"; do
		for k in $(keys_on "$p" 2); do
			for n in 1 2 3; do at 1000 consume "$k" --limit 3/60s; done
			run --separate-stderr at 1000 consume "$k" --limit 3/60s --format json
			[ "$status" -eq 1 ]
			[ "$(field retry_after "$output")" = 20 ]
			run at 1020 consume "$k" --limit 3/60s
			[ "$status" -eq 0 ]
			# the hash is on the master of its slot, and nowhere else
			[ "$(holder "$k")" = "$p" ]
		done
	done
	# a wrong slot would have cost a MOVED per key: none
	[ "$(moved)" = "$before" ]
	# inspect lists the keys of every master, in order
	run at 1020 inspect --names
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | wc -l)" -eq 6 ]
	[ "$output" = "$(echo "$output" | sort)" ]
	# keys with braces of their own stay one hash, on the right node
	for k in 'a{b}c' '}x{' '{}' '{{'; do
		at 1000 consume "$k" --limit 1/1h
		[ "$(holder "$k")" = "$(owner "$(slot "$k")")" ]
	done
	[ "$(moved)" = "$before" ]
}

@test "cluster: a policy with a compound limit and a lockout governs keys on every master" {
	run at 1000 policy set login --limit 3/1m --limit 5/1h --lockout 10m
	[ "$status" -eq 0 ]
	run at 1000 policy list
	[ "$output" = "login --limit 3/1m --limit 5/1h --lockout 10m" ]
	for p in "$M1" "$M2" "$M3"; do
		k=$(keys_on "$p" 1 login:)
		[ "$(owner "$(slot "$k")")" = "$p" ]
		for n in 1 2 3; do at 1000 consume "$k"; done
		run at 1000 consume "$k"
		[ "$status" -eq 1 ]
		run at 1300 consume "$k"
		[ "$status" -eq 1 ]
		[[ "$output" == *"locked out"* ]]
		run at 1000 inspect "$k" --locked
		[ "$status" -eq 0 ]
	done
}

@test "cluster: 20 racing processes on one key admit exactly the limit, on each master" {
	for p in "$M1" "$M2" "$M3"; do
		k=$(keys_on "$p" 1)
		for i in $(seq 20); do
			(set +e; "$THROTTLE" consume "$k" --limit 7/1h >/dev/null 2>>"$TMP/err"; echo $? >>"$TMP/rc.$p") &
			track $!
		done
	done
	wait
	for p in "$M1" "$M2" "$M3"; do
		[ "$(grep -c '^0$' "$TMP/rc.$p")" -eq 7 ]
		[ "$(grep -c '^1$' "$TMP/rc.$p")" -eq 13 ]
	done
}

@test "cluster: batch decides keys on every master, a group per hash slot" {
	for round in 1 2; do
		for i in $(seq 30); do echo "consume k$i --limit 1/1h"; done
	done >lines
	run --separate-stderr at 1000 batch <lines
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep -c '"allowed":true')" -eq 30 ]
	[ "$(echo "$output" | grep -c '"allowed":false')" -eq 30 ]
	# two requests of one slot ({t}a and {t}b share it) share a group
	printf 'consume {t}a --limit 2/1h\nconsume {t}b --limit 2/1h\nconsume {t}a --limit 2/1h\n' >same
	run --separate-stderr at 1000 batch <same
	[ "$(echo "$output" | grep -c '"allowed":true')" -eq 3 ]
	[ "$(holder '{t}a')" = "$(holder '{t}b')" ]
	run at 1000 inspect --names
	[ "$(echo "$output" | wc -l)" -eq 32 ]
}

@test "cluster: gc forgets ended leases and rests keys on every master" {
	for p in "$M1" "$M2" "$M3"; do
		for k in $(keys_on "$p" 2); do
			at 1000 acquire "$k" --concurrency 2 --ttl 1m --format json >/dev/null
		done
	done
	at 1000 consume keep --limit 1/1d
	run at 2000 gc --format json
	[ "$status" -eq 0 ]
	[ "$output" = '{"keys":0,"leases":6,"lockouts":0,"shedders":0}' ]
	run at 2000 inspect --names
	[ "$output" = keep ]
}

@test "cluster: a slot that moves under a running batch is followed (MOVED), and a migrating one too (ASK)" {
	coproc BATCH { "$THROTTLE" batch 2>"$TMP/batch.err"; }
	track "$BATCH_PID"
	ask() {
		echo "$1" >&"${BATCH[1]}"
		read -r -t 10 line <&"${BATCH[0]}"
		echo "$line"
	}
	[[ "$(ask 'consume {m}a --limit 5/1h')" == *'"allowed":true'* ]]
	s=$(slot '{m}a')
	from=$(owner "$s")
	to=$M1
	[ "$from" != "$M1" ] || to=$M2
	before=$(moved)
	# the slot moves, keys and all: the batch's map is out of date
	set_slot "$s" "$from" "$to"
	[[ "$(ask 'consume {m}a --limit 5/1h')" == *'"remaining":3'* ]]
	[ "$(holder '{m}a')" = "$to" ]
	[ "$(moved)" -gt "$before" ]
	# now the slot is on its way back: a key the old node lacks is asked
	# for on the new one (ASK), a key it has is served where it is
	redis-cli -p "$from" cluster setslot "$s" importing "$(id_of "$to")" >/dev/null
	redis-cli -p "$to" cluster setslot "$s" migrating "$(id_of "$from")" >/dev/null
	before=$(moved)
	[[ "$(ask 'consume {m}b --limit 5/1h')" == *'"remaining":4'* ]]
	[ "$(holder '{m}b')" = "$from" ]
	[[ "$(ask 'consume {m}a --limit 5/1h')" == *'"remaining":2'* ]]
	[ "$(holder '{m}a')" = "$to" ]
	[ "$(moved)" -gt "$before" ]
	# and a single call during the move reads and writes the moved key
	# where it is, with ASKING before its commit
	run "$THROTTLE" consume '{m}b' --limit 5/1h --format json
	[ "$status" -eq 0 ]
	[ "$(field remaining "$output")" = 3 ]
	set_slot "$s" "$to" "$from"
	[ "$(holder '{m}a')" = "$from" ]
	[[ "$(ask 'consume {m}a --limit 5/1h')" == *'"remaining":1'* ]]
	exec {BATCH[1]}>&-
}

@test "cluster: one batch group whose keys a migrating slot has split between two nodes is decided, in time" {
	"$THROTTLE" consume '{s}a' --limit 5/1h >/dev/null
	s=$(slot '{s}a')
	from=$(owner "$s")
	to=$M1
	[ "$from" != "$M1" ] || to=$M2
	# {s}a stays on the old node, {s}new is made on the new one (ASK):
	# one slot, so one group, but no MULTI can hold both
	redis-cli -p "$to" cluster setslot "$s" importing "$(id_of "$from")" >/dev/null
	redis-cli -p "$from" cluster setslot "$s" migrating "$(id_of "$to")" >/dev/null
	for order in "a new" "new2 a"; do
		set -- $order
		run --separate-stderr timeout 20 "$THROTTLE" --lock-timeout 2s batch <<-EOF
		consume {s}$1 --limit 5/1h
		consume {s}$2 --limit 5/1h
		EOF
		[ "$status" -eq 0 ] || { echo "$order: $status $stderr"; return 1; }
		[ "${#lines[@]}" -eq 2 ]
		[[ "${lines[0]}" == *'"key":"{s}'"$1"'"'*'"allowed":true'* ]] || { echo "${lines[0]}"; return 1; }
		[[ "${lines[1]}" == *'"key":"{s}'"$2"'"'*'"allowed":true'* ]] || { echo "${lines[1]}"; return 1; }
	done
	[ "$(holder '{s}a')" = "$from" ]
	[ "$(holder '{s}new')" = "$to" ]
	# a user whose ACL leaves out ASKING: a misconfiguration, exit 3
	# whatever --on-error says, not a slot that keeps moving (which an
	# outage's allow would let through)
	for p in "$M1" "$M2" "$M3"; do
		redis-cli -p "$p" acl setuser "noask$BATS_TEST_NUMBER" on '>pw' '~*' '+@all' '-asking' >/dev/null
	done
	run --separate-stderr "$THROTTLE" --db "${URL/redis+cluster:\/\//redis+cluster://noask$BATS_TEST_NUMBER:pw@}?prefix=$PFX" \
	    --lock-timeout 2s --on-error allow consume '{s}new3' --limit 5/1h
	for p in "$M1" "$M2" "$M3"; do
		redis-cli -p "$p" acl deluser "noask$BATS_TEST_NUMBER" >/dev/null
	done
	[ "$status" -eq 3 ] || { echo "$status $stderr"; return 1; }
	[[ "$stderr" == *"NOPERM"*"exit 3 whatever --on-error says"* ]] || { echo "$stderr"; return 1; }
	set_slot "$s" "$from" "$to"
}

@test "cluster: while the policies' slot moves, their hash already moved (ASK), decisions go on" {
	"$THROTTLE" policy set api --limit 2/1h
	k="${PFX}policies"
	s=$(redis-cli -p "$M1" cluster keyslot "$k")
	from=$(owner "$s")
	to=$M1
	[ "$from" != "$M1" ] || to=$M2
	redis-cli -p "$to" cluster setslot "$s" importing "$(id_of "$from")" >/dev/null
	redis-cli -p "$from" cluster setslot "$s" migrating "$(id_of "$to")" >/dev/null
	redis-cli -p "$from" migrate 127.0.0.1 "$to" "" 0 5000 keys "$k" >/dev/null
	# a key with a policy, one with none, and the policies listed: each
	# read where the hash is now, not waited out to --lock-timeout
	for n in 1 2 3; do
		run --separate-stderr timeout 20 "$THROTTLE" --lock-timeout 2s consume api --format json
		[ "$n" -eq 3 ] || { [ "$status" -eq 0 ] || { echo "$n: $status $stderr"; return 1; }; }
	done
	[ "$status" -eq 1 ] || { echo "third: $status $stderr"; return 1; }
	run --separate-stderr timeout 20 "$THROTTLE" --lock-timeout 2s consume other --limit 5/1h
	[ "$status" -eq 0 ] || { echo "$status $stderr"; return 1; }
	run --separate-stderr timeout 20 "$THROTTLE" --lock-timeout 2s policy list
	[ "$status" -eq 0 ] || { echo "$status $stderr"; return 1; }
	[[ "$output" == *api* ]]
	run --separate-stderr timeout 20 "$THROTTLE" --lock-timeout 2s batch <<-EOF
	consume api
	consume other2 --limit 5/1h
	EOF
	[ "$status" -eq 0 ] || { echo "$status $output $stderr"; return 1; }
	[[ "${lines[0]}" == *'"allowed":false'* ]] || { echo "$output"; return 1; }
	[[ "${lines[1]}" == *'"allowed":true'* ]] || { echo "$output"; return 1; }
	for p in "$M1" "$M2" "$M3"; do
		redis-cli -p "$p" cluster setslot "$s" node "$(id_of "$to")" >/dev/null
	done
}

@test "cluster: nodes that announce no endpoint (unknown-endpoint) are reached at the host asked" {
	for p in "$M1" "$M2" "$M3"; do
		redis-cli -p "$p" config set cluster-preferred-endpoint-type unknown-endpoint >/dev/null
	done
	keys=$(for p in "$M1" "$M2" "$M3"; do keys_on "$p" 1 e; done)
	for k in $keys; do
		run --separate-stderr "$THROTTLE" --lock-timeout 2s --on-error allow consume "$k" --limit 1/1h
		[ "$status" -eq 0 ] || { echo "$k: $status $stderr"; break; }
		run --separate-stderr "$THROTTLE" --lock-timeout 2s --on-error allow consume "$k" --limit 1/1h
		[ "$status" -eq 1 ] || { echo "$k again: $status $stderr"; break; }
	done
	st=$status
	run --separate-stderr "$THROTTLE" --lock-timeout 2s inspect --names
	for p in "$M1" "$M2" "$M3"; do
		redis-cli -p "$p" config set cluster-preferred-endpoint-type ip >/dev/null
	done
	[ "$st" -eq 1 ]
	[ "$status" -eq 0 ] || { echo "$status $stderr"; return 1; }
	[ "$(echo "$output" | wc -l)" -eq 3 ]
}

@test "cluster: resharding while 8 processes consume: none over-admits, none hangs, every exit is 0, 1 or 3" {
	# the key in the lowest slot among those m1 serves: redis-cli
	# --cluster reshard moves a node's slots from its lowest
	best=
	for i in $(seq 300); do
		s=$(slot "r$i")
		[ "$(owner "$s")" = "$M1" ] || continue
		if [ -z "$best" ] || [ "$s" -lt "$bs" ]; then best=r$i bs=$s; fi
	done
	lowest=$(redis-cli -p "$M1" cluster nodes | awk '/myself/ { split($9, r, "-"); print r[1] }')
	n=$((bs - lowest + 1))
	[ "$n" -ge 1 ]
	[ "$n" -le 2000 ]
	id1=$(id_of "$M1") id2=$(id_of "$M2")
	for w in $(seq 8); do
		(
			set +e
			while [ ! -e "$TMP/stop" ]; do
				s=$(date +%s%N)
				"$THROTTLE" consume "$best" --limit 150/1d --lock-timeout 2s >/dev/null 2>>"$TMP/err.$w"
				rc=$?
				echo "$rc $((($(date +%s%N) - s) / 1000000))" >>"$TMP/calls"
			done
		) 3>&- &
		track $!
	done
	sleep 0.5
	for round in 1 2 3; do
		redis-cli --cluster reshard "127.0.0.1:$M1" --cluster-from "$id1" \
		    --cluster-to "$id2" --cluster-slots "$n" --cluster-yes >/dev/null 2>&1 3>&-
		[ "$(owner "$bs")" = "$M2" ]
		sleep 0.3
		redis-cli --cluster reshard "127.0.0.1:$M1" --cluster-from "$id2" \
		    --cluster-to "$id1" --cluster-slots "$n" --cluster-yes >/dev/null 2>&1 3>&-
		[ "$(owner "$bs")" = "$M1" ]
		sleep 0.3
	done
	touch "$TMP/stop"
	wait
	# every call ended in time, with a decision or a store error
	# (a hang is a call far past its 2s: the 3s more are for a process
	# start and exit on a loaded machine, under ASan too)
	run awk '$1 != 0 && $1 != 1 && $1 != 3 || $2 > 5000' "$TMP/calls"
	[ -z "$output" ] || { echo "$output"; sort -u "$TMP"/err.* | head -5; return 1; }
	allowed=$(grep -c '^0 ' "$TMP/calls")
	echo "calls: $(wc -l <"$TMP/calls"), allowed: $allowed, redirections: $(moved)"
	[ "$allowed" -le 150 ]
	[ "$allowed" -ge 1 ]
	# what the key holds agrees: nothing was lost, nothing counted twice
	# but by a call that failed (exit 3) after its write
	failed=$(grep -c '^3 ' "$TMP/calls" || true)
	run "$THROTTLE" inspect "$best" --format json
	left=$(field remaining "$output")
	[ "$left" -le $((150 - allowed)) ]
	[ "$left" -ge $((150 - allowed - failed - 1)) ]
}

@test "cluster: misconfigurations exit 3 whatever --on-error says; a cluster out of reach may fail open" {
	# a cluster URL on a server that is no cluster node
	port=$((M3 + 5))
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	    --daemonize yes --pidfile "$TMP/p.pid" --logfile "$TMP/p.log" 3>&-
	for _ in $(seq 50); do [ -s "$TMP/p.pid" ] && break; sleep 0.1; done
	track "$(cat "$TMP/p.pid")"
	sleep 0.2
	run --separate-stderr "$THROTTLE" --db "redis+cluster://127.0.0.1:$port" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"is not a Redis Cluster node (cluster support disabled); give --db redis://HOST:PORT"* ]]
	# one server's URL on a cluster node: never taken for an outage
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$M1" --on-error allow consume "$(keys_on "$M2" 1)" --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"MOVED"*"give --db redis+cluster://HOST:PORT"* ]]
	# no node answers: an outage, which --on-error decides
	run --separate-stderr "$THROTTLE" --db "redis+cluster://127.0.0.1:$((M3 + 6))" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"cannot connect"*"allowing anyway"* ]]
	run --separate-stderr "$THROTTLE" --db "redis+cluster://127.0.0.1:$((M3 + 6))" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	# the first nodes given are down, the next answers: the cluster is
	# found, and every command works, gc and inspect (which ask a clock
	# before reading a key) too
	dead=127.0.0.1:$((M3 + 6)),127.0.0.1:$((M3 + 7))
	for u in "$dead,127.0.0.1:$M2" "127.0.0.1:$((M3 + 6)),127.0.0.1:$M2,127.0.0.1:$((M3 + 7))"; do
		export THROTTLE_DB="redis+cluster://$u?prefix=$PFX"
		run "$THROTTLE" consume k --limit 5/1h
		[ "$status" -eq 0 ] || { echo "$u: $output"; return 1; }
		run "$THROTTLE" inspect k
		[ "$status" -eq 0 ] || { echo "$u: $output"; return 1; }
		run "$THROTTLE" gc
		[ "$status" -eq 0 ] || { echo "$u: $output"; return 1; }
	done
	# a batch whose store is out of reach still answers every line: a
	# request with the store's error, a bad line as a usage error (never
	# allowed by --on-error allow)
	printf 'consume a --limit 1/1s\nbogus line\nconsume b --limit 1/1s\n' >three
	run --separate-stderr "$THROTTLE" --db "redis+cluster://$dead" --lock-timeout 300ms batch <three
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 3 ]
	[ "$(field exit "${lines[0]}")" = 3 ]
	[ "$(field key "${lines[0]}")" = '"a"' ]
	[ "$(field exit "${lines[1]}")" = 2 ]
	[ "$(field exit "${lines[2]}")" = 3 ]
	run --separate-stderr "$THROTTLE" --db "redis+cluster://$dead" --lock-timeout 300ms --on-error allow batch <three
	[ "$status" -eq 0 ]
	[ "$(field exit "${lines[0]}")" = 0 ]
	[ "$(field exit "${lines[1]}")" = 2 ]
	[ "$(field exit "${lines[2]}")" = 0 ]
	[[ "$stderr" == *"allowing anyway (--on-error allow)"* ]]
	# a misconfiguration in a batch says so, as a single call does (the
	# batch's policy lookup finds the cluster first: it is no longer
	# skipped for a request with limits of its own)
	printf 'consume %s --limit 5/1h\n' "$(keys_on "$M2" 1)" >one
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$M1?prefix=$PFX" --on-error allow batch <one
	[ "$status" -eq 3 ]
	[ "$(field exit "$output")" = 3 ]
	[[ "$stderr" == *"is a Redis Cluster node; give --db redis+cluster://HOST:PORT"*"exit 3 whatever --on-error says"* ]] || { echo "$stderr"; return 1; }
}

@test "cluster: with the policies' node out of reach, a command line's own --limit never decides without the policy" {
	run at 1000 policy set fw --limit 3/1h --algorithm fixed-window
	[ "$status" -eq 0 ]
	ps=$(owner "$(redis-cli -p "$M1" cluster keyslot "${PFX}policies")")
	for p in "$M1" "$M2" "$M3"; do
		[ "$p" = "$ps" ] || { k=$(keys_on "$p" 1 fw:); break; }
	done
	for n in 1 2 3; do at 1000 consume "$k"; done
	run at 1000 consume "$k"
	[ "$status" -eq 1 ]
	redis-cli -p "$ps" client pause 4000 all >/dev/null
	# the key's own node answers: deciding under the command line's
	# gcra 3/1h, it was allowed, and started the key afresh
	run --separate-stderr at 1000 consume "$k" --limit 3/1h --lock-timeout 300ms
	[ "$status" -eq 3 ] || { echo "$status $output $stderr"; return 1; }
	[[ "$stderr" == *"reading a policy"* ]]
	run --separate-stderr at 1000 consume "$k" --limit 3/1h --lock-timeout 300ms --on-error deny --format json
	[ "$status" -eq 1 ]
	[ "$(field allowed "$output")" = false ]
	redis-cli -p "$ps" client unpause >/dev/null
	# the policy's window still holds the key
	run --separate-stderr at 1000 consume "$k" --format json
	[ "$status" -eq 1 ]
	[ "$(field algorithm "$output")" = '"fixed-window"' ]
}

@test "cluster: redis:// on a cluster node is refused by what walks keys and policies too" {
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$M1?prefix=$PFX" --on-error allow inspect
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the server is a Redis Cluster node; give --db redis+cluster://HOST:PORT"* ]]
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$M1?prefix=$PFX" policy list
	[ "$status" -eq 3 ]
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$M1?prefix=$PFX" gc
	[ "$status" -eq 3 ]
}

@test "README: the redis+cluster:// URL, pointed at this cluster, shares one limit" {
	# doc ce8d634abc65
	line=$(doc ce8d634abc65 | grep 'redis+cluster://')
	line=${line//:secret@10.0.0.11:6379,10.0.0.12:6379/127.0.0.1:$M2,127.0.0.1:$M3}
	line=${line//prefix=ci:/prefix=$PFX}
	eval "$line"
	[ "$THROTTLE_DB" = "redis+cluster://127.0.0.1:$M2,127.0.0.1:$M3?prefix=$PFX" ]
	for n in 1 2 3; do "$THROTTLE" run deploy --limit 3/1h -- true; done
	run "$THROTTLE" run deploy --limit 3/1h -- true
	[ "$status" -eq 75 ]
	[[ "$output" == *"deploy throttled, retry in"*"; not running true"* ]]
}

@test "cluster: SIGTERM ends a call that waits out a cluster that is down, not its lock timeout" {
	command -v python3 >/dev/null || skip "needs python3 for a cluster node that answers CLUSTERDOWN"
	# one node that owns every slot and answers all else with CLUSTERDOWN:
	# the store waits and asks again (short naps) until --lock-timeout
	python3 -c 'import socket, sys, threading
def reply(c, port, args):
    if args[:2] == [b"CLUSTER", b"SLOTS"]:
        c.sendall(b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n" % port)
    else:
        c.sendall(b"-CLUSTERDOWN The cluster is down\r\n")
def serve(c, port):
    buf = b""
    while True:
        try:
            d = c.recv(65536)
        except OSError:
            d = b""
        if not d:
            c.close()
            return
        buf += d
        while buf.startswith(b"*") and b"\r\n" in buf:
            n = int(buf[1:buf.index(b"\r\n")])
            at, args = buf.index(b"\r\n") + 2, []
            for _ in range(n):
                if b"\r\n" not in buf[at:]:
                    break
                e = buf.index(b"\r\n", at)
                ln = int(buf[at + 1:e])
                if len(buf) < e + 2 + ln + 2:
                    break
                args.append(buf[e + 2:e + 2 + ln].upper())
                at = e + 2 + ln + 2
            if len(args) < n:
                break
            buf = buf[at:]
            reply(c, port, args)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c, s.getsockname()[1]), daemon=True).start()' "$TMP/down.port" 2>/dev/null 3>&- &
	track $!
	for _ in $(seq 50); do [ -s "$TMP/down.port" ] && break; sleep 0.1; done
	port=$(cat "$TMP/down.port")
	# without a signal the call waits out its lock timeout, then says so
	run --separate-stderr "$THROTTLE" --db "redis+cluster://127.0.0.1:$port" --lock-timeout 300ms consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"no node of the cluster served the key's slot for 0.3s (--lock-timeout); the last one asked: "*"CLUSTERDOWN The cluster is down" ]] || { echo "$stderr"; return 1; }
	# SIGTERM a second in, with 60 seconds of lock timeout left: the call
	# ends then, killed by the signal, as a call that does not nap is
	"$THROTTLE" --db "redis+cluster://127.0.0.1:$port" --lock-timeout 60s consume k --limit 1/1s 2>/dev/null 3>&- &
	pid=$!
	track "$pid"
	sleep 1
	kill -0 "$pid" # still waiting for the cluster
	kill -TERM "$pid"
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	rc=0
	kill -0 "$pid" 2>/dev/null && { echo "still running 5s after SIGTERM"; return 1; }
	wait "$pid" || rc=$?
	[ "$rc" -eq 143 ] || { echo "exit $rc"; return 1; }
}
