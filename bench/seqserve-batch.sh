#!/bin/sh
# The server's sequencer alone, under concurrent requests (issue #32, item
# 3): K proc-receive hooks at once, R rounds, each hook fed one claim --next
# request as git's receive-pack would feed it, on a bare repository with a
# plan of K*R ready cells. No client, no git transport: what is measured is
# the sequencer's own work and its writer lock, where batching the requests
# that arrive together (one pack, one fsync round, one ref move) counts.
#
#   bench/seqserve-batch.sh TALLY_BIN K R
#
# prints "K R seconds entries/s" for the timed rounds (setup excluded) and
# fails unless every request was granted and the ledger verifies. Compare
# two builds in one run, alternating:
#
#   for i in 1 2 3; do bench/seqserve-batch.sh OLD 8 20; bench/seqserve-batch.sh NEW 8 20; done
set -e
bin=$(realpath "$1") k=$2 r=$3
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
git init -q --bare "$w/s.git"
cd "$w/s.git"
"$bin" --actor planner --local --json init >/dev/null
n=$((k * r))
{
	echo "wave: w"
	echo "cells:"
	i=0
	while [ $i -lt $n ]; do
		echo "  - id: c$i"
		i=$((i + 1))
	done
} >"$w/plan.yaml"
"$bin" --actor planner --local --json plan "$w/plan.yaml" >/dev/null
tree=$(git hash-object -w -t tree /dev/null)
zero=0000000000000000000000000000000000000000
pkt() { printf '%04x%s' $((${#1} + 4)) "$1"; }
i=0
while [ $i -lt $n ]; do
	nonce=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	msg="{\"actor\":\"a$i\",\"holder\":{\"host\":\"h\",\"pid\":$((i + 1))},\"nonce\":\"$nonce\",\"op\":\"claim-next\",\"ttl\":3600,\"v\":2}"
	id=$(printf 'tree %s\nauthor tally <tally> 0 +0000\ncommitter tally <tally> 0 +0000\n\n%s' "$tree" "$msg" |
		git hash-object -w -t commit --stdin)
	{
		pkt "version=1
"
		printf 0000
		pkt "$zero $id refs/for/tally/claim-next
"
		printf 0000
	} >"$w/in.$i"
	i=$((i + 1))
done
start=$(date +%s%N)
round=0
while [ $round -lt $r ]; do
	j=0
	while [ $j -lt $k ]; do
		i=$((round * k + j))
		GIT_DIR=. "$bin" hook proc-receive <"$w/in.$i" >"$w/out.$i" 2>/dev/null &
		j=$((j + 1))
	done
	wait
	round=$((round + 1))
done
end=$(date +%s%N)
granted=$(cat "$w"/out.* | grep -ao 'option new-oid' | wc -l)
if [ "$granted" -ne $n ]; then
	echo "$granted of $n requests granted" >&2
	exit 1
fi
"$bin" --local --json verify >/dev/null
echo "$k $r $(((end - start) / 1000000)) ms $((n * 1000000000 / (end - start))) entries/s"
