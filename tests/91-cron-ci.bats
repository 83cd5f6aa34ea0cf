#!/usr/bin/env bats
# Cron lines and CI jobs, run the way cron and a CI runner run them.

load lib

# cron LINE: run a crontab command as cron does: /bin/sh -c with cron's
# minimal environment (no TERM, PATH=/usr/bin:/bin, HOME and SHELL set).
cron() {
	env -i PATH=/usr/bin:/bin HOME="$TMP" SHELL=/bin/sh LOGNAME=root \
	    /bin/sh -c "$1"
}

@test "cron: at most once a day however often cron fires, silently" {
	line="THROTTLE_NOW=\$(cat $TMP/now) $THROTTLE run nightly --db $TMP/state.db --limit 1/1d --conflict-exit-code 0 -q -- /bin/sh -c 'echo ran >>$TMP/log'"
	for t in 1000 1600 2200 80000 87399; do
		echo "$t" >"$TMP/now"
		run cron "$line"
		[ "$status" -eq 0 ]
		[ "$output" = "" ] # cron mails nothing
	done
	[ "$(wc -l <"$TMP/log")" -eq 1 ]
	echo 87400 >"$TMP/now"
	cron "$line"
	[ "$(wc -l <"$TMP/log")" -eq 2 ]
}

@test "cron: never overlapping, however long a run takes" {
	line="$THROTTLE run sync --db $TMP/state.db --concurrency 1 --conflict-exit-code 0 -q -- /bin/sh -c 'echo start >>$TMP/log; sleep 3; echo end >>$TMP/log'"
	for n in 1 2 3 4; do
		cron "$line" &
		sleep 0.2
	done
	wait
	[ "$(grep -c start "$TMP/log")" -eq 1 ]
	cron "$line"
	[ "$(grep -c start "$TMP/log")" -eq 2 ]
}

@test "cron: low-priority work is skipped when the machine is overloaded" {
	line="THROTTLE_NOW=\$(cat $TMP/now) $THROTTLE shed reports --db $TMP/state.db --utilization \$(cat $TMP/u) --priority low --seed 1 -q || exit 0; echo \$(cat $TMP/now) >>$TMP/log"
	echo 0.2 >"$TMP/u"
	for t in 0 30 60; do
		echo "$t" >"$TMP/now"
		run cron "$line"
		[ "$output" = "" ] || { echo "t=$t: cron would mail: $output"; return 1; }
	done
	echo 1 >"$TMP/u"
	for t in 90 120 150 180 210 240; do
		echo "$t" >"$TMP/now"
		run cron "$line"
		[ "$output" = "" ] || { echo "t=$t: cron would mail: $output"; return 1; }
	done
	# 28s of overload from rest puts the amount at 0 (t=90 runs); then it
	# rises 1/120 a second: at t=120 low work is shed with probability
	# 0.7 (seed 1 draws below it), from t=150 always
	[ "$(tr '\n' ' ' <"$TMP/log")" = "0 30 60 90 " ]
}

@test "CI: a staging server shared by at most two jobs; all of them run" {
	for n in 1 2 3 4 5 6; do
		("$THROTTLE" run staging --concurrency 2 --wait -- /bin/sh -c "echo + >>$TMP/log; sleep 0.3; echo - >>$TMP/log") &
	done
	wait
	[ "$(grep -c + "$TMP/log")" -eq 6 ]
	max=$(awk '$1 == "+" { n++; if (n > m) m = n } $1 == "-" { n-- } END { print m }' "$TMP/log")
	[ "$max" -le 2 ]
	[ "$max" -ge 1 ]
}

@test "CI: a deploy limit shared by pipelines waits its turn" {
	# the README's "run deploy --limit 3/1h --wait=30m", at a test's pace
	for n in 1 2 3 4 5; do
		("$THROTTLE" run deploy --limit 3/3s --wait=30s -- /bin/sh -c "date +%s%N >>$TMP/log") &
	done
	wait
	[ "$(wc -l <"$TMP/log")" -eq 5 ]
	sort -n "$TMP/log" >"$TMP/sorted"
	first=$(head -1 "$TMP/sorted")
	fourth=$(sed -n 4p "$TMP/sorted")
	# three at once, the fourth one interval (1s) later
	[ $(((fourth - first) / 1000000)) -ge 900 ]
	run "$THROTTLE" run deploy --limit 3/3s --wait=10ms -- true
	[ "$status" -eq 75 ]
}
