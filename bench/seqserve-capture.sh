#!/bin/sh
# Captures one server-side proc-receive run of a sequenced claim, so its
# process (srv-tally) can be replayed alone under callgrind or strace
# (docs/PERFORMANCE.md, "The sequencer's process").
#
#   bench/seqserve-capture.sh TALLY_BIN OUT [CLAIMS]
#
# Sets up a bare repository served by a loopback git daemon with TALLY_BIN's
# server hooks, a 500-cell plan and two clones with tally.sequencer=true,
# and runs CLAIMS (default 6) rounds of one sequenced `claim --next` per
# clone. Each proc-receive run's stdin goes to OUT/<n>/stdin and the
# repository as it was before that run to OUT/<n>/repo (the server appends
# a 10th pack by merging the small ones: runs 10, 20, ... merge). Replay one
# on a fresh copy each time (the run moves the ledger):
#
#   cp -a OUT/12/repo R && (cd R && GIT_DIR=. GODEBUG=asyncpreemptoff=1 \
#     valgrind --tool=callgrind BIN hook proc-receive <OUT/12/stdin >/dev/null)
#
# (without asyncpreemptoff callgrind can abort on the runtime's preemption
# signals; strace -f -c in place of valgrind counts the system calls).
set -e
if [ "$1" = --hook ]; then # the server's tally: capture, then run the real one
	out=$2 bin=$3
	shift 3
	if [ "$1 $2" = "hook proc-receive" ]; then
		c=$(($(cat "$out/count" 2>/dev/null || echo 0) + 1))
		echo "$c" >"$out/count"
		mkdir -p "$out/$c"
		cp -a "$(pwd)" "$out/$c/repo"
		tee "$out/$c/stdin" | "$bin" "$@" # git waits for the version line: no cat
		exit $?
	fi
	exec "$bin" "$@"
fi
bin=$(realpath "$1") out=$(realpath "$2") n=${3:-6}
w=$(mktemp -d)
mkdir -p "$out"
printf '#!/bin/sh\nexec %s --hook %s %s "$@"\n' "$(realpath "$0")" "$out" "$bin" >"$w/srv-tally"
chmod +x "$w/srv-tally"
export HOME=$w/home GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" "$w/srv"
git config --global user.email agent@example.com
git config --global user.name agent
git config --global init.defaultBranch main
git init -q --bare "$w/srv/shared.git"
(cd "$w/srv/shared.git" && "$bin" hooks install --server --tally "$w/srv-tally" >/dev/null)
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
for a in 0 1; do
	git clone -q "git://127.0.0.1:$port/shared.git" "$w/agent$a"
	git -C "$w/agent$a" config tally.sequencer true
done
i=0
while [ "$i" -lt "$n" ]; do
	for a in 0 1; do
		(cd "$w/agent$a" && TALLY_ACTOR=agent$a "$bin" --remote origin claim --next --ttl 3600 >/dev/null)
	done
	i=$((i + 1))
done
echo "$(cat "$out/count") proc-receive runs captured in $out"
