#!/bin/sh
# CPU per sequenced claim, by process name (docs/PERFORMANCE.md at b45f87f, "Sequenced
# claim without a fetch").
#
#   bench/seqclaim-cpu.sh TALLY_BIN [CLAIMS [AGENTS]]
#
# Sets up a bare repository with TALLY_BIN's server hooks (the server's copy
# named srv-<name>, so server and client tally are told apart), a loopback
# git daemon, a 500-cell plan and AGENTS (default 1) clones with
# tally.sequencer=true, and runs the setup plus 0 and then CLAIMS (default
# 30) sequenced `claim --next` per agent, one after another in each clone
# and the clones at once (unsynchronized, as RemoteContention), each whole
# run under `perf record -e task-clock` (which follows the children:
# the daemon's and the hooks'). SEQCLAIM_SERVER_CONFIG (KEY=VALUE words) is
# set in the server's repository after the install. The difference of the two runs,
# divided by CLAIMS*AGENTS, is printed per process name (ms of CPU per
# claim), then the total. Needs perf, git, python3.
#
#   bench/seqclaim-cpu.sh --procs TALLY_BIN [CLAIMS [AGENTS]]
#
# runs the same two scenarios with git's trace2 events on (which name each
# git process's pid, subcommand and parent commands) and prints the CPU and
# the processes per claim by command and side (bench/seqclaim-procs.py).
# KEEP=1 leaves the records and traces in the work directory.
set -e
if [ "$1" = --scenario ]; then
	bin=$2 n=$3 sbin=$4 agents=$5
	w=$(mktemp -d)
	export HOME=$w/home GIT_CONFIG_NOSYSTEM=1
	mkdir -p "$HOME" "$w/srv"
	git config --global user.email agent@example.com
	git config --global user.name agent
	git config --global init.defaultBranch main
	git init -q --bare "$w/srv/shared.git"
	(cd "$w/srv/shared.git" && "$bin" hooks install --server --tally "$sbin" >/dev/null)
	for kv in $SEQCLAIM_SERVER_CONFIG; do
		git -C "$w/srv/shared.git" config "${kv%%=*}" "${kv#*=}"
	done
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	git daemon --reuseaddr --listen=127.0.0.1 --port="$port" --base-path="$w/srv" --export-all --enable=receive-pack "$w/srv" &
	dpid=$!
	trap 'kill $dpid; rm -rf "$w"' EXIT
	until git ls-remote "git://127.0.0.1:$port/shared.git" >/dev/null 2>&1; do :; done
	git clone -q "git://127.0.0.1:$port/shared.git" "$w/seed" 2>/dev/null
	cd "$w/seed"
	git commit -q --allow-empty -m root && git push -q origin main
	python3 -c 'import json; print(json.dumps({"wave":"w","cells":[{"id":"c%03d"%i} for i in range(500)]}))' >"$w/plan.json"
	TALLY_ACTOR=planner "$bin" --remote origin init >/dev/null
	TALLY_ACTOR=planner "$bin" --remote origin plan "$w/plan.json" >/dev/null
	a=0
	while [ "$a" -lt "$agents" ]; do
		git clone -q "git://127.0.0.1:$port/shared.git" "$w/agent$a"
		git -C "$w/agent$a" config tally.sequencer true
		(cd "$w/agent$a" && TALLY_ACTOR=agent$a "$bin" --remote origin claim --next --ttl 3600 >/dev/null) # the first one fetches
		a=$((a + 1))
	done
	a=0
	while [ "$a" -lt "$agents" ]; do
		(
			cd "$w/agent$a"
			i=0
			while [ "$i" -lt "$n" ]; do
				TALLY_ACTOR=agent$a "$bin" --remote origin claim --next --ttl 3600 >/dev/null
				i=$((i + 1))
			done
		) &
		pids="$pids $!"
		a=$((a + 1))
	done
	wait $pids # not the daemon
	exit 0
fi
procs=
if [ "$1" = --procs ]; then
	procs=1
	shift
fi
bin=$(realpath "$1") n=${2:-30} agents=${3:-1}
d=$(mktemp -d)
trap '[ -n "$KEEP" ] || rm -rf "$d"' EXIT
sbin=$d/srv-$(basename "$bin")
cp "$bin" "$sbin"
if [ -n "$procs" ]; then
	for k in 0 "$n"; do
		mkdir -p "$d/$k/tr2"
		GIT_TRACE2_EVENT=$d/$k/tr2 GIT_TRACE2_EVENT_NESTING=1 perf record -q -e task-clock -o "$d/rec-$k" "$0" --scenario "$bin" "$k" "$sbin" "$agents" >/dev/null 2>&1
		perf script -i "$d/rec-$k" -F pid,comm,period 2>/dev/null >"$d/$k/samples"
	done
	python3 "$(dirname "$0")/seqclaim-procs.py" "$d/0" "$d/$n" "$((n * agents))"
	exit 0
fi
for k in 0 "$n"; do
	perf record -q -e task-clock -o "$d/rec-$k" "$0" --scenario "$bin" "$k" "$sbin" "$agents" >/dev/null 2>&1
	perf report -i "$d/rec-$k" --sort comm --stdio -F period,comm 2>/dev/null | awk '!/^#/ && NF == 2 {print $2, $1 / 1e6}' >"$d/ms-$k"
done
awk -v n="$((n * agents))" 'NR == FNR {a[$1] = $2; next} {d = ($2 - a[$1]) / n; t += d; if (d >= 0.3) printf "%-16s %6.1f ms\n", $1, d} END {printf "%-16s %6.1f ms\n", "total", t}' "$d/ms-0" "$d/ms-$n"
