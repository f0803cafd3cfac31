// Command tally is a git-native lease ledger and receipt tool for many agents
// working in one repository. See README.md.
package main

import (
	"os"
	"runtime/debug"
)

func main() {
	// Most tally commands live a few milliseconds: collecting garbage would
	// cost more than the memory it frees. The collector only runs when the
	// heap nears the limit (long-running commands such as mcp turn it back on).
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(512 << 20)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
