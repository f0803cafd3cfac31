#!/usr/bin/env python3
"""CPU per sequenced claim by command and side (docs/PERFORMANCE.md at b45f87f,
"Sequenced claims, git's share").

    bench/seqclaim-procs.py DIR0 DIRN CLAIMS

Each DIR holds `samples` (`perf script -F pid,comm,period` of a task-clock
record of one bench/seqclaim-cpu.sh scenario) and `tr2/`, the git trace2
event files of its git processes (GIT_TRACE2_EVENT, one per process, named
by its session id, which ends in -P<pid in hex>). A git process is named by
its subcommand and is on the server side when git-daemon, receive-pack or
upload-pack is in its trace2 hierarchy (receive-pack passes it on to its hooks and their children); any
other process by its command name (comm), on the server side when it is a
hook, tr (the pre-receive shim's before seq8), true (core.alternateRefsCommand)
or a server tally (srv-*). The CPU and
process count of each name in DIR0 (the setup alone) is subtracted from
DIRN's and divided by CLAIMS.
"""
import collections
import json
import os
import sys

SERVER_COMMS = {"pre-receive", "proc-receive", "tr", "true", "git-daemon"}
# git daemon runs git-daemon as a dashed external command.
SERVER_GITS = {"_run_dashed_", "receive-pack", "upload-pack"}


def gits(d):
    out = {}
    for f in os.listdir(d):
        pid = int(f.rsplit("-P", 1)[1], 16)
        argv, hier = None, ""
        for line in open(os.path.join(d, f)):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "start":
                argv = e["argv"]
            elif e.get("event") == "cmd_name":
                hier = e["hierarchy"]
        if argv is not None:
            out[pid] = (hier, argv)
    return out


def table(d):
    g = gits(os.path.join(d, "tr2"))
    cpu, comm = collections.Counter(), {}
    for line in open(os.path.join(d, "samples")):
        f = line.split()
        if len(f) >= 3 and f[-2].isdigit():
            cpu[int(f[-2])] += int(f[-1])
            comm[int(f[-2])] = " ".join(f[:-2])
    out, count = collections.Counter(), collections.Counter()
    for pid in set(g) | set(cpu):
        if pid in g:
            hier, argv = g[pid]
            parts = hier.split("/")
            side = "server" if SERVER_GITS & set(parts) else "client"
            name = "git " + parts[-1]
            if not hier:  # git-daemon's connection processes name no command
                name = os.path.basename(argv[0])
                side = "server" if name in SERVER_COMMS else "client"
        else:
            name = comm[pid]
            side = "server" if name in SERVER_COMMS or name.startswith("srv-") else "client"
        out[side, name] += cpu[pid]
        count[side, name] += 1
    return out, count


def main():
    d0, dn, claims = sys.argv[1], sys.argv[2], int(sys.argv[3])
    c0, n0 = table(d0)
    cn, nn = table(dn)
    rows = []
    for k in set(cn) | set(c0):
        ms = (cn[k] - c0[k]) / 1e6 / claims
        procs = (nn[k] - n0[k]) / claims
        if abs(ms) >= 0.1 or procs >= 0.05:
            rows.append((k[0], k[1], ms, procs))
    rows.sort(key=lambda r: (r[0], -r[2]))
    tot = collections.Counter()
    for side, name, ms, procs in rows:
        print("%-7s %-22s %7.2f ms %5.2f procs" % (side, name, ms, procs))
        tot[side] += ms
    for side in sorted(tot):
        print("%-7s %-22s %7.2f ms" % (side, "total", tot[side]))
    print("%-7s %-22s %7.2f ms" % ("all", "total", sum(tot.values())))


main()
