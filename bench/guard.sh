#!/bin/sh
# Whole-process latency of the edit guard (FORMAT.md §9c, issue 29): one
# `tally guard --agent claude` on a Write payload, against
# `git rev-parse --verify HEAD` on the same repository, alternated in one run.
#
#   bench/guard.sh DIR [RUNS]
#
# DIR keeps the repository between calls: DIR/empty is the 100k-entry ledger
# `go run ./bench -dir DIR -entries 100000 -build` makes (built here if
# missing), with 1,000 live path locks added here (31 actors x 32 patterns
# plus 8, ttl one day), none of them the guard's actor's. The payload writes
# src/main.go, a path nobody holds: the common case, an allowed edit that
# appends nothing. Prints p50 and p99 of wall time for each and the ratio
# of the p50s. Needs go, git, python3. The p99 is the machine's as much as
# tally's: read it beside git's p99 from the same run.
set -e
dir=$(cd "$1" && pwd)
runs=${2:-300}
repo=$dir/empty
tally=$dir/tally
export GIT_CONFIG_NOSYSTEM=1
CGO_ENABLED=0 go build -o "$tally" ./cmd/tally
[ -d "$repo" ] || go run ./bench -dir "$dir" -entries 100000 -build
if [ ! -e "$dir/locks-added" ]; then
	n=0
	for a in $(seq 0 31); do
		pats=
		for i in $(seq 0 31); do
			[ $n -lt 1000 ] || break
			pats="$pats area/$(printf %04d $n)/**"
			n=$((n+1))
		done
		[ -n "$pats" ] || break
		# shellcheck disable=SC2086 # one argument per pattern
		TALLY_ACTOR=holder-$a "$tally" -C "$repo" lock --ttl 86400 $pats >/dev/null
	done
	touch "$dir/locks-added"
fi
printf '{"hook_event_name":"PreToolUse","session_id":"bench","cwd":"%s","tool_name":"Write","tool_input":{"file_path":"%s/src/main.go","content":"x"}}' \
	"$repo" "$repo" >"$dir/payload.json"
TALLY_ACTOR=agent "$tally" guard --agent claude <"$dir/payload.json" >/dev/null # must allow: set -e
python3 - "$runs" "$tally" "$repo" "$dir/payload.json" <<'PY'
import os, subprocess, sys, time
runs, tally, repo, payload = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
env = dict(os.environ, TALLY_ACTOR="agent")
null = open(os.devnull, "w")
def once(argv, stdin):
    with open(stdin) as f:
        t = time.perf_counter()
        subprocess.run(argv, stdin=f, stdout=null, stderr=null, env=env, check=True)
        return time.perf_counter() - t
guard = [tally, "guard", "--agent", "claude"]
git = ["git", "-C", repo, "rev-parse", "--verify", "HEAD"]
g, r = [], []
for _ in range(5):
    once(guard, payload); once(git, os.devnull)
for _ in range(runs):
    g.append(once(guard, payload)); r.append(once(git, os.devnull))
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000
print(f"runs {runs}: guard p50 {pct(g,50):.2f} ms p99 {pct(g,99):.2f} ms; "
      f"git rev-parse p50 {pct(r,50):.2f} ms p99 {pct(r,99):.2f} ms; ratio of p50s {pct(g,50)/pct(r,50):.2f}")
PY
