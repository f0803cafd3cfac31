package report

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sync"
	"time"

	"github.com/tally-dev/tally/chain"
)

//go:embed page.html.tmpl
var pageText string

// page is the parsed page template. It is parsed on first use, not at
// start-up: every tally process links this package, few render a report.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"dur":  fmtDuration,
		"time": func(t time.Time) string { return chain.FormatTime(t) },
	}).Parse(pageText))
})

// maxTakeoverRows bounds the takeovers the page lists as HTML rows; all of
// them are still marked on the timeline.
const maxTakeoverRows = 500

// Takeover is one row of the page's takeovers table.
type Takeover struct {
	Seq        uint64
	TS         time.Time
	Lane       string
	Kind       string
	Actor      string
	Prior      string
	PriorEpoch int64
	Epoch      int64
}

type pageData struct {
	*Model
	Takeovers     []Takeover
	MoreTakeovers int
	Data          template.HTML // base64: nothing in it needs escaping
}

// Render writes the model as one self-contained HTML page.
func Render(w io.Writer, m *Model) error {
	data, err := m.pageJSON()
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	// Base64 has no character that means anything in HTML or JS.
	d := pageData{Model: m, Data: template.HTML(base64.StdEncoding.EncodeToString(gz.Bytes()))}
	for _, b := range m.Bars {
		if b.Takeover == "" || b.granted.Before(m.From) {
			continue
		}
		if len(d.Takeovers) == maxTakeoverRows {
			d.MoreTakeovers++
			continue
		}
		d.Takeovers = append(d.Takeovers, Takeover{Seq: b.GrantSeq, TS: b.Start, Lane: laneName(m.Lanes[b.Lane]),
			Kind: b.Takeover, Actor: b.Actor, Prior: b.Prior, PriorEpoch: b.PriorEpoch, Epoch: b.Epoch})
	}
	return page().Execute(w, d)
}

func laneName(l Lane) string {
	if l.Wave == "" {
		return "lock " + l.Name
	}
	return l.Wave + "/" + l.Name
}

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%.1fh", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.1fm", d.Minutes())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// pageJSON encodes what the script draws: columnar and interned, with times
// in milliseconds from the window's start. Render gzips it (entry summaries
// repeat a lot) and embeds it as base64, so a 100k-entry ledger stays a few
// MB and no entry text appears in the page's source at all.
func (m *Model) pageJSON() ([]byte, error) {
	intern := map[string]int{}
	var names []string
	name := func(s string) int {
		if s == "" {
			return -1
		}
		i, ok := intern[s]
		if !ok {
			i = len(names)
			intern[s] = i
			names = append(names, s)
		}
		return i
	}
	ms := func(t time.Time) int64 { return t.Sub(m.From).Milliseconds() }
	waves := []string{}
	waveIx := map[string]int{}
	lanes := make([][]any, len(m.Lanes))
	for i, l := range m.Lanes {
		wi := -1
		if l.Wave != "" {
			var ok bool
			if wi, ok = waveIx[l.Wave]; !ok {
				wi = len(waves)
				waveIx[l.Wave] = wi
				waves = append(waves, l.Wave)
			}
		}
		lanes[i] = []any{wi, l.Name}
	}
	receipts := []*Receipt{}
	bars := make([][]any, len(m.Bars))
	for i, b := range m.Bars {
		rc := -1
		if b.Receipt != nil {
			rc = len(receipts)
			receipts = append(receipts, b.Receipt)
		}
		renews := b.Renews
		if renews == nil {
			renews = []uint64{}
		}
		bars[i] = []any{b.Lane, ms(b.Start), ms(b.End), b.GrantSeq, b.EndSeq, b.Epoch, name(b.Actor), b.Outcome,
			b.Takeover, name(b.Prior), b.PriorEpoch, name(b.By), b.Reason, rc, renews}
	}
	var seq0 uint64
	if len(m.Entries) > 0 {
		seq0 = m.Entries[0].Seq
	}
	kinds := []chain.Kind{}
	kindIx := map[chain.Kind]int{}
	dt := make([]int64, len(m.Entries))
	ek := make([]int, len(m.Entries))
	ea := make([]int, len(m.Entries))
	es := make([]string, len(m.Entries))
	prev := m.From
	for i, e := range m.Entries {
		dt[i] = e.TS.Sub(prev).Milliseconds()
		prev = e.TS
		k, ok := kindIx[e.Kind]
		if !ok {
			k = len(kinds)
			kindIx[e.Kind] = k
			kinds = append(kinds, e.Kind)
		}
		ek[i], ea[i], es[i] = k, name(e.Actor), e.Summary
	}
	return json.Marshal(map[string]any{
		"from": chain.FormatTime(m.From), "span": ms(m.To), "names": names, "waves": waves, "lanes": lanes,
		"bars": bars, "receipts": receipts,
		"entries": map[string]any{"seq0": seq0, "dt": dt, "kind": ek, "actor": ea, "summary": es, "kinds": kinds},
	})
}
