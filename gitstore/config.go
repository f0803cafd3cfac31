package gitstore

import (
	"os"
	"path/filepath"
	"strings"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
)

// ConfigValue returns the value of a configuration variable ("section.key" or
// "section.subsection.key") as git would see it in this repository: system,
// global (XDG then ~/.gitconfig, or $GIT_CONFIG_GLOBAL) and repository files,
// later files winning. Reading the files directly keeps a short-lived tally
// process from spawning `git config`. Include directives are not followed.
func (r *Repo) ConfigValue(name string) (string, bool) {
	section, key := name[:strings.Index(name+".", ".")], name[strings.LastIndex(name, ".")+1:]
	sub := ""
	if i, j := strings.Index(name, "."), strings.LastIndex(name, "."); i < j {
		sub = name[i+1 : j]
	}
	var files []string
	if os.Getenv("GIT_CONFIG_NOSYSTEM") == "" {
		files = append(files, "/etc/gitconfig")
	}
	if g := os.Getenv("GIT_CONFIG_GLOBAL"); g != "" {
		files = append(files, g)
	} else {
		if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
			files = append(files, filepath.Join(xdg, "git", "config"))
		} else if home, err := os.UserHomeDir(); err == nil {
			files = append(files, filepath.Join(home, ".config", "git", "config"))
		}
		if home, err := os.UserHomeDir(); err == nil {
			files = append(files, filepath.Join(home, ".gitconfig"))
		}
	}
	files = append(files, filepath.Join(r.CommonDir, "config"), filepath.Join(r.GitDir, "config.worktree"))
	value, found := "", false
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		cfg := gitconfig.New()
		err = gitconfig.NewDecoder(fh).Decode(cfg)
		fh.Close()
		if err != nil || !cfg.HasSection(section) {
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
