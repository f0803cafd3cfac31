package gitstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Every append writes one small pack. Compaction keeps their number small
// without git: packs are grouped by size into levels (a level spans a factor
// of four), and whenever a level holds compactLevelFanout packs, all packs up
// to that level are merged into one, which lands a level or more higher — a
// log-structured merge. Each object is thus rewritten about once per level,
// and a repository holds at most compactLevelFanout-1 packs per level below
// compactMaxPack, so a lookup searches a bounded number of indexes however
// long the ledger. (git repack --geometric does the same rolling-up, but it
// first walks the reachable history, which costs seconds for a long ledger.)
//
// Merging copies objects unchanged (same ids) into a new pack that is synced
// and published before the old packs are removed, so nothing reachable is
// ever missing; readers that listed a removed pack rescan. Packs with a .keep,
// .promisor or .mtimes file beside them, and packs larger than compactMaxPack
// (typically the repository's own), are left alone.
const (
	compactBase        = 16 << 10 // level 0: packs up to 16 KiB
	compactLevelFanout = 4
	compactMaxPack     = 64 << 20
)

// CompactReport says what Compact did.
type CompactReport struct {
	Merged  int   `json:"merged"`  // packs merged away
	Written int   `json:"written"` // packs written
	Objects int   `json:"objects"` // objects copied
	Packs   int   `json:"packs"`   // packs left (all, including those left alone)
	Bytes   int64 `json:"bytes"`   // size of the packs written
	Stale   int   `json:"stale"`   // leftovers of killed writers removed (RemoveStaleTemps)
}

type compactPack struct {
	name  string // "pack-<hex>"
	size  int64
	level int
}

func compactLevel(size int64) int {
	level := 0
	for s := int64(compactBase); size > s; s *= compactLevelFanout {
		level++
	}
	return level
}

// NeedsCompaction reports whether there are at least min mergeable packs in
// db's primary object directory and some level holds enough to merge. It
// decides on the packs as db last listed them (when opened, by a rescan after a
// miss) plus those it was given by AddPack: it makes no system call, so an
// append that already opened the database pays nothing to learn that no
// compaction is due. Packs other processes wrote since that listing are not
// counted: the decision is best effort, and the next process to open the
// database counts them.
func (db *ObjectDB) NeedsCompaction(min int) bool {
	db.mu.Lock()
	all := db.packs
	db.mu.Unlock()
	primary := filepath.Join(db.dirs[0], "pack") + string(filepath.Separator)
	var packs []compactPack
	for _, p := range all {
		name, ok := strings.CutPrefix(p.path, primary)
		if ok && !p.git && p.size <= compactMaxPack {
			packs = append(packs, compactPack{name: name, size: p.size, level: compactLevel(p.size)})
		}
	}
	if len(packs) < min {
		return false
	}
	_, ok := compactPick(packs) // in any order: whether it picks depends only on the counts
	return ok
}

// compactCandidates lists the mergeable packs and the number of all packs.
func compactCandidates(objectDir string) ([]compactPack, int, error) {
	ents, err := listPackDir(filepath.Join(objectDir, "pack"))
	if err != nil {
		return nil, 0, err
	}
	var out []compactPack
	for _, e := range ents {
		if !e.git && e.size <= compactMaxPack {
			out = append(out, compactPack{name: e.base, size: e.size, level: compactLevel(e.size)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].size < out[j].size })
	return out, len(ents), nil
}

// compactPick returns the packs to merge: every pack up to the lowest level
// that holds compactLevelFanout packs or more.
func compactPick(packs []compactPack) ([]compactPack, bool) {
	count := map[int]int{}
	for _, p := range packs {
		count[p.level]++
	}
	top := -1
	for _, p := range packs {
		if count[p.level] >= compactLevelFanout {
			top = p.level
			break
		}
	}
	if top < 0 {
		return nil, false
	}
	var pick []compactPack
	for _, p := range packs {
		if p.level <= top {
			pick = append(pick, p)
		}
	}
	return pick, true
}

// Compact merges packs until no level holds compactLevelFanout packs. db is
// used to read the objects and learns about the packs written. progress, if
// not nil, is told after each pack read how many of the packs picked for this
// round of merging are read (a round merges one level upward).
//
// It first removes what killed writers left in the pack directory
// (RemoveStaleTemps), so that every compaction, in the background or by
// `tally gc`, also cleans up after crashes.
func Compact(db *ObjectDB, objectDir string, progress func(done, total int)) (*CompactReport, error) {
	rep, _, err := compact(db, objectDir, progress, -1)
	return rep, err
}

// CompactSmall is Compact for the rounds whose packs total at most maxBytes:
// it stops before the first round that would merge more, and more says
// whether one is left.
func CompactSmall(db *ObjectDB, objectDir string, maxBytes int64) (rep *CompactReport, more bool, err error) {
	return compact(db, objectDir, nil, maxBytes)
}

// compact is Compact with a bound on the bytes a round may merge (negative:
// none).
func compact(db *ObjectDB, objectDir string, progress func(done, total int), maxBytes int64) (*CompactReport, bool, error) {
	rep := &CompactReport{}
	stale, err := RemoveStaleTemps(objectDir)
	if err != nil {
		return rep, false, err
	}
	rep.Stale = stale
	for round := 0; round < 16; round++ {
		packs, all, err := compactCandidates(objectDir)
		if err != nil {
			return rep, false, err
		}
		rep.Packs = all
		pick, ok := compactPick(packs)
		if !ok {
			return rep, false, nil
		}
		if maxBytes >= 0 {
			var total int64
			for _, p := range pick {
				total += p.size
			}
			if total > maxBytes {
				return rep, true, nil
			}
		}
		pw := NewPackWriter()
		for i, p := range pick {
			if progress != nil && i > 0 {
				progress(i, len(pick))
			}
			err := mergePack(db, pw, filepath.Join(objectDir, "pack", p.name))
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed by a concurrent repack: its objects are elsewhere now
			}
			if err != nil {
				return rep, false, fmt.Errorf("compact: %s: %w", p.name, err)
			}
		}
		if progress != nil {
			progress(len(pick), len(pick))
		}
		if pw.Len() == 0 {
			return rep, false, nil
		}
		name, err := pw.WriteTo(objectDir)
		if err != nil {
			return rep, false, err
		}
		if err := db.AddPack(name); err != nil {
			return rep, false, err
		}
		if fi, err := os.Stat(filepath.Join(objectDir, "pack", name+".pack")); err == nil {
			rep.Bytes += fi.Size()
		}
		rep.Written++
		rep.Objects += pw.Len()
		for _, p := range pick {
			if p.name == name {
				continue // the merge reproduced an existing pack byte for byte
			}
			if err := RemovePack(objectDir, p.name); err != nil {
				return rep, false, err
			}
			rep.Merged++
		}
	}
	return rep, false, nil
}

// mergePack adds the objects of the pack at path (without ".idx" or
// ".pack") to pw, in index order. An object stored whole is copied as
// stored (addStored): its entry, from its offset to the next entry's or to
// the pack's trailer, must match the CRC32 the index records for it
// (checkedEntry). Copying neither inflates nor compresses, which was nearly
// all of a merge's CPU. A delta is read through db and stored whole, as
// PackWriter stores everything, once it hashes to its id.
func mergePack(db *ObjectDB, pw *PackWriter, path string) error {
	b, err := os.ReadFile(path + ".idx")
	if err != nil {
		return err
	}
	x, err := packParseIndex(b)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	data, err := packMmap(path + ".pack")
	if err != nil {
		return err
	}
	defer unmapFile(data)
	m := &packMaps{idx: x, data: data}
	offs := make([]uint64, x.n)
	for i := range offs {
		if offs[i], _, err = x.offset(i); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	ends := slices.Sorted(slices.Values(offs)) // each entry ends where the next one starts
	for i, off := range offs {
		var id ObjectID
		copy(id[:], b[packIdxHeader+20*i:])
		e, err := m.entry(off)
		if err != nil {
			return fmt.Errorf("pack at %d: %w", off, err)
		}
		if e.kind == packOfsDelta || e.kind == packRefDelta {
			typ, obj, err := db.Read(id)
			if err != nil {
				return err
			}
			if got := pw.Add(typ, obj); got != id {
				return fmt.Errorf("pack at %d: object %s reads as %s", off, id, got)
			}
			continue
		}
		end := uint64(len(data) - 20)
		if k, _ := slices.BinarySearch(ends, off); k+1 < len(ends) {
			end = ends[k+1]
		}
		entry, err := checkedEntry(data, off, end, x.crc(i))
		if err != nil {
			return err
		}
		pw.addStored(id, entry)
	}
	return nil
}
