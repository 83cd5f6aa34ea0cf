#!/usr/bin/env bats
# The Redis store through Sentinel: a master, a replica and three
# sentinels on loopback ports, started once for this file
# (tests/redis-fleet) and stopped at its end.  Each test works under a
# prefix of its own; a failover swaps the master and the replica.

load lib

setup_file() { fleet_start sentinel; }

teardown_file() { fleet_stop; }

setup() {
	fleet_setup
	S1=$(fleet_port s1)
	S2=$(fleet_port s2)
	S3=$(fleet_port s3)
}

# master: the port of the master the sentinels name now.
master() { redis-cli -p "$S1" sentinel get-master-addr-by-name mymaster | tail -n 1; }

# other: the port of the one that is not the master.
other() {
	local m
	m=$(master)
	grep -E '^(master|replica) ' "$FLEET/ports" | awk -v m="$m" '$2 != m { print $2 }'
}

role() { redis-cli -p "$1" role | head -n 1; }

# failover: a SENTINEL FAILOVER, waited for until every sentinel names the
# new master, which says it is one, and the old one is its replica.
failover() {
	local old=$1 new
	redis-cli -p "$S1" sentinel failover mymaster >/dev/null
	for _ in $(seq 300); do
		new=$(master)
		if [ "$new" != "$old" ] && [ "$(role "$new")" = master ] &&
		    [ "$(role "$old")" = slave ] &&
		    [ "$(redis-cli -p "$S2" sentinel get-master-addr-by-name mymaster | tail -n 1)" = "$new" ] &&
		    [ "$(redis-cli -p "$S3" sentinel get-master-addr-by-name mymaster | tail -n 1)" = "$new" ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "no failover in 30s"
	return 1
}

# in_sync: the replica has what the master has (WAIT on the master).
in_sync() {
	for _ in $(seq 100); do
		[ "$(redis-cli -p "$(master)" wait 1 100)" -ge 1 ] && return 0
	done
	return 1
}

@test "sentinel: decisions, policies, leases and gc go to the master Sentinel names" {
	m=$(master)
	waits=$(redis-cli -p "$m" info commandstats | tr -d '\r' |
	    sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p')
	for n in 1 2 3; do at 1000 consume k --limit 3/60s; done
	run --separate-stderr at 1000 consume k --limit 3/60s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 20 ]
	[ "$(redis-cli -p "$m" exists "$PFX{k}")" = 1 ]
	# every write waited for a replica to have it (WAIT 1): 3 writes,
	# besides the WAIT 0 0 each of the 4 calls checks it may run with
	now=$(redis-cli -p "$m" info commandstats | tr -d '\r' |
	    sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p')
	[ $((now - ${waits:-0})) -eq 7 ]
	[ "$(redis-cli -p "$(other)" exists "$PFX{k}")" = 1 ]
	at 1000 policy set login --limit 2/1m --lockout 10m
	run at 1000 policy list
	[ "$output" = "login --limit 2/1m --lockout 10m" ]
	at 1000 consume login:eve
	at 1000 consume login:eve
	run at 1000 consume login:eve
	[ "$status" -eq 1 ]
	run at 1100 consume login:eve
	[[ "$output" == *"locked out"* ]]
	lease=$(at 1000 acquire job --concurrency 1 --ttl 1m)
	run at 1000 acquire job --concurrency 1 --ttl 1m
	[ "$status" -eq 1 ]
	run at 2000 gc --format json
	[ "$output" = '{"keys":1,"leases":1,"lockouts":1,"shedders":0}' ]
	run at 2000 release job --lease "$lease"
	[ "$status" -eq 1 ]
}

@test "sentinel: a wrong master name is a misconfiguration; no sentinel answering is an outage" {
	run --separate-stderr "$THROTTLE" --db "redis+sentinel://127.0.0.1:$S1/nosuch" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"Sentinel knows no master named 'nosuch'; check the name"* ]]
	# the first sentinel given is down: the next one answers
	dead=$((S3 + 5))
	run "$THROTTLE" --db "redis+sentinel://127.0.0.1:$dead,127.0.0.1:$S2/mymaster?prefix=$PFX" consume k --limit 1/1s
	[ "$status" -eq 0 ]
	# none answers: an outage, which --on-error decides
	run --separate-stderr "$THROTTLE" --db "redis+sentinel://127.0.0.1:$dead/mymaster" --lock-timeout 1s consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"cannot connect to Sentinel 127.0.0.1:$dead"* ]]
	# at once, as a server or a cluster that cannot be reached is: it
	# took the whole lock timeout, asking again and again
	s=$(date +%s%N)
	run "$THROTTLE" --db "redis+sentinel://127.0.0.1:$dead/mymaster" --lock-timeout 3s --on-error allow consume k --limit 1/1s
	took=$((($(date +%s%N) - s) / 1000000))
	[ "$status" -eq 0 ]
	[ "$took" -lt 1500 ] || { echo "took $took ms"; return 1; }
	# and that takes --lock-timeout once, not once for the policy lookup
	# and again for the decision
	s=$(date +%s%N)
	run "$THROTTLE" --db "redis+sentinel://127.0.0.1:$dead/mymaster" --lock-timeout 1s run j --limit 1/1s -- true
	[ "$status" -eq 3 ]
	[ $((($(date +%s%N) - s) / 1000000)) -lt 1800 ]
	# a sentinel that hangs leaves the next its time: the call ends well
	# within the lock timeout, decided
	kill -STOP "$(cat "$FLEET/s1/pid")"
	s=$(date +%s%N)
	run "$THROTTLE" --db "redis+sentinel://127.0.0.1:$S1,127.0.0.1:$S2/mymaster?prefix=$PFX" --lock-timeout 3s consume hung --limit 1/1s
	took=$((($(date +%s%N) - s) / 1000000))
	# a batch whose sentinel hangs: its first group waits the lock
	# timeout once (the open's), not once more for itself
	s=$(date +%s%N)
	run2=$(printf 'consume hung2 --limit 1/1s\n' | "$THROTTLE" --db "redis+sentinel://127.0.0.1:$S1/mymaster?prefix=$PFX" --lock-timeout 1s batch 2>/dev/null) || true
	took2=$((($(date +%s%N) - s) / 1000000))
	kill -CONT "$(cat "$FLEET/s1/pid")"
	[ "$status" -eq 0 ]
	[ "$took" -lt 2500 ] || { echo "took $took ms"; return 1; }
	[[ "$run2" == *'"exit":3'* ]] || { echo "$run2"; return 1; }
	[ "$took2" -lt 1800 ] || { echo "batch took $took2 ms"; return 1; }
	# a data node given as a sentinel, a sentinel as a server: told so
	run --separate-stderr "$THROTTLE" --db "redis+sentinel://127.0.0.1:$(master)/mymaster" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"does not know SENTINEL: it is no Sentinel"* ]]
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$S1" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"is the server a Sentinel? give --db redis+sentinel://"* ]]
	# a replica given as the server refuses the write: never an outage
	run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$(other)" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the server is a replica; give --db the master's address, or redis+sentinel://"* ]]
}

@test "sentinel: a user the master refuses WAIT or ROLE is a misconfiguration, never failed open" {
	m=$(master)
	for cmd in wait role; do
		redis-cli -p "$m" acl setuser "no$cmd" on '>pw' '~*' '+@all' "-$cmd" >/dev/null
		redis-cli -p "$(other)" acl setuser "no$cmd" on '>pw' '~*' '+@all' "-$cmd" >/dev/null
		run --separate-stderr "$THROTTLE" --db "redis+sentinel://no$cmd:pw@127.0.0.1:$S1/mymaster?prefix=$PFX" \
		    --on-error allow --lock-timeout 2s consume k --limit 5/1h
		[ "$status" -eq 3 ] || { echo "$cmd: $status $stderr"; return 1; }
		[[ "$stderr" == *"NOPERM"*"grant the user the commands throttle runs"* ]]
		redis-cli -p "$m" acl deluser "no$cmd" >/dev/null
		redis-cli -p "$(other)" acl deluser "no$cmd" >/dev/null
	done
}

@test "sentinel: a write no replica confirms is never told allowed" {
	r=$(other)
	pid=$(cat "$FLEET/replica/pid")
	[ "$r" = "$(grep '^replica ' "$FLEET/ports" | cut -d' ' -f2)" ] || pid=$(cat "$FLEET/master/pid")
	kill -STOP "$pid"
	run --separate-stderr "$THROTTLE" consume k --limit 5/1h --lock-timeout 1s
	kill -CONT "$pid"
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"no replica confirmed the write in time, so a failover could lose it: not told as decided"* ]]
	in_sync
	run "$THROTTLE" consume k --limit 5/1h --format json
	[ "$status" -eq 0 ]
}

@test "sentinel: a failover while 8 processes consume: none over-admits, none hangs, every exit is 0, 1 or 3" {
	in_sync
	old=$(master)
	for w in $(seq 8); do
		(
			set +e
			while [ ! -e "$TMP/stop" ]; do
				s=$(date +%s%N)
				"$THROTTLE" consume f --limit 300/1d --lock-timeout 2s >/dev/null 2>>"$TMP/err.$w"
				rc=$?
				echo "$rc $((($(date +%s%N) - s) / 1000000))" >>"$TMP/calls"
			done
		) 3>&- &
		track $!
	done
	sleep 0.5
	failover "$old"
	sleep 1
	touch "$TMP/stop"
	wait
	# (a hang is a call far past its 2s: the 3s more are for a process
	# start and exit on a loaded machine, under ASan too)
	run awk '$1 != 0 && $1 != 1 && $1 != 3 || $2 > 5000' "$TMP/calls"
	[ -z "$output" ] || { echo "$output"; sort -u "$TMP"/err.* | head -5; return 1; }
	allowed=$(grep -c '^0 ' "$TMP/calls")
	failed=$(grep -c '^3 ' "$TMP/calls" || true)
	echo "calls: $(wc -l <"$TMP/calls"), allowed: $allowed, failed: $failed"
	[ "$allowed" -le 300 ]
	[ "$allowed" -ge 1 ]
	# the new master has every allowed decision
	run "$THROTTLE" inspect f --format json
	left=$(field remaining "$output")
	[ "$left" -le $((300 - allowed)) ]
	[ "$left" -ge $((300 - allowed - failed - 1)) ]
	[ "$(redis-cli -p "$(master)" exists "$PFX{f}")" = 1 ]
}

@test "sentinel: a batch on the old master follows the failover to the new one" {
	in_sync
	old=$(master)
	coproc BATCH { "$THROTTLE" batch 2>"$TMP/batch.err"; }
	track "$BATCH_PID"
	ask() {
		echo "$1" >&"${BATCH[1]}"
		read -r -t 20 line <&"${BATCH[0]}"
		echo "$line"
	}
	[[ "$(ask 'consume b --limit 5/1h')" == *'"remaining":4'* ]]
	failover "$old"
	# the old master is a replica now, and refuses the write (READONLY):
	# the batch asks Sentinel again, and decides on the new master, once
	# the old one has caught up with it (until a replica has a write,
	# it is not told as decided)
	in_sync
	answer=$(ask 'consume b --limit 5/1h')
	[[ "$answer" == *'"remaining":3'* ]] || { echo "$answer"; cat "$TMP/batch.err"; return 1; }
	[ "$(redis-cli -p "$(master)" hexists "$PFX{b}" k0)" = 1 ]
	[ "$(master)" != "$old" ]
	exec {BATCH[1]}>&-
}

@test "README: the redis+sentinel:// URL, pointed at these sentinels, shares one limit" {
	# doc ce8d634abc65
	line=$(doc ce8d634abc65 | grep 'redis+sentinel://')
	line=${line//10.0.0.21:26379,10.0.0.22:26379/127.0.0.1:$S2,127.0.0.1:$S3}
	line=${line//prefix=ci:/prefix=$PFX}
	eval "$line"
	[ "$THROTTLE_DB" = "redis+sentinel://127.0.0.1:$S2,127.0.0.1:$S3/mymaster?prefix=$PFX" ]
	for n in 1 2 3; do "$THROTTLE" run deploy --limit 3/1h -- true; done
	run "$THROTTLE" run deploy --limit 3/1h -- true
	[ "$status" -eq 75 ]
	[ "$(redis-cli -p "$(master)" exists "$PFX{deploy}")" = 1 ]
}
