package gitstore

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
)

// Config is the configuration git would see in a repository, read at one
// moment: system, global (XDG then ~/.gitconfig, or $GIT_CONFIG_GLOBAL) and
// repository files, later files winning. Reading the files directly keeps a
// short-lived tally process from spawning `git config`. Include directives
// (include.path, includeIf "gitdir:", "gitdir/i:" and "onbranch:") are
// followed as git follows them, so a value is the one `git config` prints.
type Config struct {
	// parts are the files' sections in the order git reads them, each
	// included file's in place of the section that includes it, so the last
	// part that sets a variable is the one git's last-one-wins picks.
	parts []*gitconfig.Config
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

// read appends the sections of the file at path, following its includes.
// A file that cannot be read or parsed is skipped, as a missing include is.
func (c *Config) read(r *Repo, path string, depth int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, text := range splitSections(string(b)) {
		part := gitconfig.New()
		if gitconfig.NewDecoder(strings.NewReader(text)).Decode(part) != nil {
			continue
		}
		c.parts = append(c.parts, part)
		if depth >= maxIncludeDepth {
			continue
		}
		for _, inc := range r.includes(part, filepath.Dir(path)) {
			c.read(r, inc, depth+1)
		}
	}
}

// splitSections cuts a config file's text before each section header, so
// that every part holds one section and the parts keep the file's order
// (go-git's parser merges same-named sections, losing it).
func splitSections(text string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(text); {
		end := strings.IndexByte(text[i:], '\n')
		if end < 0 {
			end = len(text) - i
		}
		if line := strings.TrimLeft(text[i:i+end], " \t"); strings.HasPrefix(line, "[") && i > start {
			parts = append(parts, text[start:i])
			start = i
		}
		i += end + 1
	}
	return append(parts, text[start:])
}

// includes lists the files a part includes, in order: include.path, and
// includeIf.<condition>.path when the condition holds. A relative path is
// relative to dir, the including file's directory; "~/" is the home directory.
func (r *Repo) includes(part *gitconfig.Config, dir string) []string {
	var out []string
	for _, s := range part.Sections {
		switch {
		case strings.EqualFold(s.Name, "include"):
			out = append(out, includePaths(s.Options, dir)...)
		case strings.EqualFold(s.Name, "includeIf"):
			for _, sub := range s.Subsections {
				if r.includeIf(sub.Name, dir) {
					out = append(out, includePaths(sub.Options, dir)...)
				}
			}
		}
	}
	return out
}

func includePaths(opts gitconfig.Options, dir string) []string {
	var out []string
	for _, o := range opts {
		if !strings.EqualFold(o.Key, "path") || o.Value == "" {
			continue
		}
		p, ok := expandHome(o.Value)
		if !ok {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		out = append(out, p)
	}
	return out
}

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
// "section.subsection.key"), the last file that sets it winning.
func (c *Config) Value(name string) (string, bool) {
	all := c.Values(name)
	if len(all) == 0 {
		return "", false
	}
	return all[len(all)-1], true
}

// Values returns every value of a multi-valued variable in the order git
// reads them (`git config --get-all`).
func (c *Config) Values(name string) []string {
	section, key := name[:strings.Index(name+".", ".")], name[strings.LastIndex(name, ".")+1:]
	sub := ""
	if i, j := strings.Index(name, "."), strings.LastIndex(name, "."); i < j {
		sub = name[i+1 : j]
	}
	var values []string
	for _, cfg := range c.parts {
		if !cfg.HasSection(section) {
			continue
		}
		s := cfg.Section(section)
		opts := s.Options
		if sub != "" {
			if !s.HasSubsection(sub) {
				continue
			}
			opts = s.Subsection(sub).Options
		}
		values = append(values, opts.GetAll(key)...)
	}
	return values
}

// ConfigValue reads the configuration now and returns one variable.
func (r *Repo) ConfigValue(name string) (string, bool) { return r.Config().Value(name) }

// RemoteNames returns the configured remotes (those with a remote.NAME.url),
// in the order git's configuration files first name them.
func (r *Repo) RemoteNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, cfg := range r.Config().parts {
		if !cfg.HasSection("remote") {
			continue
		}
		for _, sub := range cfg.Section("remote").Subsections {
			if !seen[sub.Name] && sub.Options.Has("url") {
				seen[sub.Name] = true
				names = append(names, sub.Name)
			}
		}
	}
	return names
}
