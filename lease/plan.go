package lease

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/pathspec"
)

// PlanCell is one cell as declared in a plan.
type PlanCell struct {
	ID    string   `json:"id"`
	Title string   `json:"title,omitempty"`
	Deps  []string `json:"deps,omitempty"`
	Paths []string `json:"paths,omitempty"`
	Role  string   `json:"role,omitempty"`
}

// PlanBody is the body of a "plan" entry: one new wave. A dep is the id of a
// cell of the same wave, or "wave/cell" for a cell of a wave added earlier.
type PlanBody struct {
	Wave  string     `json:"wave"`
	Cells []PlanCell `json:"cells"`
}

// planEntry is a PlanBody as a plan entry holds it: each cell's role is
// read as a pointer, so that a role given as "" is told from none. An id is
// never empty (FORMAT.md §5), and absent is the one spelling of no role.
type planEntry struct {
	Wave  string          `json:"wave"`
	Cells []planEntryCell `json:"cells"`
}

type planEntryCell struct {
	PlanCell
	Role *string `json:"role"` // shadows PlanCell.Role in decoding
}

// NormalizePlan normalizes the path patterns of a plan in place, so that the
// entry records them in the one form the rules accept.
func NormalizePlan(b *PlanBody) error {
	if err := checkPlanLimits(b); err != nil {
		return err
	}
	for i := range b.Cells {
		for j, p := range b.Cells[i].Paths {
			n, err := NormalizePattern(p)
			if err != nil {
				e := errs.From(err)
				e.Message = fmt.Sprintf("cell %s: path %q: %s", b.Cells[i].ID, p, e.Message)
				return e
			}
			b.Cells[i].Paths[j] = n
		}
	}
	return nil
}

func (r *rule) plan() (string, error) {
	var entry planEntry
	if err := r.body(&entry); err != nil {
		return "", err
	}
	b := PlanBody{Wave: entry.Wave, Cells: make([]PlanCell, len(entry.Cells))}
	for i, c := range entry.Cells {
		if c.Role != nil && !SafeID(*c.Role) {
			return "", errs.New(errs.Usage, "cell %s: role %q is not a SafeId (leave role out for none)", c.ID, *c.Role)
		}
		b.Cells[i] = c.PlanCell
		if c.Role != nil {
			b.Cells[i].Role = *c.Role
		}
	}
	if err := checkPlanLimits(&b); err != nil {
		return "", err
	}
	if !SafeID(b.Wave) {
		return "", errs.New(errs.Usage, "wave id %q is not a SafeId", b.Wave)
	}
	if len(b.Cells) == 0 || len(b.Cells) > maxCellsPerWave {
		return "", errs.New(errs.Usage, "a wave needs 1..%d cells", maxCellsPerWave)
	}
	if ok, err := r.t.load(waveKey(b.Wave), &Wave{}); err != nil {
		return "", err
	} else if ok {
		return "", errs.New(errs.WaveExists, "wave %s already exists", b.Wave).With("wave", b.Wave)
	}
	index := map[string]int{}
	for i, c := range b.Cells {
		if !SafeID(c.ID) {
			return "", errs.New(errs.Usage, "cell id %q is not a SafeId", c.ID)
		}
		if _, dup := index[c.ID]; dup {
			return "", errs.New(errs.Usage, "cell %s is declared twice", c.ID)
		}
		if len(c.Title) > 256 || strings.ContainsAny(c.Title, "\n\r") {
			return "", errs.New(errs.Usage, "cell %s: title must be one line of at most 256 bytes", c.ID)
		}
		for _, p := range c.Paths {
			if n, err := pathspec.Normalize(p); err != nil || n != p {
				return "", errs.New(errs.Usage, "cell %s: path %q is not a normalized pattern", c.ID, p)
			}
		}
		index[c.ID] = i
	}
	// Resolve deps: same-wave ids must be declared here, other waves must exist.
	external := map[string]*Cell{}
	for _, c := range b.Cells {
		seen := map[string]bool{}
		for _, d := range c.Deps {
			w, id := splitDep(b.Wave, d)
			if seen[w+"/"+id] {
				return "", errs.New(errs.Usage, "cell %s lists dep %s/%s twice", c.ID, w, id)
			}
			seen[w+"/"+id] = true
			if w == b.Wave {
				if _, ok := index[id]; !ok {
					return "", errs.New(errs.DepMissing, "cell %s depends on %s, which is not in wave %s", c.ID, d, b.Wave).
						With("cell", c.ID).With("dep", d)
				}
				continue
			}
			if err := checkIDs(w, id); err != nil {
				return "", err
			}
			dc, err := r.t.cell(w, id)
			if code := errs.CodeOf(err); code != "" && code != errs.CellMissing && code != errs.WaveMissing {
				return "", err // damaged state is not a missing dependency
			}
			if err != nil {
				return "", errs.New(errs.DepMissing, "cell %s depends on %s, which does not exist", c.ID, d).
					With("cell", c.ID).With("dep", d)
			}
			external[w+"/"+id] = dc
		}
	}
	if cycle := findCycle(b, index); cycle != nil {
		return "", errs.New(errs.DepCycle, "dependency cycle: %s", strings.Join(cycle, " -> ")).With("cycle", cycle)
	}

	// Write the wave.
	dependents := map[string][]string{}
	for _, c := range b.Cells {
		for _, d := range c.Deps {
			w, id := splitDep(b.Wave, d)
			dependents[w+"/"+id] = append(dependents[w+"/"+id], b.Wave+"/"+c.ID)
		}
	}
	size := len(b.Cells)
	ready := make(bitmap, (size+7)/8)
	wv := &Wave{ID: b.Wave, Size: size, Added: r.e.Seq, Counts: map[string]int{Pending: size}}
	ids := make([]string, size)
	for i, pc := range b.Cells {
		ids[i] = pc.ID
		c := &Cell{ID: pc.ID, Wave: b.Wave, Index: i, Title: pc.Title, Role: pc.Role,
			Deps: nonNil(pc.Deps), Dependents: sorted(dependents[b.Wave+"/"+pc.ID]), Paths: nonNil(pc.Paths),
			State: Pending, History: []uint64{r.e.Seq}}
		isReady := true
		for _, d := range c.Deps {
			if w, id := splitDep(b.Wave, d); w == b.Wave || external[w+"/"+id].State != Done {
				isReady = false
			}
		}
		ready.set(i, isReady)
		if err := r.t.put(cellKey(b.Wave, c.ID), c); err != nil {
			return "", err
		}
	}
	wv.Ready, wv.Held = ready.String(), make(bitmap, len(ready)).String()
	if err := r.t.put(waveKey(b.Wave), wv); err != nil {
		return "", err
	}
	for chunk := 0; chunk*orderChunk < size; chunk++ {
		if err := r.t.put(orderKey(b.Wave, chunk), ids[chunk*orderChunk:min(size, (chunk+1)*orderChunk)]); err != nil {
			return "", err
		}
	}
	for ref, dc := range external {
		dc.Dependents = sorted(append(dc.Dependents, dependents[ref]...))
		if err := r.t.put(cellKey(dc.Wave, dc.ID), dc); err != nil {
			return "", err
		}
	}
	p, err := ReadPlan(r.t)
	if err != nil {
		return "", err
	}
	p.Waves = append(p.Waves, b.Wave)
	if err := r.t.put(planKey, p); err != nil {
		return "", err
	}
	return fmt.Sprintf("plan %s (%d cells)", b.Wave, size), nil
}

// findCycle returns a dependency cycle among the wave's own cells, as a list of
// ids whose first and last elements are equal, or nil. Cells are visited in
// plan order so the reported cycle is deterministic.
func findCycle(b PlanBody, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(b.Cells))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		color[i] = grey
		stack = append(stack, b.Cells[i].ID)
		for _, d := range b.Cells[i].Deps {
			w, id := splitDep(b.Wave, d)
			if w != b.Wave {
				continue
			}
			j := index[id]
			switch color[j] {
			case grey:
				for k, s := range stack {
					if s == id {
						return append(append([]string{}, stack[k:]...), id)
					}
				}
			case white:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return nil
	}
	for i := range b.Cells {
		if color[i] == white {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sorted(s []string) []string {
	s = nonNil(s)
	sort.Strings(s)
	return s
}
