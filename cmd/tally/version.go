package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion describes this binary from its build info: the module
// version ("(devel)" for a build from a work tree, vX.Y.Z for go install
// module@version) and the VCS revision the go command stamped, if any.
type buildVersion struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func readBuildVersion() buildVersion {
	v := buildVersion{Version: "(unknown)", Go: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version = info.Main.Version
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: the version, and for a "(devel)" build the
// revision (with "+dirty" for a modified work tree) when known; a pseudo-
// version already names its revision.
func (v buildVersion) String() string {
	s := v.Version
	if v.Revision != "" && v.Version == "(devel)" {
		s += " " + v.Revision
		if v.Modified {
			s += "+dirty"
		}
	}
	return s
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print tally's version and the commit it was built from",
		Example: `  tally version
  tally --version
  tally version --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readBuildVersion()
			return a.emit(v, func(w io.Writer) { fmt.Fprintf(w, "tally %s (%s)\n", v, v.Go) })
		},
	}
}
