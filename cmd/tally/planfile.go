package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// A plan file is read in two steps: its text into a tree of pnodes that
// keep their line and column (JSON by encoding/json's tokenizer, YAML by
// go.yaml.in/yaml/v3's node API), then the tree into a lease.PlanBody by
// planSchema. So every refusal names the file, the line and column, and the
// field in the plan's own terms (cells[2].deps), never a Go type, and both
// formats refuse the same things: unknown fields, wrong kinds and duplicate
// keys. JSON is also refused with trailing commas or anything after the plan
// object, as encoding/json's tokenizer does.

type pkind int

const (
	pNull pkind = iota
	pString
	pNumber
	pBool
	pList
	pMap
)

// pnode is one value of a plan file, at its 1-based line and column.
type pnode struct {
	kind      pkind
	line, col int
	text      string   // a scalar's text
	keys      []*pnode // a map's keys (strings), in file order
	vals      []*pnode // a map's values, or a list's elements
}

// planFile is one plan file being read: its name as the user gave it and
// whether it is JSON (else YAML).
type planFile struct {
	name string
	json bool
	data []byte
	// newlines holds the offsets of the '\n' bytes of data, found on the
	// first call of position: every JSON node asks for its position, and
	// counting from the start each time made a one-line plan of 100k cells
	// take minutes.
	newlines []int
}

// isJSON decides a plan file's format: by its extension (.json; .yaml and
// .yml are YAML), else, for stdin and other names, JSON when its first
// character that is not white space is '{' or '['.
func isJSON(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return bytes.HasPrefix(trimmed, []byte("{")) || bytes.HasPrefix(trimmed, []byte("["))
}

// parsePlan reads a plan file's data into a PlanBody; every refusal is
// USAGE with the details file, line and column (where known) and field.
func parsePlan(name string, data []byte) (*lease.PlanBody, error) {
	f := &planFile{name: name, json: isJSON(name, data), data: data}
	var root *pnode
	var err error
	if f.json {
		root, err = f.parseJSON()
	} else {
		root, err = f.parseYAML()
	}
	if err != nil {
		return nil, err
	}
	return f.plan(root)
}

// errAt is a plan file refusal at n (nil: no position), for field.
func (f *planFile) errAt(n *pnode, field, format string, args ...any) *errs.Error {
	where := f.name
	if n != nil {
		where = fmt.Sprintf("%s:%d:%d", f.name, n.line, n.col)
	}
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	e := errs.New(errs.Usage, "plan %s: %s", where, msg).With("file", f.name)
	if n != nil {
		e = e.With("line", n.line).With("column", n.col)
	}
	if field != "" {
		e = e.With("field", field)
	}
	return e
}

// position returns the 1-based line and column of byte offset off.
func (f *planFile) position(off int64) (int, int) {
	off = min(max(off, 0), int64(len(f.data)))
	if f.newlines == nil {
		f.newlines = []int{}
		for i, b := range f.data {
			if b == '\n' {
				f.newlines = append(f.newlines, i)
			}
		}
	}
	before, _ := slices.BinarySearch(f.newlines, int(off)) // the newlines before off
	lineStart := 0
	if before > 0 {
		lineStart = f.newlines[before-1] + 1
	}
	return before + 1, int(off) - lineStart + 1
}

func (f *planFile) parseJSON() (*pnode, error) {
	dec := json.NewDecoder(bytes.NewReader(f.data))
	dec.UseNumber()
	// start finds where the next token begins: InputOffset is where the
	// previous one ended, before white space and separators.
	start := func() *pnode {
		off := dec.InputOffset()
		for off < int64(len(f.data)) && strings.IndexByte(" \t\r\n,:", f.data[off]) >= 0 {
			off++
		}
		n := &pnode{}
		n.line, n.col = f.position(off)
		return n
	}
	syntax := func(err error, at *pnode) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			n := &pnode{}
			n.line, n.col = f.position(se.Offset) // the tokenizer's offset is that of the bad character
			hint := ""
			if before := bytes.TrimRight(f.data[:min(max(se.Offset, 0), int64(len(f.data)))], " \t\r\n"); bytes.HasSuffix(before, []byte(",")) {
				hint = " (JSON allows no trailing comma)"
			}
			return f.errAt(n, "", "not valid JSON: %s%s", se.Error(), hint)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return f.errAt(at, "", "not valid JSON: the file ends inside a value")
		}
		return f.errAt(at, "", "not valid JSON: %v", err)
	}
	var value func() (*pnode, error)
	value = func() (*pnode, error) {
		n := start()
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err, n)
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' {
				n.kind = pMap
				for dec.More() {
					k := start()
					kt, err := dec.Token()
					if err != nil {
						return nil, syntax(err, k)
					}
					k.kind, k.text = pString, kt.(string)
					v, err := value()
					if err != nil {
						return nil, err
					}
					n.keys, n.vals = append(n.keys, k), append(n.vals, v)
				}
			} else {
				n.kind = pList
				for dec.More() {
					v, err := value()
					if err != nil {
						return nil, err
					}
					n.vals = append(n.vals, v)
				}
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return nil, syntax(err, n)
			}
		case string:
			n.kind, n.text = pString, t
		case json.Number:
			n.kind, n.text = pNumber, t.String()
		case bool:
			n.kind, n.text = pBool, fmt.Sprint(t)
		case nil:
			n.kind = pNull
		}
		return n, nil
	}
	root, err := value()
	if err != nil {
		return nil, err
	}
	if rest := bytes.TrimLeft(f.data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		n := &pnode{}
		n.line, n.col = f.position(int64(len(f.data) - len(rest)))
		return nil, f.errAt(n, "", "not valid JSON: more after the plan object")
	}
	return root, nil
}

// maxYAMLNodes bounds the values a YAML plan may expand to through aliases
// (far above what the plan limits of §5 let a wave hold).
const maxYAMLNodes = 1 << 20

func (f *planFile) parseYAML() (*pnode, error) {
	dec := yaml.NewDecoder(bytes.NewReader(f.data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, f.errAt(nil, "", "the file is empty")
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		var n *pnode
		var line int
		if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
			_, msg, _ = strings.Cut(msg, ": ")
			n = &pnode{line: line, col: 1} // the YAML parser reports lines only
		}
		return nil, f.errAt(n, "", "not valid YAML: %s", msg)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		n := &pnode{line: extra.Line, col: extra.Column}
		return nil, f.errAt(n, "", "a plan file holds one YAML document")
	}
	budget := maxYAMLNodes
	var conv func(y *yaml.Node) (*pnode, error)
	conv = func(y *yaml.Node) (*pnode, error) {
		if budget--; budget < 0 {
			return nil, f.errAt(nil, "", "the YAML expands to more than %d values", maxYAMLNodes)
		}
		n := &pnode{line: y.Line, col: y.Column}
		switch y.Kind {
		case yaml.DocumentNode:
			if len(y.Content) == 0 {
				return nil, f.errAt(nil, "", "the file is empty")
			}
			return conv(y.Content[0])
		case yaml.AliasNode:
			return conv(y.Alias)
		case yaml.MappingNode:
			n.kind = pMap
			for i := 0; i+1 < len(y.Content); i += 2 {
				k, err := conv(y.Content[i])
				if err != nil {
					return nil, err
				}
				if k.kind != pString || y.Content[i].Tag == "!!merge" {
					return nil, f.errAt(k, "", "a key must be a plain name, got %s", f.describe(k))
				}
				v, err := conv(y.Content[i+1])
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			}
		case yaml.SequenceNode:
			n.kind = pList
			for _, c := range y.Content {
				v, err := conv(c)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
		case yaml.ScalarNode:
			n.text = y.Value
			switch y.ShortTag() {
			case "!!str":
				n.kind = pString
			case "!!int", "!!float":
				n.kind = pNumber
			case "!!bool":
				n.kind = pBool
			case "!!null":
				n.kind = pNull
			default:
				return nil, f.errAt(n, "", "unsupported YAML value %q (tag %s)", y.Value, y.ShortTag())
			}
		}
		return n, nil
	}
	return conv(&doc)
}

// describe names a value's kind in the file's own terms.
func (f *planFile) describe(n *pnode) string {
	switch n.kind {
	case pString:
		return fmt.Sprintf("the string %q", n.text)
	case pNumber:
		return "the number " + n.text
	case pBool:
		return n.text
	case pNull:
		return "null"
	case pList:
		if f.json {
			return "an array"
		}
		return "a list"
	}
	if f.json {
		return "an object"
	}
	return "a mapping"
}

// fields walks map n (at field path at, a noun), refusing a duplicate or unknown
// key, and calls set for each known one.
func (f *planFile) fields(n *pnode, at, noun string, known []string, set func(key string, v *pnode) error) error {
	if n.kind != pMap {
		want := "a mapping"
		if f.json {
			want = "an object"
		}
		return f.errAt(n, at, "want %s, got %s", want, f.describe(n))
	}
	seen := map[string]*pnode{}
	for i, k := range n.keys {
		field := k.text
		if at != "" {
			field = at + "." + k.text
		}
		if first, dup := seen[k.text]; dup {
			return f.errAt(k, field, "duplicate key (first at line %d, column %d)", first.line, first.col)
		}
		seen[k.text] = k
		found := false
		for _, name := range known {
			found = found || name == k.text
		}
		if !found {
			return f.errAt(k, field, "unknown field (%s has %s)", noun, strings.Join(known, ", "))
		}
		if err := set(k.text, n.vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// str is a string field; null counts as absent.
func (f *planFile) str(n *pnode, field string, into *string) error {
	switch n.kind {
	case pString:
		*into = n.text
	case pNull:
	default:
		hint := ""
		if !f.json && n.kind != pList && n.kind != pMap {
			hint = " (quote it to make it a string)"
		}
		return f.errAt(n, field, "want a string, got %s%s", f.describe(n), hint)
	}
	return nil
}

// strs is a list-of-strings field; null counts as absent.
func (f *planFile) strs(n *pnode, field string, into *[]string) error {
	if n.kind == pNull {
		return nil
	}
	if n.kind != pList {
		return f.errAt(n, field, "want a list of strings, got %s", f.describe(n))
	}
	out := make([]string, len(n.vals))
	for i, v := range n.vals {
		if err := f.str(v, fmt.Sprintf("%s[%d]", field, i), &out[i]); err != nil {
			return err
		}
		if v.kind == pNull {
			return f.errAt(v, fmt.Sprintf("%s[%d]", field, i), "want a string, got null")
		}
	}
	*into = out
	return nil
}

// plan is planSchema: the tree of a plan file as a PlanBody.
func (f *planFile) plan(root *pnode) (*lease.PlanBody, error) {
	var body lease.PlanBody
	err := f.fields(root, "", "a plan", []string{"wave", "cells"}, func(key string, v *pnode) error {
		if key == "wave" {
			return f.str(v, "wave", &body.Wave)
		}
		if v.kind == pNull {
			return nil
		}
		if v.kind != pList {
			return f.errAt(v, "cells", "want a list of cells, got %s", f.describe(v))
		}
		body.Cells = make([]lease.PlanCell, 0, len(v.vals))
		for i, cn := range v.vals {
			at := fmt.Sprintf("cells[%d]", i)
			var c lease.PlanCell
			err := f.fields(cn, at, "a cell", []string{"id", "title", "deps", "paths", "role"}, func(key string, v *pnode) error {
				field := at + "." + key
				switch key {
				case "id":
					return f.str(v, field, &c.ID)
				case "title":
					return f.str(v, field, &c.Title)
				case "role":
					// An empty role is refused, not read as none: the
					// rules refuse an empty id (FORMAT.md §5), and an
					// empty value is more often a template's unset
					// variable than a wish for no role.
					if err := f.str(v, field, &c.Role); err != nil || v.kind != pString || c.Role != "" {
						return err
					}
					return f.errAt(v, field, "an empty role; leave role out for none")
				case "deps":
					return f.strs(v, field, &c.Deps)
				default:
					return f.strs(v, field, &c.Paths)
				}
			})
			if err != nil {
				return err
			}
			body.Cells = append(body.Cells, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &body, nil
}
