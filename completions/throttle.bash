# bash completion for throttle(1)

# The keys of the store the line names: --db FILE or --db=FILE on the
# line, else the environment's.  (bash takes a THROTTLE_DB=... before
# throttle off the line it gives a completion: it cannot be seen here.)
_throttle_keys()
{
	local db="" w i
	for ((i = 1; i < ${#words[@]} - 1; i++)); do
		w=${words[i]}
		[[ $w == -- ]] && break
		case $w in
		--db) db=${words[i + 1]} ;;
		--db=*) db=${w#--db=} ;;
		esac
	done
	db=${db#[\"\']}
	db=${db%[\"\']}
	[[ $db == "~/"* ]] && db=$HOME/${db#"~/"}
	# names one a line whatever THROTTLE_FORMAT says, and a store that
	# does not answer costs a TAB a second, not --lock-timeout's 5
	if [[ -n $db ]]; then
		throttle --db "$db" --format text --lock-timeout 1s inspect --names 2>/dev/null
	else
		throttle --format text --lock-timeout 1s inspect --names 2>/dev/null
	fi
}

_throttle()
{
	# the words as the shell would split them on blanks alone: readline
	# also breaks at ':' (COMP_WORDBREAKS), which would split login:alice
	local line=${COMP_LINE:0:COMP_POINT} words=() cur prev
	read -ra words <<<"$line"
	[[ -z $line || $line == *[[:space:]] ]] && words+=("")
	cur=${words[${#words[@]} - 1]}
	prev=${words[${#words[@]} - 2]}
	local commands="consume check release inspect reset acquire renew run shed policy gc verify batch help"
	local global="--db --format --quiet -q --lock-timeout --on-error --help -h --version"
	local rate="--limit --burst --algorithm --granularity --cost"
	local lease="--concurrency --ttl --priority --reserve"
	local shedopts="--utilization --priority --seed --good-below --bad-above --delay --ramp"
	local cmd="" ci=0 dd=0 w i

	# a duration, as --wait takes the next word when it is one: 90, 1.5s,
	# 1h30m, m
	local durre='^([0-9.]*(ms|w|d|h|m|s))+$|^[0-9][0-9.]*$'
	# options that take the next word (--wait: when it is a duration)
	local valued="--db|--format|--lock-timeout|--on-error|--limit|--burst|--algorithm|--granularity|--cost|--concurrency|--ttl|--owner|--priority|--reserve|--lease|--utilization|--seed|--good-below|--bad-above|--delay|--ramp|--conflict-exit-code|--lockout"
	for ((i = 1; i < ${#words[@]} - 1; i++)); do
		w=${words[i]}
		case $w in
		--) break ;;
		--wait) [[ ${words[i + 1]} =~ $durre ]] && ((i++)) ;;
		-*) [[ "|$valued|" == *"|$w|"* ]] && ((i++)) ;;
		*) cmd=$w ci=$i; break ;;
		esac
	done
	# the first -- after the command, before the word being completed:
	# what follows it is no option (a key, or run's command)
	local haskey=0
	for ((i = ci + 1; ci > 0 && i < ${#words[@]} - 1; i++)); do
		w=${words[i]}
		case $w in
		--) dd=$i; break ;;
		--wait) [[ ${words[i + 1]} =~ $durre ]] && ((i++)) ;;
		-*) [[ "|$valued|" == *"|$w|"* ]] && ((i++)) ;;
		*) haskey=1 ;;
		esac
	done
	if [[ $cmd == run ]] && ((dd > 0)); then
		# after --, the command and its own words; with no key before
		# it, run [options] -- KEY -- COMMAND: the key, then after the
		# second -- the command
		i=$dd
		local dashes=1
		if ((!haskey && dd + 1 == ${#words[@]} - 1)); then
			_throttle_offer_keys "$cur" 1
			return
		fi
		if ((!haskey)) && [[ ${words[dd + 2]} == -- ]] &&
			((dd + 2 < ${#words[@]} - 1)); then
			((i += 2))
			dashes=2
		fi
		if declare -F _command_offset >/dev/null; then
			# readline's words split a key at ':' and '=': count
			# the "--" there instead
			for ((i = 1; i < COMP_CWORD; i++)); do
				[[ ${COMP_WORDS[i]} == -- ]] &&
					((--dashes == 0)) && break
			done
			_command_offset $((i + 1))
		elif ((i == ${#words[@]} - 2)); then
			COMPREPLY=($(compgen -c -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return
	fi
	if ((dd > 0)); then
		# after --: a key, even one that begins with -
		case $cmd in
		gc | verify | batch | help | policy) ;;
		# a key already after the --: none more
		*) ((haskey || dd + 1 < ${#words[@]} - 1)) || _throttle_offer_keys "$cur" 1 ;;
		esac
		return
	fi
	# an option's value (past any --, where no option is); --opt=value:
	# the value completes as after --opt (readline breaks
	# the word at '=', so the reply is the value alone)
	local opt=$prev eq="" word=$cur
	if [[ $cur == --*=* ]]; then
		opt=${cur%%=*}
		cur=${cur#*=}
		[[ $COMP_WORDBREAKS == *=* ]] || eq=$opt=
	fi
	case $opt in
	--algorithm) COMPREPLY=($(compgen -W "gcra token-bucket fixed-window sliding-window hybrid" -- "$cur")) ;;
	--format) COMPREPLY=($(compgen -W "text json shell" -- "$cur")) ;;
	--on-error) COMPREPLY=($(compgen -W "fail allow deny" -- "$cur")) ;;
	--priority) COMPREPLY=($(compgen -W "critical high normal low" -- "$cur")) ;;
	--utilization) COMPREPLY=($(compgen -W "auto" -- "$cur")) ;;
	--lockout) COMPREPLY=($(compgen -W "never" -- "$cur")) ;;
	--db)
		# file names as files: a space kept in one, a / after a folder
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		;;
	--limit|--burst|--cost|--lock-timeout|--granularity|--concurrency|--ttl|--owner|--reserve|--lease|--seed|--good-below|--bad-above|--delay|--ramp|--conflict-exit-code) ;;
	*) opt="" cur=$word ;;
	esac
	if [[ -n $opt ]]; then
		[[ -n $eq ]] && COMPREPLY=("${COMPREPLY[@]/#/$eq}")
		return
	fi
	if [[ $cur == -* ]]; then
		case $cmd in
		consume) COMPREPLY=($(compgen -W "$rate --lockout --wait $global" -- "$cur")) ;;
		check) COMPREPLY=($(compgen -W "$rate --lockout $global" -- "$cur")) ;;
		release) COMPREPLY=($(compgen -W "$rate --lease $global" -- "$cur")) ;;
		acquire) COMPREPLY=($(compgen -W "$lease --owner --wait $global" -- "$cur")) ;;
		renew) COMPREPLY=($(compgen -W "--lease --ttl $global" -- "$cur")) ;;
		run) COMPREPLY=($(compgen -W "$rate --lockout --wait $lease --conflict-exit-code $global" -- "$cur")) ;;
		shed) COMPREPLY=($(compgen -W "$shedopts $global" -- "$cur")) ;;
		policy)
			# list, show and delete take no limit options: only set
			case ${words[ci + 1]} in
			list | show | delete) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
			*) COMPREPLY=($(compgen -W "--limit --burst --algorithm --granularity --lockout --concurrency --reserve --ttl $global" -- "$cur")) ;;
			esac
			;;
		verify) COMPREPLY=($(compgen -W "--quick $global" -- "$cur")) ;;
		inspect)
			# --names and --locked do not go together
			if [[ " ${words[*]} " == *" --names "* || " ${words[*]} " == *" --locked "* ]]; then
				COMPREPLY=($(compgen -W "$global" -- "$cur"))
			else
				COMPREPLY=($(compgen -W "--names --locked $global" -- "$cur"))
			fi
			;;
		*) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
		esac
		return
	fi
	case $cmd in
	"") COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	# one command, one key: none more once it is there
	help) ((haskey)) || COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	policy) [[ $prev == policy ]] && COMPREPLY=($(compgen -W "set list show delete" -- "$cur")) ;;
	gc | verify | batch) ;;
	*) ((haskey)) || _throttle_offer_keys "$cur" 0 ;;
	esac
}

# _throttle_offer_keys CUR DASHES: the keys that begin with CUR, as the
# shell reads them back; one that begins with - only if DASHES (after --,
# where it is no option)
_throttle_offer_keys()
{
	local cur=$1 IFS=$'\n' k i
	COMPREPLY=()
	while read -r k; do
		[[ $k == -* && $2 == 0 ]] && continue
		[[ $k == "$cur"* ]] && COMPREPLY+=("$k")
	done < <(_throttle_keys)
	for i in "${!COMPREPLY[@]}"; do
		# readline replaces only what follows the last ':' or '='
		# (word breaks): offer that part alone
		local brk=""
		[[ $COMP_WORDBREAKS == *:* ]] && brk+=":"
		[[ $COMP_WORDBREAKS == *=* ]] && brk+="="
		if [[ -n $brk && $cur == *[$brk]* ]]; then
			COMPREPLY[i]=${COMPREPLY[i]#"${cur%"${cur##*[$brk]}"}"}
		fi
		# a key with a space or a shell character is one word, as the
		# shell reads it back
		if [[ ${COMPREPLY[i]} == *[!A-Za-z0-9_.:@/+=,-]* ]]; then
			printf -v k '%q' "${COMPREPLY[i]}"
			COMPREPLY[i]=$k
		fi
	done
}
complete -F _throttle throttle
