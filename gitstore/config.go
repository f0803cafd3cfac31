package gitstore

import (
	"os"
	"path/filepath"
	"strings"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
)

// Config is the configuration git would see in a repository, read at one
// moment: system, global (XDG then ~/.gitconfig, or $GIT_CONFIG_GLOBAL) and
// repository files, later files winning. Reading the files directly keeps a
// short-lived tally process from spawning `git config`. Include directives
// are not followed.
type Config struct {
	files []*gitconfig.Config // in the order git reads them
}

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
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		cfg := gitconfig.New()
		err = gitconfig.NewDecoder(fh).Decode(cfg)
		fh.Close()
		if err == nil {
			c.files = append(c.files, cfg)
		}
	}
	return c
}

// Value returns the value of a variable ("section.key" or
// "section.subsection.key"), the last file that sets it winning.
func (c *Config) Value(name string) (string, bool) {
	section, key := name[:strings.Index(name+".", ".")], name[strings.LastIndex(name, ".")+1:]
	sub := ""
	if i, j := strings.Index(name, "."), strings.LastIndex(name, "."); i < j {
		sub = name[i+1 : j]
	}
	value, found := "", false
	for _, cfg := range c.files {
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
		if opts.Has(key) {
			value, found = opts.Get(key), true
		}
	}
	return value, found
}

// ConfigValue reads the configuration now and returns one variable.
func (r *Repo) ConfigValue(name string) (string, bool) { return r.Config().Value(name) }

// RemoteNames returns the configured remotes (those with a remote.NAME.url),
// in the order git's configuration files first name them.
func (r *Repo) RemoteNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, cfg := range r.Config().files {
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
