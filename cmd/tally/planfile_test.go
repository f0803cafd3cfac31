package main

import (
	"strings"
	"testing"
)

// TestPlanFileErrors: a plan file that cannot be read is USAGE naming the
// file, line, column and field in the plan's terms (never a Go type), for
// JSON reported as JSON and YAML as YAML; duplicate keys are refused in both
// formats and trailing commas in JSON; nothing is written.
func TestPlanFileErrors(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	for _, c := range []struct {
		file, content string
		line, col     float64 // 0: not checked
		field, msg    string  // field "": none
	}{
		{"type.json", "{\"wave\":\"w\",\n \"cells\":[{\"id\":\"a\",\"deps\":\"b\"}]}\n", 2, 28, "cells[0].deps", `want a list of strings, got the string "b"`},
		{"type.yaml", "wave: w\ncells:\n  - id: a\n    deps: b\n", 4, 11, "cells[0].deps", `want a list of strings, got the string "b"`},
		{"number.yaml", "wave: w\ncells:\n  - id: 12\n", 3, 9, "cells[0].id", "quote it"},
		{"dup.json", "{\"wave\":\"w\", \"wave\":\"x\",\n \"cells\":[{\"id\":\"a\"}]}\n", 1, 14, "wave", "duplicate key (first at line 1, column 2)"},
		{"dup-cell.json", "{\"wave\":\"w\",\"cells\":[\n {\"id\":\"a\",\n  \"id\":\"b\"}]}", 3, 3, "cells[0].id", "duplicate key"},
		{"dup.yaml", "wave: w\ncells:\n  - id: a\n    id: b\n", 4, 5, "cells[0].id", "duplicate key (first at line 3, column 5)"},
		{"comma-list.json", "{\"wave\":\"w\",\n \"cells\":[{\"id\":\"a\"},]}\n", 2, 22, "", "no trailing comma"},
		{"comma-object.json", "{\"wave\":\"w\",\n \"cells\":[{\"id\":\"a\"}],\n}\n", 3, 1, "", "no trailing comma"},
		{"syntax.json", "{\"wave\": \"w\" \"cells\": []}", 1, 14, "", "not valid JSON"},
		{"more.json", "{\"wave\":\"w\",\"cells\":[{\"id\":\"a\"}]}\n{}", 2, 1, "", "more after the plan object"},
		{"short.json", "{\"wave\":\"w\",\"cells\":[{\"id\":\"a\"", 0, 0, "", "ends inside a value"},
		{"syntax.yaml", "wave: w\ncells:\n\t- id: a\n", 3, 1, "", "not valid YAML: found character that cannot start any token"}, // a tab

		{"unknown.yaml", "wave: w\ncells:\n  - id: a\n    dep: [x]\n", 4, 5, "cells[0].dep", "unknown field (a cell has id, title, deps, paths, role)"},
		{"unknown.json", "{\"wave\":\"w\",\"owner\":\"me\",\"cells\":[]}", 1, 13, "owner", "unknown field (a plan has wave, cells)"},
		{"two.yaml", "wave: w\ncells: [{id: a}]\n---\nwave: x\n", 3, 1, "", "one YAML document"}, // the second starts at ---
		{"empty.yaml", "", 0, 0, "", "empty"},
		{"role.json", "{\"wave\":\"w\",\"cells\":[{\"id\":\"a\",\"role\":\"\"}]}", 1, 39, "cells[0].role", "an empty role"},
		{"role.yaml", "wave: w\ncells:\n  - id: a\n    role: ''\n", 4, 11, "cells[0].role", "an empty role"},
	} {
		e := r.refuse(2, "USAGE", "A", "plan", r.file(c.file, c.content))
		msg, _ := e["message"].(string)
		if !strings.Contains(msg, c.msg) || !strings.Contains(msg, "plan ") || e["file"] == nil ||
			strings.Contains(msg, "Go ") || strings.Contains(msg, "unmarshal") {
			t.Errorf("%s: message %q, want one naming the file and saying %q", c.file, msg, c.msg)
		}
		if c.line != 0 && (e["line"] != c.line || e["column"] != c.col) {
			t.Errorf("%s: at %v:%v, want %v:%v (%q)", c.file, e["line"], e["column"], c.line, c.col, msg)
		}
		if c.field != "" && e["field"] != c.field {
			t.Errorf("%s: field %v, want %s", c.file, e["field"], c.field)
		}
		if strings.HasSuffix(c.file, ".json") && strings.Contains(msg, "YAML") || strings.HasSuffix(c.file, ".yaml") && strings.Contains(msg, "JSON") {
			t.Errorf("%s: reported in the other format: %q", c.file, msg)
		}
	}
	// YAML anchors and aliases still work
	r.ok("A", "plan", r.file("alias.yaml", "wave: w\ncells:\n  - {id: a, paths: &p [src/x]}\n  - {id: b, deps: [a], paths: *p}\n"))
}
