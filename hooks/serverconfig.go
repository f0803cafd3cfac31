package hooks

import (
	"os"
	"path/filepath"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// AlternateRefsConfig is the git configuration variable naming the command
// that lists an alternate repository's refs, and AlternateRefsNone the value
// `tally hooks install --server` gives it: a command that lists none.
//
// receive-pack checks every push's connectivity (`git rev-list --objects
// --stdin --not --all --alternate-refs`) while the pushed objects are in
// quarantine, where the repository's own object directory is an alternate;
// so --alternate-refs starts `git for-each-ref` over the repository's own
// refs, which --all has already named (only receive.hideRefs can leave some
// out of --all, and a ref left out only makes the walk longer). Listing no
// alternate refs takes one git process off every push and leaves the check
// as strict or stricter: fewer objects are taken as already reachable, none
// is taken as present that is not. It is set only where the repository has
// no alternates of its own (objects/info/alternates), whose refs would
// otherwise spare pushes to a fork objects the pool already holds.
const (
	AlternateRefsConfig = "core.alternateRefsCommand"
	AlternateRefsNone   = "true"
)

// ServerConfig is what SetServerConfig did: the values it set, or why it
// left the repository's configuration alone.
type ServerConfig struct {
	Set     map[string]string `json:"set,omitempty"`
	Skipped string            `json:"skipped,omitempty"`
}

// SetServerConfig sets AlternateRefsConfig to AlternateRefsNone in a bare
// repository's own configuration unless the variable is set already (to
// anything: an administrator's choice stays) or the repository has
// alternates.
func SetServerConfig(repo *gitstore.Repo) (*ServerConfig, error) {
	if _, ok := repo.ConfigValue(AlternateRefsConfig); ok {
		return &ServerConfig{Skipped: AlternateRefsConfig + " is set already"}, nil
	}
	if _, err := os.Stat(filepath.Join(repo.ObjectDir, "info", "alternates")); err == nil {
		return &ServerConfig{Skipped: "the repository has alternates (objects/info/alternates), whose refs pushes may build on"}, nil
	}
	if _, err := repo.Git("config", AlternateRefsConfig, AlternateRefsNone); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "git config %s", AlternateRefsConfig)
	}
	return &ServerConfig{Set: map[string]string{AlternateRefsConfig: AlternateRefsNone}}, nil
}

// unsetServerConfig removes what SetServerConfig set (a value it did not
// write, which is another, stays).
func unsetServerConfig(repo *gitstore.Repo) {
	repo.Git("config", "--local", "--unset-all", AlternateRefsConfig, "^"+AlternateRefsNone+"$")
}
