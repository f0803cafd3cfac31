package gitstore

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the configuration git would see in a repository, read at one
// moment: system, global (XDG then ~/.gitconfig, or $GIT_CONFIG_GLOBAL) and
// repository files, later files winning. Reading the files directly keeps a
// short-lived tally process from spawning `git config`. Include directives
// (include.path, includeIf "gitdir:", "gitdir/i:" and "onbranch:") are
// followed as git follows them, so a value is the one `git config` prints.
// The files are parsed by parseConfig, not by a library: go-git's parser
// (through gcfg) linked encoding/gob, whose initializers were the largest
// single cost of starting a tally process (a fifth of a `tally note`'s
// instructions), and it merged same-named sections, losing their order.
type Config struct {
	// vars are the files' variables in the order git reads them, each
	// included file's in place of the include.path that names it, so the
	// last one that sets a variable is the one git's last-one-wins picks.
	vars []configVar
}

// configVar is one variable line of a configuration file. section and key
// are lower case (git's names are case-insensitive); sub, the subsection,
// keeps its case unless it was written in the legacy [section.sub] form,
// which git lowercases. A key written without "=" has value "" (it is
// boolean true to git; `git config --get` prints an empty line).
type configVar struct {
	section, sub, key, value string
}

// maxIncludeDepth is git's limit on nested includes (MAX_INCLUDE_DEPTH);
// deeper ones are not followed.
const maxIncludeDepth = 10

// Config reads and parses the repository's configuration files now. A caller
// that needs several values takes one Config, so each file is read once.
func (r *Repo) Config() *Config {
	var paths []string
	if os.Getenv("GIT_CONFIG_NOSYSTEM") == "" {
		paths = append(paths, "/etc/gitconfig")
	}
	if g := os.Getenv("GIT_CONFIG_GLOBAL"); g != "" {
		paths = append(paths, g)
	} else {
		if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
			paths = append(paths, filepath.Join(xdg, "git", "config"))
		} else if home, err := os.UserHomeDir(); err == nil {
			paths = append(paths, filepath.Join(home, ".config", "git", "config"))
		}
		if home, err := os.UserHomeDir(); err == nil {
			paths = append(paths, filepath.Join(home, ".gitconfig"))
		}
	}
	paths = append(paths, filepath.Join(r.CommonDir, "config"), filepath.Join(r.GitDir, "config.worktree"))
	c := &Config{}
	for _, p := range paths {
		c.read(r, p, 0)
	}
	return c
}

// read appends the variables of the file at path, following its includes
// where they are. A file that cannot be read is skipped, as git skips a
// missing include; a file git could not parse (git refuses to run then)
// contributes the variables before the line it cannot parse.
func (c *Config) read(r *Repo, path string, depth int) {
	b, err := readFile(path)
	if err != nil {
		return
	}
	parseConfig(string(b), func(v configVar) {
		c.vars = append(c.vars, v)
		if depth >= maxIncludeDepth || v.key != "path" || v.value == "" {
			return
		}
		switch {
		case v.section == "include" && v.sub == "":
		case v.section == "includeif" && r.includeIf(v.sub, filepath.Dir(path)):
		default:
			return
		}
		if p, ok := expandHome(v.value); ok {
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(path), p)
			}
			c.read(r, p, depth+1)
		}
	})
}

// parseConfig calls emit for each variable of a git configuration file's
// text, in order, and stops at the first line git's parser (config.c)
// would refuse. The syntax is git-config(1)'s: "[section]",
// `[section "subsection"]` (\ and \" escaped in the subsection; `[a.b "c"]`
// is section a, subsection b.c) or the legacy "[section.subsection]"; a
// variable may follow a section header on its line; "name = value" or
// "name" alone on its line (not even a comment after it); "#" and ";" start
// a comment outside double quotes; in a value, double quotes keep white space and
// comment characters, \t \n \b \\ \" are escapes, a backslash before
// the end of the line continues the value on the next line, and white space
// outside quotes is dropped at either end and kept inside, each tab or space
// as one space.
func parseConfig(text string, emit func(configVar)) {
	text = strings.TrimPrefix(strings.ReplaceAll(text, "\r\n", "\n"), "\ufeff")
	i := 0
	var section, sub string
	for i < len(text) {
		c := text[i]
		switch {
		case c == '\n' || c == ' ' || c == '\t':
			i++
		case c == '#' || c == ';':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '[':
			var ok bool
			if section, sub, i, ok = parseSectionHeader(text, i+1); !ok {
				return
			}
		case isConfigAlpha(c) && section != "":
			start := i
			for i < len(text) && (isConfigAlpha(text[i]) || text[i] >= '0' && text[i] <= '9' || text[i] == '-') {
				i++
			}
			v := configVar{section: section, sub: sub, key: strings.ToLower(text[start:i])}
			for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
				i++
			}
			switch {
			case i == len(text) || text[i] == '\n':
			case text[i] == '=':
				var ok bool
				if v.value, i, ok = parseConfigValue(text, i+1); !ok {
					return
				}
			default:
				return
			}
			emit(v)
		default:
			return
		}
	}
}

// parseSectionHeader parses a section header from just after its "[" at i,
// returning the section (lower case), the subsection and the index after
// the "]".
func parseSectionHeader(text string, i int) (section, sub string, next int, ok bool) {
	start := i
	for i < len(text) && (isConfigAlpha(text[i]) || text[i] >= '0' && text[i] <= '9' || text[i] == '-' || text[i] == '.') {
		i++
	}
	name := strings.ToLower(text[start:i])
	if i < len(text) && text[i] == ']' {
		section, sub, _ = strings.Cut(name, ".")
		return section, sub, i + 1, name != ""
	}
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	if name == "" || i == len(text) || text[i] != '"' {
		return "", "", i, false
	}
	var b strings.Builder
	for i++; i < len(text) && text[i] != '"'; i++ {
		if text[i] == '\n' {
			return "", "", i, false
		}
		if text[i] == '\\' {
			i++
			if i == len(text) || text[i] == '\n' {
				return "", "", i, false
			}
		}
		b.WriteByte(text[i])
	}
	if i+1 >= len(text) || text[i+1] != ']' {
		return "", "", i, false
	}
	// [a.b "c"] is git's a.b.c: "b" lowercased like the section, "c" kept
	section, sub, dotted := strings.Cut(name, ".")
	if dotted {
		return section, sub + "." + b.String(), i + 2, true
	}
	return name, b.String(), i + 2, true
}

// parseConfigValue parses a value from just after its "=" at i to the end
// of its (last continued) line, as git's parse_value does, returning the
// index of the line's end.
func parseConfigValue(text string, i int) (value string, next int, ok bool) {
	var b strings.Builder
	quote, comment := false, false
	trim := -1 // where the value ends if only white space follows
	for ; i < len(text); i++ {
		c := text[i]
		if c == '\n' {
			break
		}
		if comment {
			continue
		}
		if (c == ' ' || c == '\t') && !quote {
			if trim < 0 {
				trim = b.Len()
			}
			if b.Len() > 0 {
				b.WriteByte(' ') // git keeps inner white space as spaces
			}
			continue
		}
		if !quote && (c == '#' || c == ';') {
			comment = true
			continue
		}
		trim = -1
		switch c {
		case '\\':
			i++
			if i == len(text) {
				return "", i, false
			}
			switch text[i] {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
				c = text[i]
			default:
				return "", i, false
			}
		case '"':
			quote = !quote
			continue
		}
		b.WriteByte(c)
	}
	if quote {
		return "", i, false
	}
	value = b.String()
	if trim >= 0 {
		value = value[:trim]
	}
	return value, i, true
}

func isConfigAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// expandHome replaces a leading "~/" with the home directory.
func expandHome(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p, true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", false
	}
	return filepath.Join(home, rest), true
}

// includeIf reports whether an includeIf condition holds, as git-config(1)
// defines it. gitdir: matches the git directory (as found, and with symlinks
// resolved) against a pattern where "~/" is the home directory, "./" the
// including file's directory, a pattern not starting with "/" gets "**/" in
// front, and one ending in "/" gets "**" after it; gitdir/i: does so ignoring
// case. onbranch: matches the checked-out branch's name, with the same
// trailing-"/" rule. Any other condition is false, as git treats one it does
// not know.
func (r *Repo) includeIf(cond, dir string) bool {
	kind, pattern, ok := strings.Cut(cond, ":")
	if !ok || pattern == "" {
		return false
	}
	if strings.HasSuffix(pattern, "/") {
		pattern += "**"
	}
	switch kind {
	case "gitdir", "gitdir/i":
		if rest, ok := strings.CutPrefix(pattern, "./"); ok {
			pattern = filepath.Join(dir, rest)
		} else if p, ok := expandHome(pattern); !ok {
			return false
		} else {
			pattern = p
		}
		if !strings.HasPrefix(pattern, "/") {
			pattern = "**/" + pattern
		}
		fold := kind == "gitdir/i"
		if wildmatch(pattern, r.GitDir, false, fold) {
			return true
		}
		real, err := filepath.EvalSymlinks(r.GitDir)
		return err == nil && wildmatch(pattern, real, false, fold)
	case "onbranch":
		head, err := os.ReadFile(filepath.Join(r.GitDir, "HEAD"))
		if err != nil {
			return false
		}
		branch, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/")
		return ok && wildmatch(pattern, branch, true, false)
	}
	return false
}

// wildmatch matches name against a glob pattern as git's wildmatch does:
// "**/" matches any number of leading components, "**" anything, "[...]" a
// character class, and "*" and "?" any run or character — within one path
// component only with pathname (git's WM_PATHNAME, which onbranch: uses and
// gitdir: does not).
func wildmatch(pattern, name string, pathname, fold bool) bool {
	star, one := ".*", "."
	if pathname {
		star, one = "[^/]*", "[^/]"
	}
	var re strings.Builder
	if fold {
		re.WriteString("(?i)")
	}
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch ch := pattern[i]; {
		case strings.HasPrefix(pattern[i:], "**/"):
			re.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(pattern[i:], "**"):
			re.WriteString(".*")
			i++
		case ch == '*':
			re.WriteString(star)
		case ch == '?':
			re.WriteString(one)
		case ch == '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			if end < 0 {
				re.WriteString(regexp.QuoteMeta("["))
				continue
			}
			class := pattern[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			re.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			re.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	re.WriteString("$")
	m, err := regexp.MatchString(re.String(), name)
	return err == nil && m
}

// Value returns the value of a variable ("section.key" or
// "section.subsection.key"; section and key in any case, the subsection in
// its own), the last setting read winning.
func (c *Config) Value(name string) (string, bool) {
	all := c.Values(name)
	if len(all) == 0 {
		return "", false
	}
	return all[len(all)-1], true
}

// Values returns every value of a multi-valued variable, in the order git
// reads them (`git config --get-all`).
func (c *Config) Values(name string) []string {
	section, key := name[:strings.Index(name+".", ".")], name[strings.LastIndex(name, ".")+1:]
	sub := ""
	if i, j := strings.Index(name, "."), strings.LastIndex(name, "."); i < j {
		sub = name[i+1 : j]
	}
	section, key = strings.ToLower(section), strings.ToLower(key)
	var values []string
	for _, v := range c.vars {
		if v.section == section && v.sub == sub && v.key == key {
			values = append(values, v.value)
		}
	}
	return values
}

// Bool reads a boolean variable as git does: true, yes, on or a non-zero
// number (any case), or the name alone on its line; false when unset or
// anything else.
func (c *Config) Bool(name string) bool {
	v, ok := c.Value(name)
	if !ok {
		return false
	}
	switch strings.ToLower(v) {
	case "", "true", "yes", "on":
		return true
	}
	n, err := strconv.Atoi(v)
	return err == nil && n != 0
}

// IgnoreCase reports git's core.ignorecase: the work tree's file system
// treats paths that differ only in case as one file.
func (r *Repo) IgnoreCase() bool { return r.Config().Bool("core.ignorecase") }

// ConfigValue reads the configuration now and returns one variable.
func (r *Repo) ConfigValue(name string) (string, bool) { return r.Config().Value(name) }

// ConfigDuration reads variable name as a duration: a Go duration ("90s",
// "1m30s", "500ms") or a whole number of seconds, else an error; def when
// it is not set.
func (r *Repo) ConfigDuration(name string, def time.Duration) (time.Duration, error) {
	v, ok := r.ConfigValue(name)
	if !ok {
		return def, nil
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s = %q: want a duration such as 60s, or whole seconds", name, v)
	}
	return d, nil
}

// RemoteNames returns the configured remotes (those with a remote.NAME.url),
// in the order git's configuration files first name them.
func (r *Repo) RemoteNames() []string {
	var names []string
	for _, v := range r.Config().vars {
		if v.section == "remote" && v.key == "url" && v.sub != "" && !slices.Contains(names, v.sub) {
			names = append(names, v.sub)
		}
	}
	return names
}
