package lease

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// Cell states.
const (
	Pending = "pending"
	Claimed = "claimed"
	Done    = "done"
	Failed  = "failed"
)

// Lease is the live claim on a cell. acquired_at and max_hold_until are fixed
// for the epoch; renew moves heartbeat_at and expires_at.
type Lease struct {
	Actor        string `json:"actor"`
	PID          int    `json:"pid"`
	Host         string `json:"host"`
	BootID       string `json:"boot_id,omitempty"` // with PIDNS and PIDStart: see HolderID
	PIDNS        uint64 `json:"pid_ns,omitempty"`
	PIDStart     uint64 `json:"pid_start,omitempty"`
	Epoch        int64  `json:"epoch"`
	AcquiredAt   string `json:"acquired_at"`
	HeartbeatAt  string `json:"heartbeat_at"`
	ExpiresAt    string `json:"expires_at"`
	MaxHoldUntil string `json:"max_hold_until"`
	TTLSeconds   int    `json:"ttl_seconds"`
	Base         string `json:"base,omitempty"` // HEAD commit when claimed: the default receipt base
}

// Cell is the stored state of one cell.
type Cell struct {
	ID         string   `json:"id"`
	Wave       string   `json:"wave"`
	Index      int      `json:"index"`
	Title      string   `json:"title,omitempty"`
	Role       string   `json:"role,omitempty"`
	Deps       []string `json:"deps"`       // "cell" in the same wave or "wave/cell"
	Dependents []string `json:"dependents"` // "wave/cell", kept sorted
	Paths      []string `json:"paths"`
	State      string   `json:"state"`
	Epoch      int64    `json:"epoch"` // the last epoch granted; never reused
	Lease      *Lease   `json:"lease"`
	Reason     string   `json:"reason,omitempty"` // why it failed
	Receipt    *Ref     `json:"receipt,omitempty"`
	History    []uint64 `json:"history"` // seqs of the entries that changed this cell
}

// Ref points at an entry that produced something (a receipt).
type Ref struct {
	Seq    uint64 `json:"seq"`
	Commit string `json:"commit"`
}

// Wave is the stored summary of a wave. Ready and Held are bitmaps over plan
// indexes (bit i is byte i/8, bit i%8, least significant first), encoded
// base64url without padding: Ready has bit i set exactly when cell i is pending
// with all deps done, Held exactly when cell i is claimed. They let claim --next
// find a cell without reading every cell of a large wave.
type Wave struct {
	ID     string         `json:"id"`
	Size   int            `json:"size"`
	Added  uint64         `json:"added"`
	Counts map[string]int `json:"counts"`
	Ready  string         `json:"ready"`
	Held   string         `json:"held"`
}

// Plan lists the waves in the order they were added.
type Plan struct {
	Waves []string `json:"waves"`
}

// State keys. Cells are sharded by a hash of their id so that no git tree in
// the ledger grows with the size of a wave.
const (
	planKey    = "plan"
	orderChunk = 256 // cell ids per order blob
)

func waveKey(w string) string { return "waves/" + w + "/wave" }
func cellKey(w, c string) string {
	sum := blake3.Sum256([]byte(c))
	return "waves/" + w + "/cells/" + hex.EncodeToString(sum[:1]) + "/" + c
}
func orderKey(w string, chunk int) string { return fmt.Sprintf("waves/%s/order/%d", w, chunk) }

// SafeID reports whether s is a SafeId, the form of wave, cell and role ids:
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
func SafeID(s string) bool {
	if len(s) == 0 || len(s) > 128 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// txn is the state as the current entry sees it: its own writes over the
// state before the entry.
type txn struct {
	base   chain.KV
	writes map[string][]byte // nil value: deleted
}

func newTxn(base chain.KV) *txn { return &txn{base: base, writes: map[string][]byte{}} }

func (t *txn) get(key string) ([]byte, bool, error) {
	if v, ok := t.writes[key]; ok {
		return v, v != nil, nil
	}
	return t.base.Get(key)
}

// Get makes a txn usable where a chain.KV is expected.
func (t *txn) Get(key string) ([]byte, bool, error) { return t.get(key) }

func (t *txn) load(key string, v any) (bool, error) {
	return t.loadWith(key, v, json.Unmarshal)
}

// loadStrict is load for a blob whose every member a reader must
// understand: a member v does not name is CORRUPT, as is a blob that does
// not decode as v. (Its bytes are verify's to check: a state blob must be
// exactly what the rules write, §10 step 6.)
func (t *txn) loadStrict(key string, v any) (bool, error) {
	return t.loadWith(key, v, decodeBody)
}

// loadWith reads the blob at key into v with decode: false when there is
// none, CORRUPT when it does not decode.
func (t *txn) loadWith(key string, v any, decode func([]byte, any) error) (bool, error) {
	b, ok, err := t.get(key)
	if err != nil || !ok {
		return false, err
	}
	if err := decode(b, v); err != nil {
		return false, errs.Wrap(errs.Corrupt, err, "state %s", key)
	}
	return true, nil
}

func (t *txn) put(key string, v any) error {
	b, err := chain.MarshalCanonical(v)
	if err != nil {
		return err
	}
	t.writes[key] = b
	return nil
}

func (t *txn) del(key string) { t.writes[key] = nil }

func (t *txn) wave(w string) (*Wave, error) {
	var wv Wave
	ok, err := t.load(waveKey(w), &wv)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errs.New(errs.WaveMissing, "wave not found: %s", w).With("wave", w)
	}
	return &wv, nil
}

func (t *txn) cell(w, c string) (*Cell, error) {
	var cl Cell
	ok, err := t.load(cellKey(w, c), &cl)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Only now is the wave read (its summary grows with the wave): a
		// cell of a missing wave is WAVE-MISSING.
		if _, err := t.wave(w); err != nil {
			return nil, err
		}
		return nil, errs.New(errs.CellMissing, "cell not found: %s/%s", w, c).With("wave", w).With("cell", c)
	}
	return &cl, nil
}

// ReadWave returns a wave's summary.
func ReadWave(kv chain.KV, w string) (*Wave, error) { return newTxn(kv).wave(w) }

// ReadCell returns a cell's state (WAVE-MISSING if the wave does not exist,
// as the rules say).
func ReadCell(kv chain.KV, w, c string) (*Cell, error) { return newTxn(kv).cell(w, c) }

// ReadPlan returns the list of waves.
func ReadPlan(kv chain.KV) (*Plan, error) {
	var p Plan
	if _, err := newTxn(kv).load(planKey, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// CellIDs returns the ids of a wave's cells in plan order.
func CellIDs(kv chain.KV, w *Wave) ([]string, error) {
	t := newTxn(kv)
	var ids []string
	for chunk := 0; chunk*orderChunk < w.Size; chunk++ {
		var part []string
		ok, err := t.load(orderKey(w.ID, chunk), &part)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errs.New(errs.Corrupt, "wave %s: order chunk %d missing", w.ID, chunk)
		}
		ids = append(ids, part...)
	}
	if len(ids) != w.Size {
		return nil, errs.New(errs.Corrupt, "wave %s: %d ids for %d cells", w.ID, len(ids), w.Size)
	}
	return ids, nil
}

// orderCursor reads a wave's cell ids by plan index, keeping the last order
// chunk it decoded: a walk over increasing indexes (a bitmap's) decodes each
// chunk once, not once per cell (a status of a 20k-cell wave decoded 20k
// chunks of 256 ids). It is for reading: a cursor does not see a chunk the
// txn writes after the cursor read it.
type orderCursor struct {
	t     *txn
	wave  string
	chunk int
	ids   []string
}

func (t *txn) orderCursor(w string) *orderCursor { return &orderCursor{t: t, wave: w, chunk: -1} }

func (o *orderCursor) at(index int) (string, error) {
	if k := index / orderChunk; k != o.chunk {
		var part []string
		ok, err := o.t.load(orderKey(o.wave, k), &part)
		if err != nil {
			return "", err
		}
		if !ok {
			part = nil
		}
		o.chunk, o.ids = k, part
	}
	if index%orderChunk >= len(o.ids) {
		return "", errs.New(errs.Corrupt, "wave %s: no cell at index %d", o.wave, index)
	}
	return o.ids[index%orderChunk], nil
}

// bitmap is a decoded Ready/Held set.
type bitmap []byte

func decodeBitmap(s string, size int) (bitmap, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	// Re-encoding refuses the texts the decoder tolerates (CR, LF, unused low bits).
	if err != nil || len(b) != (size+7)/8 || base64.RawURLEncoding.EncodeToString(b) != s {
		return nil, errs.New(errs.Corrupt, "bad wave bitmap")
	}
	return b, nil
}

func (b bitmap) String() string { return base64.RawURLEncoding.EncodeToString(b) }
func (b bitmap) set(i int, v bool) {
	if v {
		b[i/8] |= 1 << (i % 8)
	} else {
		b[i/8] &^= 1 << (i % 8)
	}
}

// has reports whether bit i is set.
func (b bitmap) has(i int) bool { return b[i/8]&(1<<(i%8)) != 0 }

// indexes returns the set bits in increasing order.
func (b bitmap) indexes() []int {
	var out []int
	for i := b.next(0); i >= 0; i = b.next(i + 1) {
		out = append(out, i)
	}
	return out
}

// next returns the first set bit at or after from, or -1.
func (b bitmap) next(from int) int {
	for i := from / 8; i < len(b); i++ {
		x := b[i]
		if i == from/8 {
			x &^= 1<<(from%8) - 1
		}
		if x != 0 {
			return i*8 + bits.TrailingZeros8(x)
		}
	}
	return -1
}

// setCellState moves a cell to a new state and keeps the wave summary in step.
func (t *txn) setCellState(c *Cell, state string, ready bool) error {
	wv, err := t.wave(c.Wave)
	if err != nil {
		return err
	}
	rb, err := decodeBitmap(wv.Ready, wv.Size)
	if err != nil {
		return err
	}
	hb, err := decodeBitmap(wv.Held, wv.Size)
	if err != nil {
		return err
	}
	wv.Counts[c.State]--
	if wv.Counts[c.State] == 0 {
		delete(wv.Counts, c.State)
	}
	wv.Counts[state]++
	c.State = state
	rb.set(c.Index, ready)
	hb.set(c.Index, state == Claimed)
	wv.Ready, wv.Held = rb.String(), hb.String()
	if err := t.put(waveKey(c.Wave), wv); err != nil {
		return err
	}
	return t.put(cellKey(c.Wave, c.ID), c)
}

// splitDep resolves a dependency reference relative to the wave that declares it.
func splitDep(wave, dep string) (string, string) {
	if w, c, ok := strings.Cut(dep, "/"); ok {
		return w, c
	}
	return wave, dep
}

// unfinishedDeps returns the deps of c that are not done, as "wave/cell(state)".
func (t *txn) unfinishedDeps(c *Cell) ([]string, error) {
	var out []string
	for _, d := range c.Deps {
		w, id := splitDep(c.Wave, d)
		dc, err := t.cell(w, id)
		if err != nil {
			return nil, err
		}
		if dc.State != Done {
			out = append(out, fmt.Sprintf("%s/%s(%s)", w, id, dc.State))
		}
	}
	sort.Strings(out)
	return out, nil
}
