#!/usr/bin/env bats
# throttle shed: the worker utilization load shedder (seed 004).

load lib

prob() {
	run --separate-stderr at "$1" shed w --utilization "$2" --priority "$3" --seed 7 --format json
	field drop_probability "$output"
}

@test "the seed 004 ramp: utilization 1 every 10s, then the dead zone, then recovery" {
	[ "$(prob 0 1 low)" = 0 ]
	[ "$(prob 10 1 low)" = 0 ]
	[ "$(prob 20 1 low)" = 0 ]
	[ "$(prob 30 1 low)" = 0.05 ]
	[ "$(prob 40 1 low)" = 0.3 ]
	[ "$(prob 50 1 low)" = 0.55 ]
	[ "$(prob 60 1 low)" = 0.8 ]
	[ "$(prob 70 1 low)" = 1 ]
	[ "$(prob 80 1 normal)" = 0.3 ]
	[ "$(prob 90 1 high)" = 0 ]
	[ "$(prob 100 1 high)" = 0 ]
	[ "$(prob 110 1 high)" = 0.05 ]
	[ "$(prob 120 1 high)" = 0.3 ]
	[ "$(prob 130 1 critical)" = 0 ]
	[ "$(prob 140 1 high)" = 0.8 ]
	[ "$(prob 150 1 high)" = 1 ]
	[ "$(prob 155 1 critical)" = 0 ]
	[ "$(prob 160 0.75 high)" = 1 ]
	[ "$(prob 170 0 high)" = 0.75 ]
}

@test "shed: exit 1 when shed, 0 to go ahead; json reports the numbers" {
	for t in 0 28 56 84 112 140; do at "$t" shed k --utilization 1 -q || true; done
	run --separate-stderr at 150 shed k --utilization 1 --priority low
	[ "$status" -eq 1 ]
	[ "$stderr" = "throttle: k: shedding low-priority work (drop probability 1)" ]
	run --separate-stderr at 151 shed k --utilization 1 --priority critical --format json
	[ "$status" -eq 0 ]
	[ "$(field allowed "$output")" = true ]
	[ "$(field shedding_amount "$output")" = 1 ]
	[ "$(field utilization "$output")" = 1 ]
	[ "$(field utilization_source "$output")" = '"given"' ]
	[ "$(field priority "$output")" = '"critical"' ]
}

@test "inspect shows a shedder's amount as shed does, rounded the same" {
	# -0.197916666...: shed rounds it to -0.197917, and inspect must too
	at 0 shed S --utilization 0.97 >/dev/null
	run --separate-stderr at 5 shed S --utilization 0.97 --format json
	[ "$(field shedding_amount "$output")" = -0.197917 ]
	run --separate-stderr at 5 inspect S --format json
	[ "$(field shedding_amount "$output")" = -0.197917 ]
}

@test "a new key is at rest: 28s of overload before anything is shed" {
	run at 0 shed k --utilization 5 --format json
	[ "$(field shedding_amount "$output")" = -0.233333 ]
	run at 28 shed k --utilization 5 --priority low --format json
	[ "$(field drop_probability "$output")" = 0 ]
	run at 38 shed k --utilization 5 --priority low --format json
	[ "$(field drop_probability "$output")" = 0.25 ]
}

@test "the time counted per call is capped at 28s" {
	at 0 shed k --utilization 1
	run at 1000 shed k --utilization 1 --format json
	[ "$(field shedding_amount "$output")" = 0 ]
	# a gap between delay and ramp is capped too: 60s counts as 28s
	at 0 shed k2 --utilization 1
	run at 60 shed k2 --utilization 1 --format json
	[ "$(field shedding_amount "$output")" = 0 ]
}

@test "--seed makes the draw reproducible; without it the draw varies" {
	# s = -28/120 + 48/120 = 1/6, so low is dropped with probability 0.5
	for t in 0 28 48; do at "$t" shed k --utilization 1 -q || true; done
	run at 48 shed k --utilization 0.75 --priority low --format json
	[ "$(field drop_probability "$output")" = 0.5 ]
	first=$(at 48 shed k --utilization 0.75 --priority low --seed 42 -q; echo $?)
	for n in 1 2 3 4 5; do
		[ "$(at 48 shed k --utilization 0.75 --priority low --seed 42 -q; echo $?)" = "$first" ]
	done
	# 40 unseeded draws at 0.5 are not all alike
	shed=0
	for n in $(seq 40); do at 48 shed k --utilization 0.75 --priority low -q || shed=$((shed + 1)); done
	[ "$shed" -gt 0 ]
	[ "$shed" -lt 40 ]
}

@test "the constants can be overridden" {
	run at 0 shed k --utilization 0.5 --good-below 0.3 --bad-above 0.4 --delay 10s --ramp 20s --format json
	[ "$(field shedding_amount "$output")" = -0.5 ]
	run at 10 shed k --utilization 0.5 --good-below 0.3 --bad-above 0.4 --delay 10s --ramp 20s --format json
	[ "$(field shedding_amount "$output")" = -0.416667 ]
	# refused, naming the values it was given (and the defaults it kept)
	run at 1 shed k2 --utilization 0.5 --good-below 0.9 --bad-above 0.8
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: shed: --good-below 0.9, --bad-above 0.8, --delay 28s, --ramp 2m: needs 0 < --good-below <= --bad-above < 1" ]
	run at 1 shed k2 --utilization 0.5 --good-below 0
	[ "$status" -eq 2 ]
	[[ "$output" == "throttle: shed: --good-below 0, --bad-above 0.8, "* ]]
	run at 1 shed k2 --utilization 0.5 --ramp 0
	[ "$status" -eq 2 ]
	[ "$output" = "throttle: shed: --good-below 0.7, --bad-above 0.8, --delay 28s, --ramp 0s: needs a --ramp longer than zero" ]
	# --delay is also the most time counted per call: 0 would never shed
	run at 1 shed k2 --utilization 5 --delay 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--delay 0s, --ramp 2m: needs a --delay longer than zero"* ]]
	[ -z "$(at 1 inspect k2 2>/dev/null)" ]
}

@test "README: called hourly at full pressure, shed skips low work from the third hour" {
	mkdir -p fake/pressure
	printf 'some avg10=100.00 avg60=1.00 avg300=0.50 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' >fake/pressure/cpu
	got=
	for h in 0 1 2 3; do
		run --separate-stderr env THROTTLE_PROC="$TMP/fake" THROTTLE_NOW=$((1000000 + h * 3600)) \
		    "$THROTTLE" shed reports --utilization auto --priority low --format json
		got="$got $(field drop_probability "$output")"
	done
	[ "$got" = " 0 0 0.7 1" ] || { echo "drop probabilities:$got"; return 1; }
}

@test "--utilization auto reads PSI, else the load average per CPU" {
	run at 1 shed a --utilization auto --format json
	[ "$status" -eq 0 ]
	[[ "$(field utilization_source "$output")" =~ ^\"(psi|loadavg)\"$ ]]
	mkdir -p fake/pressure
	printf 'some avg10=87.50 avg60=1.00 avg300=0.50 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' >fake/pressure/cpu
	run env THROTTLE_PROC="$TMP/fake" THROTTLE_NOW=1 "$THROTTLE" shed b --utilization auto --format json
	[ "$(field utilization "$output")" = 0.875 ]
	[ "$(field utilization_source "$output")" = '"psi"' ]
	rm fake/pressure/cpu
	echo "3.00 2.00 1.00 1/100 1234" >fake/loadavg
	run env THROTTLE_PROC="$TMP/fake" THROTTLE_NOW=1 "$THROTTLE" shed c --utilization auto --format json
	[ "$(field utilization_source "$output")" = '"loadavg"' ]
	cpus=$(getconf _NPROCESSORS_ONLN)
	want=$(awk -v c="$cpus" 'BEGIN { printf "%.6f", 3 / c }' | sed 's/0*$//; s/\.$//')
	[ "$(field utilization "$output")" = "$want" ]
	# in text, a refusal says which load it read
	echo "$((cpus * 2)).00 2.00 1.00 1/100 1234" >fake/loadavg
	for t in 0 30 60 90; do
		run --separate-stderr env THROTTLE_PROC="$TMP/fake" THROTTLE_NOW=$t "$THROTTLE" shed t --utilization auto --priority low --seed 1
	done
	[ "$status" -eq 1 ]
	[[ "$stderr" =~ "t: shedding low-priority work (drop probability 1; utilization "[0-9.]+" from the load average)" ]] ||
		{ echo "$stderr"; return 1; }
	rm fake/loadavg
	run env THROTTLE_PROC="$TMP/fake" THROTTLE_NOW=1 "$THROTTLE" shed d --utilization auto
	[ "$status" -eq 2 ]
	# the files looked for are named where they were looked for
	[ "$output" = "throttle: --utilization: auto could read a load from neither $TMP/fake/pressure/cpu nor $TMP/fake/loadavg (missing, or not in their format; THROTTLE_PROC names the folder); give a number" ]
}

@test "shed needs --utilization, a number or auto" {
	run "$THROTTLE" shed k
	[ "$status" -eq 2 ]
	run "$THROTTLE" shed k --utilization high
	[ "$status" -eq 2 ]
	[[ "$output" == *"--utilization: 'high'"* ]]
}

@test "shed: --good-below may equal --bad-above; above it is refused" {
	run at 100 shed web --utilization 0.9 --good-below 0.75 --bad-above 0.75 --seed 1
	[ "$status" -eq 0 ]
	run at 100 shed web --utilization 0.9 --good-below 0.8 --bad-above 0.75 --seed 1
	[ "$status" -eq 2 ]
}

@test "shed: gc forgets a shedder no call has fed for a day, and counts it" {
	at 1000 shed s --utilization 0.9 >/dev/null || true
	run at 4600 gc
	[ "$output" = "removed 0 keys at rest, 0 ended leases, 0 ended lockouts and 0 idle shedders" ]
	run at 4600 inspect --names
	[ "$output" = s ]
	run at 87401 gc --format json
	[ "$output" = '{"keys":0,"leases":0,"lockouts":0,"shedders":1}' ]
	run at 87401 inspect --names
	[ "$output" = "" ]
}
