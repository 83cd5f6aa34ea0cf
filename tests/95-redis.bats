#!/usr/bin/env bats
# The Redis store: what only a server can do wrong.  (The rest of the suite
# runs on Redis too: tests/run's second pass.)  Each test starts a
# redis-server of its own on a unix socket in its folder.

load lib

setup() {
	TRACKED=()
	[ -z "${THROTTLE_TEST_REDIS:-}" ] || skip "runs in the first pass (it starts servers of its own)"
	TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/throttle-test.XXXXXX")
	cd "$TMP" || return 1
	unset THROTTLE_NOW THROTTLE_FORMAT XDG_STATE_HOME THROTTLE_TEST_REDIS
	command -v redis-server >/dev/null || skip "needs redis-server (apt-get install redis-server)"
	"$THROTTLE" --version | grep -q redis || skip "this throttle was built without Redis (make REDIS=1)"
	SOCK=$TMP/redis.sock
	export THROTTLE_DB="unix://$SOCK"
}

teardown() {
	local pid
	# what a test started besides its server (cluster nodes, clients)
	for pid in "${TRACKED[@]}"; do
		kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	TRACKED=()
	[ -n "${TMP:-}" ] || return 0
	[ -f "$TMP/redis.pid" ] && kill -CONT "$(cat "$TMP/redis.pid")" 2>/dev/null
	[ -f "$TMP/redis.pid" ] && kill "$(cat "$TMP/redis.pid")" 2>/dev/null
	for _ in $(seq 50); do [ -e "$SOCK" ] || break; sleep 0.1; done
	cd /
	rm -rf "$TMP"
}

# start_redis [redis-server options...]
start_redis() {
	redis-server --port 0 --unixsocket "$SOCK" --save '' --appendonly no \
	    --daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis.log" "$@" 3>&-
	for _ in $(seq 50); do
		[ -S "$SOCK" ] && [ -s "$TMP/redis.pid" ] && return 0
		sleep 0.1
	done
	echo "redis-server did not start"; cat "$TMP/redis.log"; return 1
}

rcli() { redis-cli -s "$SOCK" "$@"; }

# asleep: until the server stops answering (a DEBUG SLEEP sent in the
# background has begun), at most 10 s
unanswered() { ! timeout 0.3 redis-cli -s "$SOCK" ping >/dev/null 2>&1; }
asleep() {
	wait_until unanswered || { echo "the server never stopped answering"; return 1; }
}

# relay SOCK MODE [CMD]: a unix socket at SOCK that passes everything to
# this test's server and back, but for MODE: cut-exec closes the link when
# a client sends EXEC; bad-time turns the server's TIME replies into
# ["abc", "-5"]; run-on-exec runs the shell command CMD (to its end) the
# first time a client sends EXEC, before passing the EXEC on.  Waits until
# it listens.
relay() {
	python3 -c 'import re, socket, subprocess, sys, threading
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
mode = sys.argv[3]
ran = []
T = re.compile(rb"\*2\r\n\$1[0-9]\r\n[0-9]+\r\n\$[0-9]\r\n[0-9]+\r\n")
def pump(a, b, up):
    try:
        while True:
            d = a.recv(65536)
            if not d or (up and mode == "cut-exec" and b"EXEC" in d):
                break
            if up and mode == "run-on-exec" and b"EXEC" in d and not ran:
                ran.append(1)
                subprocess.run(sys.argv[4], shell=True)
            if not up and mode == "bad-time":
                d = T.sub(b"*2\r\n$3\r\nabc\r\n$2\r\n-5\r\n", d)
            b.sendall(d)
    except OSError:
        pass
    a.close()
    b.close()
while True:
    c, _ = s.accept()
    u = socket.socket(socket.AF_UNIX)
    u.connect(sys.argv[2])
    threading.Thread(target=pump, args=(c, u, True), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, False), daemon=True).start()' "$1" "$SOCK" "$2" "${3-}" 2>/dev/null 3>&- &
	track $!
	for _ in $(seq 50); do [ -S "$1" ] && break; sleep 0.1; done
}

@test "redis: the README's example decides the same as on a file" {
	start_redis
	for n in 1 2 3; do at 1000 consume login:alice --limit 3/60s; done
	run --separate-stderr at 1000 consume login:alice --limit 3/60s --format json
	[ "$status" -eq 1 ]
	[ "$(field retry_after "$output")" = 20 ]
	run at 1020 consume login:alice --limit 3/60s
	[ "$status" -eq 0 ]
	# the state is where the man page says, and expires on its own
	[ "$(rcli type 'throttle:{login:alice}')" = hash ]
	ttl=$(rcli pttl 'throttle:{login:alice}')
	[ "$ttl" -gt 60000 ]
	[ "$ttl" -le 120000 ]
}

@test "redis: a throttled consume and a check change nothing" {
	start_redis
	at 1000 consume k --limit 1/1m
	before=$(rcli hgetall 'throttle:{k}')
	run at 1001 consume k --limit 1/1m
	[ "$status" -eq 1 ]
	run at 1001 check k --limit 1/1m
	[ "$status" -eq 1 ]
	[ "$(rcli hgetall 'throttle:{k}')" = "$before" ]
}

@test "redis: time is the server's unless THROTTLE_NOW pins it" {
	start_redis
	run --separate-stderr "$THROTTLE" consume k --limit 1/1h --format json
	[ "$status" -eq 0 ]
	server=$(rcli time | head -1)
	stored=$(rcli hget 'throttle:{k}' k0 | awk '{ print $6 }')
	# the key's TAT is one interval (1h) after the server's now
	[ $((stored / 1000000 - server)) -ge 3590 ]
	[ $((stored / 1000000 - server)) -le 3600 ]
}

@test "redis: 20 processes racing on one key admit exactly the limit" {
	start_redis
	for n in $(seq 20); do
		(set +e; for m in 1 2 3 4 5; do
			THROTTLE_NOW=1000 "$THROTTLE" -q consume race --limit 37/1h
			echo $?
		done >"out$n") &
	done
	wait
	[ "$(cat out* | grep -c '^0$')" -eq 37 ]
	[ "$(cat out* | grep -c '^1$')" -eq 63 ]
}

@test "redis: concurrency slots hold across processes" {
	start_redis
	for n in $(seq 10); do
		("$THROTTLE" acquire ci --concurrency 3 --ttl 1m >"lease$n" 2>/dev/null; echo $? >"rc$n") &
	done
	wait
	[ "$(cat rc* | grep -c '^0$')" -eq 3 ]
	[ "$(rcli hlen 'throttle:{ci}')" -eq 3 ]
	lease=$(cat lease* | head -1)
	"$THROTTLE" release ci --lease "$lease"
	[ "$(rcli hlen 'throttle:{ci}')" -eq 2 ]
}

@test "redis: server down, timeout, refused password: exit 3 naming the server, never the password" {
	run --separate-stderr "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"unix://$SOCK"*"cannot connect"* ]]
	run "$THROTTLE" consume k --limit 1/1s --on-error allow
	[ "$status" -eq 0 ]
	run "$THROTTLE" consume k --limit 1/1s --on-error deny
	[ "$status" -eq 1 ]

	start_redis --requirepass s3cret
	run --separate-stderr "$THROTTLE" --db "unix://$SOCK" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	run --separate-stderr "$THROTTLE" --db "redis://:wrong@localhost:1/0" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"redis://localhost:1/0"* ]]
	[[ "$stderr" != *wrong* ]]

	# a server that stops answering: the URL's timeout, then exit 3
	kill -STOP "$(cat "$TMP/redis.pid")"
	start=$(date +%s%N)
	run --separate-stderr "$THROTTLE" --db "unix://$SOCK?timeout=300ms" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[ $((($(date +%s%N) - start) / 1000000)) -lt 3000 ]
	kill -CONT "$(cat "$TMP/redis.pid")"
}

@test "redis: a batch group whose EXEC is cut off answers as --on-error maps it, fields and all" {
	command -v python3 >/dev/null || skip "needs python3 for a link that breaks at EXEC"
	start_redis
	# a link to the server that breaks when a client sends EXEC
	relay "$TMP/cut.sock" cut-exec
	export THROTTLE_DB="unix://$TMP/cut.sock"
	run --separate-stderr "$THROTTLE" --on-error allow batch <<<"consume k --limit 5/1m"
	[[ "$output" == '{"key":"k","allowed":true,"algorithm":"gcra","limit":5,"period":60,"burst":5,"cost":1,'*'"error":'*'"exit":0}' ]] || { echo "$output"; return 1; }
	[[ "$stderr" == *"allowing anyway (--on-error allow)"* ]]
	run --separate-stderr "$THROTTLE" --on-error deny batch <<<"consume k --limit 5/1m"
	[[ "$output" == '{"key":"k","allowed":false,"algorithm":"gcra",'*'"exit":1}' ]] || { echo "$output"; return 1; }
	# as a single call answers it
	run --separate-stderr "$THROTTLE" --on-error allow consume k --limit 5/1m --format json
	[ "$status" -eq 0 ]
	[[ "$output" == '{"key":"k","allowed":true,"algorithm":"gcra",'* ]]
}

@test "redis: a TIME reply that is no time is refused, exit 3 whatever --on-error says" {
	command -v python3 >/dev/null || skip "needs python3 for a server whose clock answers garbage"
	start_redis
	# a link to the server whose TIME replies are no time
	relay "$TMP/time.sock" bad-time
	unset THROTTLE_NOW
	export THROTTLE_DB="unix://$TMP/time.sock"
	for cmd in "consume k --limit 1/1m" "acquire j --concurrency 1 --ttl 1h"; do
		run --separate-stderr "$THROTTLE" --on-error allow $cmd
		[ "$status" -eq 3 ] || { echo "$cmd: $status $output $stderr"; return 1; }
		[[ "$stderr" == *"reading the server's clock: TIME did not answer seconds and microseconds"* ]] || { echo "$cmd: $stderr"; return 1; }
	done
	# nothing was written
	run --separate-stderr "$THROTTLE" --db "unix://$SOCK" inspect --format json
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "redis: a socket that answers in another protocol is named as not Redis" {
	command -v python3 >/dev/null || skip "needs python3 for a server that is not Redis"
	# an HTTP server where Redis was meant to be (the same for a TLS port)
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    try:
        c.recv(4096)
        c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    except OSError:
        pass
    c.close()' "$TMP/http.sock" 2>/dev/null 3>&- &
	track $!
	for _ in $(seq 50); do [ -S "$TMP/http.sock" ] && break; sleep 0.1; done
	export THROTTLE_DB="unix://$TMP/http.sock"
	run --separate-stderr "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[ -z "$output" ]
	[[ "$stderr" == *"unix://$TMP/http.sock"*"what answered is not a Redis server"*"check the URL's host and port"* ]] || { echo "$stderr"; return 1; }
	[[ "$stderr" != *"is the server up"* ]]
	# a wrong host or port, not an outage: --on-error allow must not
	# hide it for good
	run --separate-stderr "$THROTTLE" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"exit 3 whatever --on-error says"* ]]
}

@test "redis: a batch whose commit was sent and its answer lost says it may have been kept" {
	command -v python3 >/dev/null || skip "needs python3 for a proxy that cuts the connection"
	start_redis
	# a proxy that passes everything on, but closes the connection once
	# an EXEC has gone to the server, before its reply comes back
	python3 -c 'import socket, sys, threading
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
def serve(c):
    r = socket.socket(socket.AF_UNIX)
    r.connect(sys.argv[2])
    cut = threading.Event()
    def back():
        try:
            while not cut.is_set():
                d = r.recv(65536)
                if not d or cut.is_set():
                    break
                c.sendall(d)
        except OSError:
            pass
    threading.Thread(target=back, daemon=True).start()
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            if b"EXEC" in d:
                cut.set()
                r.sendall(d)
                break
            r.sendall(d)
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()' "$TMP/cut.sock" "$SOCK" 2>/dev/null 3>&- &
	track $!
	for _ in $(seq 50); do [ -S "$TMP/cut.sock" ] && break; sleep 0.1; done
	run --separate-stderr "$THROTTLE" --db "unix://$TMP/cut.sock" --lock-timeout 1s batch <<<'consume k --limit 5/1h'
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the last 1 requests were sent to be saved and no answer came: the server may have kept them, or not"* ]] || { echo "$stderr"; return 1; }
	[[ "$stderr" != *"none of the last"* ]]
	# it did keep it
	run --separate-stderr "$THROTTLE" inspect k --format json
	[ "$(field remaining "$output")" = 4 ]
}

@test "redis: a server that answers a byte at a time costs a call --lock-timeout, not more" {
	command -v python3 >/dev/null || skip "needs python3 for a server that drips its replies"
	# each reply begun and never ended: a byte every 200ms, for a minute
	python3 -c 'import socket, sys, time, threading
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
def drip(c):
    try:
        c.recv(4096)
        for _ in range(300):
            c.sendall(b"+")
            time.sleep(0.2)
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=drip, args=(c,), daemon=True).start()' "$TMP/drip.sock" 2>/dev/null 3>&- &
	track $!
	for _ in $(seq 50); do [ -S "$TMP/drip.sock" ] && break; sleep 0.1; done
	for cmd in "consume k --limit 1/1s" "check k --limit 1/1s" "inspect"; do
		start=$(date +%s%N)
		run --separate-stderr "$THROTTLE" --lock-timeout 1s --db "unix://$TMP/drip.sock?timeout=1s" $cmd
		ms=$((($(date +%s%N) - start) / 1000000))
		[ "$status" -eq 3 ] || { echo "$cmd: $status $stderr"; return 1; }
		[[ "$stderr" == *"no reply in time"* ]] || { echo "$cmd: $stderr"; return 1; }
		[ "$ms" -lt 2500 ] || { echo "$cmd took ${ms}ms"; return 1; }
	done
}

@test "redis: a unix socket this user may not use, or a path that is no socket, is no outage" {
	for what in file folder; do
		if [ "$what" = file ]; then touch "$TMP/nosock"; else mkdir "$TMP/nosock"; fi
		run --separate-stderr "$THROTTLE" --db "unix://$TMP/nosock" --on-error allow consume k --limit 1/1s
		[ "$status" -eq 3 ] || { echo "$what: $status $stderr"; return 1; }
		[[ "$stderr" == *"nosock is not a socket; check the URL's path"* ]]
		rm -rf "$TMP/nosock"
	done
	# a path through a file (ENOTDIR): no socket can ever be there
	touch "$TMP/plain"
	run --separate-stderr "$THROTTLE" --db "unix://$TMP/plain/redis.sock" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ] || { echo "$status $stderr"; return 1; }
	[[ "$stderr" == *"plain/redis.sock: a folder of the path is a file; check the URL's path"* ]]
	ln -s loop2 "$TMP/loop1"
	ln -s loop1 "$TMP/loop2"
	run --separate-stderr "$THROTTLE" --db "unix://$TMP/loop1/redis.sock" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ] || { echo "$status $stderr"; return 1; }
	[[ "$stderr" == *"loop1/redis.sock: its symbolic links go round in a loop; check the URL's path"* ]]
	# a socket that is not there yet: the server may be starting
	run --separate-stderr "$THROTTLE" --db "unix://$TMP/nosock" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 0 ]
	[ "$(id -u)" -eq 0 ] || skip "needs root to run as a user the socket refuses"
	start_redis --unixsocketperm 700
	unpriv "$TMP/u"
	run "${UNPRIV[@]}" "$UTHROTTLE" --db "unix://$SOCK" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 3 ] || { echo "$output"; return 1; }
	[[ "$output" == *"this user may not use the socket; check its permissions"*"exit 3 whatever --on-error says"* ]]
}

@test "redis: a password in the URL logs in; a wrong one is refused without showing it" {
	start_redis --requirepass 's3 cret'
	run --separate-stderr "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	run --separate-stderr "$THROTTLE" --db "unix://$SOCK?password=s3%20cret" consume k --limit 1/1s
	[ "$status" -eq 0 ]
	run --separate-stderr "$THROTTLE" --db "unix://$SOCK?password=wrong" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"refused the user name or password"* ]]
	[[ "$stderr" != *wrong* ]]
}

@test "redis: a key of the wrong type or a value throttle never writes is refused, exit 3" {
	start_redis
	rcli set 'throttle:{k}' hello >/dev/null
	run --separate-stderr "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *": reading a key: the key 'throttle:{k}' holds something throttle did not write; use another ?prefix= than 'throttle:', or remove that key if nothing else needs it" ]]
	[ "$(rcli get 'throttle:{k}')" = hello ]
	# the policies' hash too, read or written
	rcli lpush 'throttle:policies' x >/dev/null
	run --separate-stderr "$THROTTLE" policy set a --limit 1/1m
	[ "$status" -eq 3 ]
	[[ "$stderr" == *": saving: the key 'throttle:policies' holds something throttle did not write"* ]]
	run --separate-stderr "$THROTTLE" policy list
	[ "$status" -eq 3 ]
	[[ "$stderr" == *": listing policies: the key 'throttle:policies' holds something throttle did not write"* ]]
	# a command line with limits of its own is no way around it: it
	# decided without the key's policy (a login lockout lost unsaid)
	for oe in fail allow; do
		run --separate-stderr "$THROTTLE" consume login:y --limit 3/1m --on-error $oe
		[ "$status" -eq 3 ] || { echo "$oe: $status $stderr"; return 1; }
		[[ "$stderr" == *": reading a policy: the key 'throttle:policies' holds something throttle did not write"* ]]
		run --separate-stderr "$THROTTLE" run login:y --limit 3/1m --on-error $oe -- touch ran
		[ "$status" -eq 3 ] || { echo "$oe: $status $stderr"; return 1; }
		[ ! -e ran ]
	done
	[ -z "$(rcli keys 'throttle:{login:y}')" ]
	[ "$(rcli lrange 'throttle:policies' 0 -1)" = x ]
	rcli del 'throttle:policies' >/dev/null
	rcli hset 'throttle:{j}' k0 "gcra 1 2 three" >/dev/null
	run --separate-stderr "$THROTTLE" consume j --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"state not in throttle's encoding"* ]]
	[ "$(rcli hget 'throttle:{j}' k0)" = "gcra 1 2 three" ]
	run "$THROTTLE" reset j
	[ "$status" -eq 0 ]
	run "$THROTTLE" consume j --limit 1/1s
	[ "$status" -eq 0 ]
}

@test "redis: ?prefix= keeps throttles apart; rediss:// and bad URLs are usage errors" {
	start_redis
	"$THROTTLE" --db "unix://$SOCK?prefix=a:" consume k --limit 1/1h
	run "$THROTTLE" --db "unix://$SOCK?prefix=b:" consume k --limit 1/1h
	[ "$status" -eq 0 ]
	run "$THROTTLE" --db "unix://$SOCK?prefix=a:" consume k --limit 1/1h
	[ "$status" -eq 1 ]
	[ "$(rcli exists 'a:{k}' 'b:{k}')" = 2 ]
	# a scheme this build does not support: exit 2, saying what to do,
	# whatever --on-error says (no outage to hide)
	run --separate-stderr "$THROTTLE" --db "rediss://localhost" consume k --limit 1/1s --on-error allow
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--db: rediss: TLS (rediss://) needs hiredis 1.0 with TLS"*"stunnel"* ]] || { echo "$stderr"; return 1; }
	# a URL that cannot be right is the command line's fault: exit 2,
	# naming what is wrong, never the password
	run --separate-stderr "$THROTTLE" --db "redis://u:hunter2@localhost:99999" consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--db: redis: the port is not a number"* ]]
	[[ "$stderr" != *hunter2* ]]
	# from the environment: named as such, not as an option not given
	run --separate-stderr env THROTTLE_DB="redis://u:hunter2@localhost:99999" "$THROTTLE" consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$stderr" == "throttle: THROTTLE_DB: redis: the port is not a number"* ]] || { echo "$stderr"; return 1; }
	[[ "$stderr" != *hunter2* ]]
	# a server that wants a password it was not given says so
	rcli config set requirepass s3cret >/dev/null
	run --separate-stderr "$THROTTLE" --db "unix://$SOCK" consume k --limit 1/1s
	rcli -a s3cret --no-auth-warning config set requirepass "" >/dev/null
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"NOAUTH"*"the server wants a password; give it in the URL"* ]] || { echo "$stderr"; return 1; }
	for url in 'redis+cluster://h:7000/3' 'redis+cluster://h:7000?db=2' \
	    'redis+sentinel://h:26379' 'redis+sentinel://h:26379/' \
	    'redis://a:1,b:2' 'redis://h?sentinel_password=x' \
	    'redis+cluster://h:1?prefix=a%7Bb'; do
		run "$THROTTLE" --db "$url" consume k --limit 1/1s
		[ "$status" -eq 2 ] || { echo "$url: $status $output"; return 1; }
	done
	# an IPv6 address, in brackets or not, is named as such; a second
	# colon after a name is a bad port
	for url in 'redis://[::1]:6379' 'redis://::1:6379' 'redis://:pw@::1' \
	    'redis+cluster://127.0.0.1:7000,fe80::1:7001'; do
		run --separate-stderr "$THROTTLE" --db "$url" consume k --limit 1/1s
		[ "$status" -eq 2 ] || { echo "$url: $status $stderr"; return 1; }
		[[ "$stderr" == *"an IPv6 address is not supported; give a host name that resolves to it"* ]] || { echo "$url: $stderr"; return 1; }
	done
	run --separate-stderr "$THROTTLE" --db 'redis://h:1:2' consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"the port is not a number"* ]]
	# a bad escape in the prefix is said as one, not as a long prefix
	run --separate-stderr "$THROTTLE" --db 'redis://h:1?prefix=%zz' consume k --limit 1/1s
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"the prefix has a bad %XX escape (a % is written %25)"* ]]
	# an option given twice: which one was meant is a guess, so neither
	for q in 'timeout=1s&prefix=a:&timeout=2s' 'prefix=a:&prefix=b:' 'db=1&db=1'; do
		run --separate-stderr "$THROTTLE" --db "unix://$SOCK?$q" consume k --limit 1/1s
		[ "$status" -eq 2 ] || { echo "$q: $status $stderr"; return 1; }
		[[ "$stderr" == *"has the same option twice after the '?'; give each one once"* ]]
	done
	# the database in the path and as db=, a login before the host and
	# as user= or password=: the same, given twice
	for url in 'redis://127.0.0.1:1/3?db=2' 'redis://u:pw@127.0.0.1:1?password=x' \
	    'redis://:pw@127.0.0.1:1?user=x'; do
		run --separate-stderr "$THROTTLE" --db "$url" consume k --limit 1/1s
		[ "$status" -eq 2 ] || { echo "$url: $status $stderr"; return 1; }
		[[ "$stderr" == *"give it once"* && "$stderr" != *pw* ]]
	done
	"$THROTTLE" --db "unix://$SOCK?prefix=c:&timeout=2s" consume k --limit 1/1s
}

@test "redis: a password with '@' and '/' logs in, and a host that cannot be one is a usage error" {
	port=$("$BATS_TEST_DIRNAME/redis-fleet" port)
	redis-server --port "$port" --bind 127.0.0.1 --requirepass 'pq@zz/w:rd' --save '' \
	    --appendonly no --daemonize yes --pidfile "$TMP/tcp.pid" --logfile "$TMP/tcp.log" 3>&-
	for _ in $(seq 50); do [ -s "$TMP/tcp.pid" ] && break; sleep 0.1; done
	track "$(cat "$TMP/tcp.pid")"
	for _ in $(seq 50); do redis-cli -p "$port" ping 2>&1 | grep -q NOAUTH && break; sleep 0.1; done
	run --separate-stderr "$THROTTLE" --db "redis://:pq@zz/w:rd@127.0.0.1:$port/0" consume k --limit 1/1s
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	run --separate-stderr "$THROTTLE" --db "redis://:pq@zz/w:rd@127.0.0.1:$port" consume k --limit 1/1s
	[ "$status" -eq 1 ]
	# a wrong one is refused, and never shown
	run --separate-stderr "$THROTTLE" --db "redis://:pq@zz/w:ong@127.0.0.1:$port" consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" != *pq* && "$stderr" != *zz* && "$stderr" != *ong* ]] || { echo "$stderr"; return 1; }
	# hosts no server can have: the command line's fault, whatever
	# --on-error says, not an outage to fail open on
	for url in 'redis://ho_st!:1' 'redis://127.0.0.1 :1' 'redis://a..b:1' 'redis://%31%32%37.0.0.1:1' \
	    'redis+cluster://127.0.0.1:1,.b:1' 'redis+sentinel://x y/m'; do
		run --separate-stderr "$THROTTLE" --db "$url" --on-error allow consume k --limit 1/1s
		[ "$status" -eq 2 ] || { echo "$url: $status $stderr"; return 1; }
		[[ "$stderr" == *"the host is no host name or IPv4 address"* ]]
	done
	# a fully qualified name's final dot is a host's, found as the name
	run --separate-stderr "$THROTTLE" --db 'redis://localhost.:1' --lock-timeout 300ms consume k --limit 1/1s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"localhost.:1/0: cannot connect: Connection refused"* ]] || { echo "$stderr"; return 1; }
	# a socket's path has no login: an '@' in it is shown
	mkdir "$TMP/a@b"
	run --separate-stderr "$THROTTLE" --db "unix://$TMP/a@b/none.sock" consume k --limit 1/1s
	[[ "$stderr" == *"unix://$TMP/a@b/none.sock: cannot connect"* ]] || { echo "$stderr"; return 1; }
}

# answers N: the callers' out* files hold N answers
answers() { [ "$(cat out* 2>/dev/null | wc -l)" -ge "$1" ]; }

@test "redis: killing the server mid-run gives exit 3, never a false allowed" {
	start_redis
	# each caller goes on until the server is gone (its first exit 3),
	# however fast or slow the machine; the kill comes once they run
	for n in 1 2 3 4; do
		(set +e; for m in $(seq 3000); do
			THROTTLE_NOW=1000 "$THROTTLE" -q consume k --limit 50/1h 2>/dev/null
			rc=$?
			echo $rc
			[ "$rc" -eq 3 ] && break
			sleep 0.01
		done >"out$n") &
		track $!
	done
	wait_until answers 40 || true
	kill -9 "$(cat "$TMP/redis.pid")"
	wait
	rm -f "$TMP/redis.pid"
	# every answer is allowed, refused or a store error, and no more
	# than the limit was allowed
	[ "$(cat out* | grep -vc '^[013]$')" -eq 0 ] || { cat out* | sort | uniq -c; return 1; }
	[ "$(cat out* | grep -c '^0$')" -le 50 ]
	[ "$(cat out* | grep -c '^3$')" -gt 0 ]
	run "$THROTTLE" consume k --limit 50/1h
	[ "$status" -eq 3 ]
}

@test "redis: inspect, gc, policies and batch work on the server" {
	start_redis
	"$THROTTLE" policy set login --limit 2/1m
	run "$THROTTLE" policy list
	[ "$output" = "login --limit 2/1m" ]
	at 1000 consume login:bob
	at 1000 consume login:bob
	run at 1000 consume login:bob
	[ "$status" -eq 1 ]
	run at 1000 inspect --names
	[ "$output" = "login:bob" ]
	run at 5000 gc --format json
	[ "$output" = '{"keys":1,"leases":0,"lockouts":0,"shedders":0}' ]
	[ "$(rcli exists 'throttle:{login:bob}')" = 0 ]
	printf '%s\n' "consume 'a b' --limit 1/1m" "consume 'a b' --limit 1/1m" |
	    at 1000 batch >out
	[ "$(sed -n 1p out | jget exit)" = 0 ]
	[ "$(sed -n 2p out | jget exit)" = 1 ]
}

@test "redis: every record is checked as on a file: shed state, lockouts, leases" {
	start_redis
	# in range on both stores' terms, or refused on both
	rcli hset 'throttle:{s}' s "999999999999999999 1" >/dev/null
	run --separate-stderr "$THROTTLE" shed s --utilization 0.5
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"the key 's' has a shedder state out of range"* ]]
	rcli hset 'throttle:{l}' o "-5 0" >/dev/null
	run --separate-stderr "$THROTTLE" consume l --limit 1/1m --lockout 1m
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"has a lockout out of range"* ]]
	rcli hset 'throttle:{c}' l0123456789abcdef "$(printf '9\n1\n0\n0\n1\n1\n\nhost\n0\n0')" >/dev/null
	run --separate-stderr "$THROTTLE" acquire c --concurrency 2
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"has a lease out of range"* ]]
}

@test "redis: keys in throttle 0.1's layout are read, then moved into one hash" {
	start_redis
	# as 0.1 wrote them: a limit without WRITTEN, a lockout without SINCE
	rcli hset throttle:k:old 0 "gcra 1 3600000000 1 0 3601000000 0 0 3601000000" >/dev/null
	rcli set throttle:o:old "3000000000" >/dev/null
	# a reading command reads them where they are
	run at 2 check old --limit 1/1h
	[ "$status" -eq 1 ]
	[ "$(rcli exists throttle:k:old)" = 1 ]
	[ "$(rcli exists 'throttle:{old}')" = 0 ]
	# the first command that may write the key moves all of it, as it was
	run at 2 consume old --limit 1/1h
	[ "$status" -eq 1 ]
	[ "$(rcli exists throttle:k:old throttle:o:old)" = 0 ]
	[ "$(rcli hexists 'throttle:{old}' k0)" = 1 ]
	[ "$(rcli hexists 'throttle:{old}' o)" = 1 ]
	# the lockout (until 3000s) holds, and gives the allowance back
	run --separate-stderr at 2 consume old --limit 1/1h --format json
	[ "$status" -eq 1 ]
	[ "$(field lockout_after "$output")" = 2998 ]
	[ "$(field reset_after "$output")" = 2998 ]
	run at 3000 consume old --limit 1/1h
	[ "$status" -eq 0 ]
	# gc moves what no write has touched
	rcli hset throttle:k:idle 0 "gcra 1 3600000000 1 0 3601000000 0 0 3601000000" >/dev/null
	run at 3 gc
	[ "$status" -eq 0 ]
	[ "$(rcli exists throttle:k:idle)" = 0 ]
	[ "$(rcli hexists 'throttle:{idle}' k0)" = 1 ]
}

@test "redis: another deployment whose prefix is ours plus k: or o: is not taken for 0.1's keys" {
	start_redis
	# its prefix throttle:k: puts its key user1 at throttle:k:{user1},
	# which is where 0.1 kept our key {user1}'s limits: gc moved it into
	# throttle:{{user1}} under a junk field, and its limit started over
	other="unix://$SOCK?prefix=throttle:k:"
	at 1 --db "$other" consume user1 --limit 1/1d
	at 1 --db "$other" acquire job --concurrency 1 >/dev/null
	at 1 --db "unix://$SOCK?prefix=throttle:o:" consume u2 --limit 1/1d
	run --separate-stderr at 2 gc
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	run --separate-stderr at 2 inspect
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$(rcli exists 'throttle:k:{user1}' 'throttle:k:{job}' 'throttle:o:{u2}')" = 3 ]
	[ "$(rcli exists 'throttle:{{user1}}')" = 0 ]
	run at 2 --db "$other" consume user1 --limit 1/1d
	[ "$status" -eq 1 ]
	run at 2 --db "$other" acquire job --concurrency 1
	[ "$status" -eq 1 ]
}

@test "redis: a key's hash with a field throttle never writes is refused, its expiry kept" {
	start_redis
	rcli hset 'throttle:{bar}' zz 1 name alice >/dev/null
	rcli expire 'throttle:{bar}' 500 >/dev/null
	# it was decided on, rewritten with k0 beside them, and its expiry
	# dropped; inspect said no state, and verify ok
	for cmd in "consume bar --limit 1/1h" "inspect bar" "reset bar" "gc" "verify"; do
		run --separate-stderr at 1 $cmd
		[ "$status" -eq 3 ] || { echo "$cmd: $status $stderr"; return 1; }
		[[ "$stderr" == *"the key 'throttle:{bar}' holds a field 'zz' throttle did not write; use another ?prefix="* ]] || { echo "$cmd: $stderr"; return 1; }
	done
	[ "$(rcli hlen 'throttle:{bar}')" = 2 ]
	ttl=$(rcli ttl 'throttle:{bar}')
	[ "$ttl" -gt 0 ]
}

@test "redis: --on-error allow fails open only when the server is out of reach" {
	# down: an outage, failed open as asked
	run --separate-stderr "$THROTTLE" --on-error allow consume k --limit 1/1s
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"allowing anyway (--on-error allow)"* ]]
	# run on a key whose limits are its policy's, which cannot be read:
	# allow runs the command (it exited 0 without running it), deny
	# refuses it as a limit would
	run --separate-stderr "$THROTTLE" --on-error allow run nightly -- touch ran
	[ "$status" -eq 0 ]
	[ -e ran ]
	[[ "$stderr" == *"cannot connect"*"running touch (--on-error allow)"* ]]
	rm ran
	run --separate-stderr "$THROTTLE" --on-error deny run nightly -- touch ran
	[ "$status" -eq 75 ]
	[ ! -e ran ]
	run --separate-stderr "$THROTTLE" run nightly -- touch ran
	[ "$status" -eq 3 ]
	[ ! -e ran ]
	start_redis
	# a refused password, a key of another type: misconfigurations, which
	# failing open would hide for good: exit 3 whatever --on-error says
	for mode in allow deny; do
		run --separate-stderr "$THROTTLE" --db "unix://$SOCK?password=wrong" \
		    --on-error "$mode" consume k --limit 1/1s
		[ "$status" -eq 3 ] || { echo "$mode: $status"; return 1; }
		[[ "$stderr" == *"exit 3 whatever --on-error says"* ]]
	done
	rcli set 'throttle:{t}' x >/dev/null
	run --separate-stderr "$THROTTLE" --on-error allow consume t --limit 1/1s --format json
	[ "$status" -eq 3 ]
	[[ "$output" == *'"allowed":false'* ]]
}

@test "redis: a batch says an outage once, how many requests it cost, and says it again if it comes back" {
	# down from the start: each request's answer says so, stderr once
	for i in $(seq 200); do echo "consume k$i --limit 1/1s"; done >reqs
	run --separate-stderr "$THROTTLE" batch <reqs
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 200 ]
	[[ "${lines[199]}" == '{"key":"k200","error":"'*"cannot connect"* ]]
	[ "$(grep -c "cannot connect" <<<"$stderr")" -eq 1 ] || { echo "$stderr"; return 1; }
	[[ "$stderr" == *"batch: the same message for 200 more requests"* ]] || { echo "$stderr"; return 1; }
	# up, down, up: the count when the server comes back, then the
	# outage said again, each in its place; every answer still one line
	mkfifo in
	"$THROTTLE" batch <in >out 2>err 3>&- &
	batch=$!
	track "$batch"
	exec 4>in
	echo "consume a --limit 1/1s" >&4
	wait_until grep -q '"key":"a"' out
	start_redis
	echo "consume b --limit 1/1s" >&4
	wait_until grep -q '"key":"b"' out
	rcli shutdown nosave >/dev/null 2>&1 || true
	wait_until test ! -e "$SOCK"
	echo "consume c --limit 1/1s" >&4
	echo "consume d --limit 1/1s" >&4
	exec 4>&-
	wait "$batch" || true
	[ "$(wc -l <out)" -eq 4 ]
	cat out
	grep -q '"key":"b","allowed":true' out
	grep -q '"key":"d","error":"' out
	cat err
	[ "$(grep -c "cannot connect\|no reply\|server" err)" -ge 2 ]
	# the first outage's count comes before the second outage's message
	sed -n 2p err | grep -q "the same message for 1 more request$"
}

@test "redis: --lock-timeout bounds a call on a server that stops answering" {
	start_redis --enable-debug-command yes 2>/dev/null ||
	    skip "this redis-server has no --enable-debug-command"
	rcli ping >/dev/null
	rcli debug sleep 3 >/dev/null &
	track $!
	asleep
	start=$(date +%s%N)
	run --separate-stderr "$THROTTLE" consume k --limit 1/1s --lock-timeout 0.5s
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"no reply in time"* ]]
	[ "$elapsed" -lt 1500 ] || { echo "took ${elapsed}ms"; return 1; }
	# the policy a decision looks up first, and a scan, are bounded too
	sleep 3
	rcli debug sleep 3 >/dev/null &
	track $!
	asleep
	start=$(date +%s%N)
	run --separate-stderr "$THROTTLE" inspect --lock-timeout 0.5s
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$status" -eq 3 ]
	[ "$elapsed" -lt 1500 ] || { echo "inspect took ${elapsed}ms"; return 1; }
	# an outage: --on-error allow fails open on it
	sleep 3
	rcli debug sleep 3 >/dev/null &
	track $!
	asleep
	run --separate-stderr "$THROTTLE" consume k --limit 1/1s --lock-timeout 0.5s --on-error allow
	[ "$status" -eq 0 ]
	# a batch's group costs one --lock-timeout however many requests and
	# round trips it has (each one used to wait its own: 3 of them for
	# one request), and each request is answered with its key
	sleep 3
	rcli debug sleep 3 >/dev/null &
	track $!
	asleep
	start=$(date +%s%N)
	run --separate-stderr "$THROTTLE" batch --lock-timeout 0.5s <<-EOF
		consume a --limit 1/1s
		consume b --limit 1/1s
		consume c --limit 1/1s
	EOF
	elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$status" -eq 3 ]
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[2]}" == '{"key":"c","error":"'*'no reply in time'* ]]
	[ "$elapsed" -lt 1200 ] || { echo "batch took ${elapsed}ms"; return 1; }
}

@test "redis: inspect and gc read keys many to a round trip, each key its own records" {
	start_redis
	# more keys than one round trip reads, each limit telling its key
	for i in $(seq 600); do echo "consume k$i --limit $i/1h"; done | at 1000 batch >/dev/null
	for i in $(seq 0 100 500); do
		rcli hset "throttle:k:old$i" 0 "gcra 1 3600000000 1 0 3601000000 0 0 3601000000" >/dev/null
	done
	for i in $(seq 1 2 600); do echo "acquire k$i --concurrency 9 --ttl 1m"; done | at 1000 batch >/dev/null
	at 1000 inspect --format json >out
	# a line per limit and per lease
	[ "$(wc -l <out)" = 906 ]
	# every line's limit is its key's number; no record strayed
	[ "$(sed -n 's/^{"key":"k\([0-9]*\)","algorithm":"gcra","limit":\([0-9]*\),.*/\1 \2/p' out |
	    awk '$1 != $2' | wc -l)" = 0 ]
	[ "$(sed -n 's/^{"key":"k\([0-9]*\)","algorithm":"gcra","limit":\([0-9]*\),.*/\1/p' out | wc -l)" = 600 ]
	[ "$(grep -c '"key":"old' out)" = 6 ]
	# the odd keys' leases ended at 1060, and every limit but those of
	# k1, k2 and k3 is at rest by 2000: gc forgets those, and moves the
	# 6 old keys into their hashes
	run at 2000 gc --format json
	[ "$status" -eq 0 ]
	[ "$output" = '{"keys":597,"leases":300,"lockouts":0,"shedders":0}' ]
	[ "$(rcli exists 'throttle:{k10}' 'throttle:{k11}')" = 0 ]
	[ "$(rcli exists throttle:k:old300)" = 0 ]
	[ "$(rcli hexists 'throttle:{old300}' k0)" = 1 ]
	[ "$(rcli hlen 'throttle:{k1}')" = 1 ]
	[ "$(rcli hlen 'throttle:{k2}')" = 1 ]
}

@test "redis: gc forgets many keys in one transaction, and not a key written meanwhile" {
	start_redis
	for i in $(seq 20); do echo "consume k$i --limit 1/1h"; done | at 1000 batch >/dev/null
	# every key is at rest by 9000; k5 is used again while gc writes
	relay "$TMP/touch.sock" run-on-exec \
	    "THROTTLE_NOW=8000 '$THROTTLE' --db 'unix://$SOCK' consume k5 --limit 1/1h --format json >'$TMP/touched' 2>&1"
	rcli config resetstat >/dev/null
	run --separate-stderr env THROTTLE_NOW=9000 "$THROTTLE" --db "unix://$TMP/touch.sock" gc --format json
	[ "$status" -eq 0 ]
	[ "$output" = '{"keys":19,"leases":0,"lockouts":0,"shedders":0}' ]
	grep -q '"allowed":true' "$TMP/touched" || { cat "$TMP/touched"; return 1; }
	[ "$(rcli exists 'throttle:{k5}')" = 1 ]
	[ "$(rcli exists 'throttle:{k4}' 'throttle:{k6}' 'throttle:{k20}')" = 0 ]
	[ "$(rcli dbsize)" = 1 ]
	# with nothing written meanwhile, the 19 take one EXEC
	for i in $(seq 20); do echo "consume k$i --limit 1/1h"; done | at 10000 batch >/dev/null
	rcli config resetstat >/dev/null
	run at 20000 gc
	[ "$status" -eq 0 ]
	[ "$(rcli info commandstats | sed -n 's/^cmdstat_exec:calls=\([0-9]*\),.*/\1/p')" = 1 ]
	[ "$(rcli dbsize)" = 0 ]
}

@test "redis: gc counts the leases it forgot, not those another process freed first" {
	start_redis
	for i in $(seq 10); do echo "consume k$i --limit 1/1h"; done | at 1000 batch >/dev/null
	for n in 1 2 3; do echo "acquire L --concurrency 5 --ttl 10m"; done | at 1000 batch >/dev/null
	# L's leases ended at 1600; an acquire frees them while gc forgets
	# the keys at rest (its first EXEC), after gc has listed them
	relay "$TMP/free.sock" run-on-exec \
	    "THROTTLE_NOW=9000 '$THROTTLE' --db 'unix://$SOCK' acquire L --concurrency 5 --ttl 1h >'$TMP/freed' 2>&1"
	run --separate-stderr env THROTTLE_NOW=9000 "$THROTTLE" --db "unix://$TMP/free.sock" gc --format json
	[ "$status" -eq 0 ]
	[ -s "$TMP/freed" ]
	[ "$output" = '{"keys":10,"leases":0,"lockouts":0,"shedders":0}' ]
	# the one lease the acquire took is left
	[ "$(at 9000 inspect L --format json | grep -c '"lease":')" = 1 ]
}

@test "redis: gc of many ended leases takes a transaction a key, each within --lock-timeout" {
	start_redis
	for i in $(seq 20000); do echo "acquire l$i --concurrency 1 --ttl 1m"; done | at 1000 batch >/dev/null
	[ "$(rcli dbsize)" = 20000 ]
	# one transaction reading 20,000 keys cannot end within 0.5s
	run --separate-stderr at 2000 gc --format json --lock-timeout 0.5s
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	[ "$output" = '{"keys":0,"leases":20000,"lockouts":0,"shedders":0}' ]
	[ "$(rcli dbsize)" = 0 ]
}

@test "redis: a Redis Cluster node is refused plainly, exit 3 whatever --on-error says" {
	command -v redis-cli >/dev/null || skip "needs redis-cli (apt-get install redis-tools)"
	base=$("$BATS_TEST_DIRNAME/redis-fleet" port)
	for p in $base $((base + 1)) $((base + 2)); do
		mkdir "$TMP/$p"
		(cd "$TMP/$p" && redis-server --port "$p" --bind 127.0.0.1 \
		    --cluster-enabled yes --cluster-config-file nodes.conf \
		    --save '' --appendonly no --daemonize yes \
		    --pidfile "$TMP/$p/pid" --logfile "$TMP/$p/log" 3>&-)
		for _ in $(seq 50); do [ -s "$TMP/$p/pid" ] && break; sleep 0.1; done
		track "$(cat "$TMP/$p/pid")"
	done
	echo yes | redis-cli --cluster create 127.0.0.1:$base 127.0.0.1:$((base + 1)) \
	    127.0.0.1:$((base + 2)) --cluster-replicas 0 >/dev/null 2>&1 3>&- ||
	    skip "could not make a cluster on ports $base-$((base + 2))"
	for _ in $(seq 50); do
		redis-cli -p "$base" cluster info | grep -q 'cluster_state:ok' && break
		sleep 0.1
	done
	# failing open on it would mean never limiting: never
	for k in a b c d; do
		run --separate-stderr "$THROTTLE" --db "redis://127.0.0.1:$base" --on-error allow consume "$k" --limit 1/1s
		[ "$status" -eq 3 ]
		[[ "$stderr" == *"MOVED "*": the server is a Redis Cluster node; give --db redis+cluster://HOST:PORT to use the cluster"* ]]
	done
	# a host name is found whatever its case (musl's /etc/hosts lookup
	# tells cases apart; throttle reads the file itself: resolve.c)
	awk '$1 == "127.0.0.1" { for (i = 2; i <= NF; i++) if ($i == "localhost") f = 1 } END { exit !f }' /etc/hosts ||
	    skip "no 127.0.0.1 localhost in /etc/hosts"
	run --separate-stderr "$THROTTLE" --db "redis+cluster://LocalHost:$base" consume e --limit 1/1s
	[ "$status" -eq 0 ]
}

@test "redis: a host name is looked up within --lock-timeout, and found in /etc/hosts in any case" {
	if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
		skip "needs root and unshare -m to stand in for /etc/hosts and /etc/resolv.conf"
	fi
	command -v python3 >/dev/null || skip "needs python3 for a DNS server that never answers"
	port=$("$BATS_TEST_DIRNAME/redis-fleet" port)
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	    --daemonize yes --pidfile "$TMP/tcp.pid" --logfile "$TMP/tcp.log" 3>&-
	for _ in $(seq 50); do [ -s "$TMP/tcp.pid" ] && break; sleep 0.1; done
	track "$(cat "$TMP/tcp.pid")"
	printf '127.0.0.1 localhost\n127.0.0.1 Limiter.Corp.Example\n127.0.0.2 two\n127.0.0.1 two\n' >"$TMP/hosts"
	printf 'nameserver 127.0.0.1\n' >"$TMP/resolv.conf"
	# each call in a mount namespace of its own, with these two files
	in_ns() {
		unshare -m sh -c 'mount --bind "$1" /etc/hosts &&
		    mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"' \
		    sh "$TMP/hosts" "$TMP/resolv.conf" "$@"
	}
	# written in capitals in the file, asked in another case: found, as
	# glibc finds it (musl's own lookup tells cases apart)
	run --separate-stderr in_ns "$THROTTLE" --db "redis://LIMITER.corp.example:$port" consume k --limit 1/1m
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	[ "$(redis-cli -p "$port" exists 'throttle:{k}')" = 1 ]
	# a host's addresses are tried in turn: nothing listens on the first
	run --separate-stderr in_ns "$THROTTLE" --db "redis://two:$port" consume k2 --limit 1/1m
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	# a DNS server that never answers: the lookup ends with the time a
	# call has, not the resolver's 10-20 s
	dns_server silent
	t0=$(date +%s%N)
	run --separate-stderr in_ns "$THROTTLE" --db "redis://nosuch.example:$port" consume k --limit 1/1m --lock-timeout 500ms --on-error allow
	t1=$(date +%s%N)
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"redis://nosuch.example:$port/0: cannot connect to the server: its name nosuch.example was not looked up in time (--lock-timeout, or ?timeout=; is the DNS server in /etc/resolv.conf answering?)"* ]] || { echo "$stderr"; return 1; }
	[[ "$stderr" == *"allowing anyway (--on-error allow)" ]]
	[ $(((t1 - t0) / 1000000)) -lt 3000 ] || { echo "took $(((t1 - t0) / 1000000)) ms"; return 1; }
	run --separate-stderr in_ns "$THROTTLE" --db "redis://nosuch.example:$port?timeout=300ms" consume k --limit 1/1m
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"was not looked up in time"* ]]
	# the lookup is stopped with the call, and with a throttle killed:
	# a resolver told to ask again after a second would ask the silent
	# server again if it were left running
	printf 'nameserver 127.0.0.1\noptions timeout:2 attempts:2\n' >"$TMP/resolv.conf"
	rm -f "$TMP/dns.up.log"
	run in_ns "$THROTTLE" --db "redis://nosuch.example:$port" consume k --limit 1/1m --lock-timeout 300ms
	[ "$status" -eq 3 ]
	sleep 2.6
	[ "$(wc -l <"$TMP/dns.up.log")" -eq 1 ] || { echo "questions: $(wc -l <"$TMP/dns.up.log")"; return 1; }
	rm -f "$TMP/dns.up.log"
	# one process from unshare to throttle (each execs the next), so
	# that $! is throttle's own pid
	unshare -m sh -c 'mount --bind "$1" /etc/hosts &&
	    mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"' \
	    sh "$TMP/hosts" "$TMP/resolv.conf" "$THROTTLE" --db "redis://nosuch.example:$port" consume k --limit 1/1m --lock-timeout 10s 2>/dev/null 3>&- &
	victim=$!
	track "$victim"
	for _ in $(seq 50); do [ -s "$TMP/dns.up.log" ] && break; sleep 0.1; done
	kill -9 "$victim"
	wait "$victim" 2>/dev/null || true
	sleep 2.6
	[ "$(wc -l <"$TMP/dns.up.log")" -eq 1 ] || { echo "questions after a kill: $(wc -l <"$TMP/dns.up.log")"; return 1; }
	printf 'nameserver 127.0.0.1\n' >"$TMP/resolv.conf"
	# one that answers the IPv4 question and drops the IPv6 one (as some
	# middleboxes do): the IPv4 answer is enough, asked for first
	kill "$dns" && wait "$dns" 2>/dev/null || true
	dns_server aonly
	run --separate-stderr in_ns "$THROTTLE" --db "redis://v4.example:$port" consume k3 --limit 1/1m --lock-timeout 2s
	[ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
	[ "$(redis-cli -p "$port" exists 'throttle:{k3}')" = 1 ]
	# one that says there is no such name: said at once, in those words;
	# an outage still (DNS may say so for a while of a right name), so
	# --on-error applies, and a cluster goes on to its next node
	kill "$dns" && wait "$dns" 2>/dev/null || true
	dns_server nxdomain
	run --separate-stderr in_ns "$THROTTLE" --db "redis://nosuch.example:$port" consume k --limit 1/1m --lock-timeout 5s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"cannot connect to the server: DNS has no address for nosuch.example ("*"); check the name, and /etc/hosts"* ]] || { echo "$stderr"; return 1; }
	run --separate-stderr in_ns "$THROTTLE" --db "redis://nosuch.example:$port" consume k --limit 1/1m --lock-timeout 5s --on-error allow
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"DNS has no address for nosuch.example"*"allowing anyway (--on-error allow)" ]]
	# no such name, behind a server that drops the IPv6 question: the
	# IPv6 question is not asked, so the answer comes at once
	kill "$dns" && wait "$dns" 2>/dev/null || true
	dns_server nxa
	run --separate-stderr in_ns "$THROTTLE" --db "redis://nosuch.example:$port" consume k --limit 1/1m --lock-timeout 3s
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"DNS has no address for nosuch.example"* ]] || { echo "$stderr"; return 1; }
}

# dns_server silent|nxdomain|aonly|nxa: a DNS server on 127.0.0.1:53
# that never answers, answers every question "no such name", answers an
# IPv4 question with 127.0.0.1 and no other, or an IPv4 question with "no
# such name" and no other; its pid in $dns, a line for each question it
# gets in $TMP/dns.up.log
dns_server() {
	rm -f "$TMP/dns.up"
	python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[1], "w").close()
while True:
    q, peer = s.recvfrom(4096)
    with open(sys.argv[1] + ".log", "a") as log:
        log.write("query\n")
    if sys.argv[2] == "silent" or len(q) < 12:
        continue
    i = 12
    while i < len(q) and q[i] != 0:
        i += q[i] + 1
    question = q[12:i + 5]
    ipv4 = q[i + 1:i + 3] == bytes([0, 1])
    if sys.argv[2] == "nxdomain" or (sys.argv[2] == "nxa" and ipv4):
        # the question again, no answer, RCODE 3 (NXDOMAIN)
        s.sendto(q[:2] + bytes([0x81, 0x83]) + q[4:6] + bytes(6) + question, peer)
    elif sys.argv[2] == "aonly" and ipv4:
        # type A: one answer, 127.0.0.1, its name a pointer to the question
        s.sendto(q[:2] + bytes([0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]) + question +
                 bytes([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]), peer)' \
	    "$TMP/dns.up" "$1" 2>/dev/null 3>&- &
	dns=$!
	track "$dns"
	for _ in $(seq 50); do [ -e "$TMP/dns.up" ] && break; sleep 0.1; done
	[ -e "$TMP/dns.up" ] || skip "127.0.0.1:53 is taken: no DNS server of the test's own"
}

@test "redis: a TLS server through the man page's stunnel tunnel" {
	command -v stunnel >/dev/null || skip "needs stunnel (apt-get install stunnel4)"
	command -v openssl >/dev/null || skip "needs openssl"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem \
	    -days 2 -subj "/CN=redis.internal" \
	    -addext "subjectAltName=DNS:redis.internal" 2>/dev/null
	base=$("$BATS_TEST_DIRNAME/redis-fleet" port)
	redis-server --port 0 --tls-port "$base" --bind 127.0.0.1 \
	    --tls-cert-file cert.pem --tls-key-file key.pem --tls-ca-cert-file cert.pem \
	    --tls-auth-clients no --requirepass secret --save '' --appendonly no \
	    --daemonize yes --pidfile "$TMP/redis.pid" --logfile "$TMP/redis.log" 3>&- ||
	    skip "this redis-server has no TLS"
	for _ in $(seq 50); do [ -s "$TMP/redis.pid" ] && break; sleep 0.1; done
	grep -q "Ready to accept" "$TMP/redis.log" || skip "this redis-server has no TLS"
	# the man page's tunnel, pointed at this server and its certificate
	conf=$(doc f08ee9f11a8b)
	conf=${conf//redis.internal:6379/127.0.0.1:$base}
	conf=${conf//127.0.0.1:6380/127.0.0.1:$((base + 1))}
	conf=${conf//\/etc\/ssl\/certs\/ca-certificates.crt/$TMP/cert.pem}
	printf 'foreground = yes\npid =\n%s\n' "$conf" >stunnel.conf
	stunnel stunnel.conf >stunnel.log 2>&1 3>&- &
	track $!
	for _ in $(seq 50); do grep -q "Configuration successful" stunnel.log && break; sleep 0.1; done
	export THROTTLE_DB="redis://:secret@127.0.0.1:$((base + 1))/0"
	run --separate-stderr "$THROTTLE" consume t --limit 1/1m
	[ "$status" -eq 0 ]
	run --separate-stderr "$THROTTLE" consume t --limit 1/1m
	[ "$status" -eq 1 ]
	grep -q "Certificate accepted" stunnel.log
	# the TLS port itself, without the tunnel: said to need one
	run --separate-stderr "$THROTTLE" --db "redis://:secret@127.0.0.1:$base/0" consume t --limit 1/1m
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"a TLS port closes a plain connection so: it needs a tunnel"* ]] || { echo "$stderr"; return 1; }
	# a certificate for another name is refused by the tunnel: no decision
	sed -i 's/checkHost = redis.internal/checkHost = other.internal/' stunnel.conf
	kill "${TRACKED[-1]}"
	stunnel stunnel.conf >stunnel.log 2>&1 3>&- &
	track $!
	for _ in $(seq 50); do grep -q "Configuration successful" stunnel.log && break; sleep 0.1; done
	run --separate-stderr "$THROTTLE" consume t --limit 1/1m
	[ "$status" -eq 3 ]
}

@test "redis: a decision reads its key and policy once, in one round trip with the clock" {
	start_redis
	rcli config resetstat >/dev/null
	run "$THROTTLE" consume rt --limit 5/1m
	[ "$status" -eq 0 ]
	stats=$(rcli info commandstats)
	# the policy lookup's read (WATCH, HGETALL, TIME, HMGET) is the
	# decision's: the key is not WATCHed or read a second time
	[[ "$stats" == *"cmdstat_watch:calls=1,"* ]] || { echo "$stats"; return 1; }
	[[ "$stats" == *"cmdstat_time:calls=1,"* ]]
	[[ "$stats" == *"cmdstat_hmget:calls=1,"* ]]
	[[ "$stats" == *"cmdstat_exec:calls=1,"* ]]
	[[ "$stats" != *"cmdstat_unwatch"* ]]
}

@test "redis: release and run's refund read the server's clock once, with the key" {
	start_redis
	"$THROTTLE" consume g --limit 5/1m
	rcli config resetstat >/dev/null
	run "$THROTTLE" release g --limit 5/1m
	[ "$status" -eq 0 ]
	stats=$(rcli info commandstats)
	# the time is read in the key's round trip, not in one before it
	[[ "$stats" == *"cmdstat_time:calls=1,"* ]] || { echo "$stats"; return 1; }
	rcli config resetstat >/dev/null
	run -127 "$THROTTLE" run r --limit 5/1m -- /nonexistent/command
	stats=$(rcli info commandstats)
	# one clock read for the charge, one for the unit given back
	[[ "$stats" == *"cmdstat_time:calls=2,"* ]] || { echo "$stats"; return 1; }
	[[ "$stats" == *"cmdstat_exec:calls=2,"* ]]
}
