#!/bin/sh
# One sequenced claim, replayed alone on a fresh copy of a saved scenario, so
# that the client's tally or the server's proc-receive process (srv-tally)
# can be measured under callgrind, strace or perf stat (docs/PERFORMANCE.md at b45f87f,
# "Sequenced claims, CPU a claim").
#
#   bench/seqclaim-replay.sh setup TALLY_BIN DIR BEHIND
#
# builds in DIR a bare repository with TALLY_BIN's server hooks (the
# server's tally a wrapper, DIR/srv-tally, that runs $SEQCLAIM_SRV), a
# 500-cell plan and two clones with tally.sequencer=true; clone A claims
# twice, then clone B claims BEHIND times, so that A's next claim receives
# BEHIND+1 entries in the server's answer (BEHIND 7: what an agent receives
# at 8 agents). The git daemon runs only while a command does, on the port
# saved in DIR/port.
#
#   bench/seqclaim-replay.sh client DIR CLIENT_BIN SERVER_BIN [CMD...]
#
# copies DIR to DIR.run and runs A's claim there with CLIENT_BIN, CMD (for
# example valgrind --tool=callgrind) prefixing it; the server runs
# SERVER_BIN.
#
#   bench/seqclaim-replay.sh capture DIR SERVER_BIN
#
# runs A's claim once (client SERVER_BIN) and saves what the server's
# proc-receive read and the repository before it in DIR/cap;
#
#   bench/seqclaim-replay.sh server DIR SERVER_BIN [CMD...]
#
# replays that proc-receive run on a copy (DIR.srv), CMD prefixing it, its
# stderr (the sent range) in DIR.srv.err. Replay one with
# GODEBUG=asyncpreemptoff=1 under callgrind (it can abort on the runtime's
# preemption signals otherwise).
set -e
daemon() { # daemon DIR: serve DIR/srv on DIR's port until the script exits
	port=$(cat "$1/port")
	git daemon --reuseaddr --listen=127.0.0.1 --port="$port" --base-path="$1/srv" --export-all --enable=receive-pack "$1/srv" &
	dpid=$!
	trap 'kill $dpid; wait $dpid 2>/dev/null || :' EXIT
	until git ls-remote "git://127.0.0.1:$port/shared.git" >/dev/null 2>&1; do :; done
}
claim() { # claim CLONE ACTOR [CMD...] BIN (in a subshell: sh has no locals)
	(cd "$1" && shift && actor=$1 && shift && TALLY_ACTOR=$actor "$@" --remote origin claim --next --ttl 3600 >/dev/null)
}
cmd=$1
shift
case $cmd in
setup)
	bin=$(realpath "$1") w=$2 behind=$3
	rm -rf "$w"
	mkdir -p "$w/home" "$w/srv"
	w=$(realpath "$w")
	export HOME=$w/home GIT_CONFIG_NOSYSTEM=1 SEQCLAIM_SRV=$bin
	git config --global user.email agent@example.com
	git config --global user.name agent
	git config --global init.defaultBranch main
	printf '#!/bin/sh\nif [ -n "$SEQCLAIM_CAP" ] && [ "$1 $2" = "hook proc-receive" ]; then\n\tmkdir -p "$SEQCLAIM_CAP/repo"\n\ttar -c --exclude="./objects/tmp_objdir-*" . | tar -x -C "$SEQCLAIM_CAP/repo"\n\ttee "$SEQCLAIM_CAP/stdin" | "$SEQCLAIM_SRV" "$@"\n\texit $?\nfi\nexec "$SEQCLAIM_SRV" "$@"\n' >"$w/srv-tally"
	chmod +x "$w/srv-tally"
	git init -q --bare "$w/srv/shared.git"
	(cd "$w/srv/shared.git" && "$bin" hooks install --server --tally "$w/srv-tally" >/dev/null)
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' >"$w/port"
	daemon "$w"
	url=git://127.0.0.1:$(cat "$w/port")/shared.git
	git clone -q "$url" "$w/seed" 2>/dev/null
	(cd "$w/seed" && git commit -q --allow-empty -m root && git push -q origin main)
	python3 -c 'import json; print(json.dumps({"wave":"w","cells":[{"id":"c%03d"%i} for i in range(500)]}))' >"$w/plan.json"
	(cd "$w/seed" && TALLY_ACTOR=planner "$bin" --remote origin init >/dev/null && TALLY_ACTOR=planner "$bin" --remote origin plan "$w/plan.json" >/dev/null)
	for a in A B; do
		git clone -q "$url" "$w/agent$a"
		git -C "$w/agent$a" config tally.sequencer true
		claim "$w/agent$a" "agent$a" "$bin" # the first one fetches
		claim "$w/agent$a" "agent$a" "$bin"
	done
	i=0
	while [ "$i" -lt "$behind" ]; do
		claim "$w/agentB" agentB "$bin"
		i=$((i + 1))
	done
	;;
client | capture)
	w=$(realpath "$1")
	if [ "$cmd" = client ]; then
		cbin=$(realpath "$2") sbin=$(realpath "$3")
		shift 3
	else
		cbin=$(realpath "$2") sbin=$cbin
		shift 2
		rm -rf "$w/cap"
		export SEQCLAIM_CAP=$w/cap
	fi
	# the copy keeps DIR's paths: the hooks name DIR/srv-tally, the
	# clone's remote DIR's port
	rm -rf "$w.run"
	cp -a "$w" "$w.run"
	export HOME=$w/home GIT_CONFIG_NOSYSTEM=1 SEQCLAIM_SRV=$sbin
	daemon "$w.run"
	claim "$w.run/agentA" agentA "$@" "$cbin"
	;;
server)
	w=$(realpath "$1") sbin=$(realpath "$2")
	shift 2
	rm -rf "$w.srv"
	cp -a "$w/cap/repo" "$w.srv"
	(cd "$w.srv" && GIT_DIR=. "$@" "$sbin" hook proc-receive <"$w/cap/stdin" >/dev/null 2>"$w.srv.err")
	;;
*)
	echo "usage: $0 setup|client|capture|server ..." >&2
	exit 2
	;;
esac
