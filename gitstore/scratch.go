package gitstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tally-dev/tally/proctree"
)

// A fetch lands in a scratch ref of its own process before its tracking
// ref moves (fetchRef, landFetched), which then deletes it. A process
// killed in between leaves the scratch ref behind, so every fetch that
// lands deletes those of processes that are gone (sweepScratch).
//
// The scratch ref is <tracking>.fetch-<pid>-<table>-<nonce>: the pid says
// whose it is; the table names the process table that pid belongs to (a
// hash of the host name and, on Linux, the PID namespace), since processes
// in other containers or on other hosts may share a clone, and their pids
// mean nothing here; the nonce, fresh for each fetch, keeps a process that
// reuses a gone one's pid from ever landing in the very ref a sweep is
// deleting. Names from before the table and nonce, <tracking>.fetch-<pid>,
// are judged by their pid in this process's table.

// scratchMark separates a tracking ref's name from its scratch refs' rest.
const scratchMark = ".fetch-"

// scratchName is the name of this fetch's scratch ref of tracking.
func scratchName(tracking string) string {
	table, _ := scratchTable()
	return fmt.Sprintf("%s%s%d-%s-%08x", tracking, scratchMark, os.Getpid(), table, rand.Uint32())
}

// scratchTable names this process's process table, for scratch refs (ok
// false, named "none", where it cannot be told: then this process sweeps
// nothing).
func scratchTable() (string, bool) {
	scratchOnce.Do(func() {
		host, err := os.Hostname()
		ns, ok := pidNamespace()
		if err != nil || !ok {
			scratchTableName = "none"
			return
		}
		sum := sha256.Sum256([]byte(host + "\x00" + ns))
		scratchTableName, scratchTableKnown = hex.EncodeToString(sum[:4]), true
	})
	return scratchTableName, scratchTableKnown
}

// scratchTable's answer, found on first use: a package variable made by
// sync.OnceValues would cost every tally process two allocations at start
// (TestStartInitializers).
var (
	scratchOnce       sync.Once
	scratchTableName  string
	scratchTableKnown bool
)

// scratchOwner reads the pid and process table from the rest of a scratch
// ref's name after scratchMark (table "" for a name from before tables).
func scratchOwner(rest string) (pid int, table string, ok bool) {
	f := strings.Split(rest, "-")
	if len(f) != 1 && len(f) != 3 {
		return 0, "", false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 || strconv.Itoa(pid) != f[0] {
		return 0, "", false
	}
	if len(f) == 3 {
		table = f[1]
	}
	return pid, table, true
}

// sweepScratch deletes the scratch refs of tracking whose process is gone:
// named for this process table, and no live process has the pid. A
// deletion is conditioned on the value read, and a sweep that fails (a
// ref another process swept first) is left to the next fetch. A pid a
// live process has reused keeps the dead one's ref until that process
// ends too: one ref kept longer, never a live process's ref deleted.
func (r *Repo) sweepScratch(tracking string) {
	table, ok := scratchTable()
	if !ok {
		return
	}
	var txn strings.Builder
	for ref, id := range r.scratchRefs(tracking) {
		pid, owner, ok := scratchOwner(strings.TrimPrefix(ref, tracking+scratchMark))
		if !ok || owner != "" && owner != table || proctree.Alive(pid) {
			continue
		}
		txn.WriteString("delete " + ref + " " + id.String() + "\n")
	}
	if txn.Len() > 0 {
		GitRun{Dir: r.gitRunDir(), Args: []string{"update-ref", "--stdin"}, Stdin: strings.NewReader(txn.String())}.Run()
	}
}

// scratchRefs lists the scratch refs of tracking, loose and packed, with
// their values (a loose ref's value over a packed one's, as git reads
// them): a read of the tracking ref's directory and a search of
// packed-refs, no git process.
func (r *Repo) scratchRefs(tracking string) map[string]ObjectID {
	prefix := tracking + scratchMark
	out := map[string]ObjectID{}
	if data, err := packMmap(filepath.Join(r.CommonDir, "packed-refs")); err == nil {
		// Lines "<40-hex> <name>"; scratchMark's "." is rare in ref names,
		// so it is what is searched for, and each line found is read whole.
		for i := 0; ; {
			j := bytes.Index(data[i:], []byte(scratchMark))
			if j < 0 {
				break
			}
			start := bytes.LastIndexByte(data[:i+j], '\n') + 1
			end := bytes.IndexByte(data[i+j:], '\n')
			if end < 0 {
				end = len(data)
			} else {
				end += i + j
			}
			i = end
			line := data[start:end]
			if len(line) <= 41 || line[40] != ' ' || !bytes.HasPrefix(line[41:], []byte(prefix)) {
				continue
			}
			if id, err := ParseObjectID(string(line[:40])); err == nil {
				out[string(line[41:])] = id
			}
		}
		unmapFile(data)
	}
	entries, _ := os.ReadDir(filepath.Dir(r.refPath(tracking)))
	for _, e := range entries {
		ref := path.Dir(tracking) + "/" + e.Name()
		if !strings.HasPrefix(ref, prefix) || !e.Type().IsRegular() || strings.HasSuffix(ref, ".lock") {
			continue
		}
		if id, err := r.readLooseRef(ref, 0); err == nil {
			out[ref] = id
		}
	}
	return out
}
