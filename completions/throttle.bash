# bash completion for throttle(1)

_throttle_keys()
{
	throttle inspect --names 2>/dev/null
}

_throttle()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local commands="consume check release inspect reset acquire renew run shed policy gc verify batch help"
	local global="--db --format --quiet -q --lock-timeout --on-error --help --version"
	local decide="--limit --burst --algorithm --granularity --cost --lockout --wait"
	local lease="--concurrency --ttl --owner --priority --reserve --wait"
	local shedopts="--utilization --priority --seed --good-below --bad-above --delay --ramp"
	local cmd="" w i

	case $prev in
	--algorithm) COMPREPLY=($(compgen -W "gcra token-bucket fixed-window sliding-window hybrid" -- "$cur")); return ;;
	--format) COMPREPLY=($(compgen -W "text json shell" -- "$cur")); return ;;
	--on-error) COMPREPLY=($(compgen -W "fail allow deny" -- "$cur")); return ;;
	--priority) COMPREPLY=($(compgen -W "critical high normal low" -- "$cur")); return ;;
	--utilization) COMPREPLY=($(compgen -W "auto" -- "$cur")); return ;;
	--db) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--limit|--burst|--cost|--lock-timeout|--granularity|--concurrency|--ttl|--owner|--reserve|--lease|--seed|--good-below|--bad-above|--delay|--ramp|--conflict-exit-code|--lockout) return ;;
	esac
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--db|--format|--lock-timeout|--on-error|--limit|--burst|--algorithm|--granularity|--cost|--concurrency|--ttl|--owner|--priority|--reserve|--lease|--utilization|--seed|--good-below|--bad-above|--delay|--ramp|--conflict-exit-code|--lockout) ((i++)) ;;
		-*) ;;
		*) cmd=$w; break ;;
		esac
	done
	if [[ $cur == -* ]]; then
		case $cmd in
		consume|check) COMPREPLY=($(compgen -W "$decide $global" -- "$cur")) ;;
		release) COMPREPLY=($(compgen -W "$decide --lease $global" -- "$cur")) ;;
		acquire) COMPREPLY=($(compgen -W "$lease $global" -- "$cur")) ;;
		renew) COMPREPLY=($(compgen -W "--lease --ttl $global" -- "$cur")) ;;
		run) COMPREPLY=($(compgen -W "$decide $lease --conflict-exit-code $global" -- "$cur")) ;;
		shed) COMPREPLY=($(compgen -W "$shedopts $global" -- "$cur")) ;;
		policy) COMPREPLY=($(compgen -W "--limit --burst --algorithm --granularity --lockout --concurrency --reserve --ttl $global" -- "$cur")) ;;
		verify) COMPREPLY=($(compgen -W "--quick $global" -- "$cur")) ;;
		inspect) COMPREPLY=($(compgen -W "--names --locked $global" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "$global" -- "$cur")) ;;
		esac
		return
	fi
	case $cmd in
	"") COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	policy) [[ $prev == policy ]] && COMPREPLY=($(compgen -W "set list show delete" -- "$cur")) ;;
	gc | verify | batch) ;;
	*)
		local IFS=$'\n'
		COMPREPLY=($(compgen -W "$(_throttle_keys)" -- "$cur"))
		;;
	esac
}
complete -F _throttle throttle
