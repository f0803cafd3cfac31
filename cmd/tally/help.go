package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// commandGroups are the sections of `tally --help`, in the order shown, each
// with the top-level commands it lists. Every visible top-level command is
// in exactly one (TestHelpGroupsAndExamples).
var commandGroups = []struct {
	id, title string
	commands  []string
}{
	{"leases", "Leases on cells:", []string{"plan", "claim", "renew", "release", "fail", "requeue", "done", "run", "next", "status", "show", "note", "worktree"}},
	{"paths", "Path locks:", []string{"lock", "unlock", "locks", "deadlocks"}},
	{"receipts", "Receipts, checkpoints and proofs:", []string{"receipt", "checkpoint", "prove", "verify-proof", "anchor"}},
	{"audit", "Audit:", []string{"verify", "log", "report", "audit", "check"}},
	{"remote", "Remote and hooks:", []string{"remote", "sync", "hooks", "guard"}},
	{"setup", "Setup:", []string{"init", "policy", "keys", "gc", "mcp", "demo", "version"}},
}

// examples are the Example text of each command, by its path below tally,
// for the commands that do not set their own. Each line is a command an
// agent can run as it is (after adjusting ids and epochs).
var examples = map[string]string{
	"init":                  "tally init",
	"note":                  `tally note "pausing the api work until the schema lands"`,
	"log":                   "tally log -n 20\ntally log --cell w1/api --since 2026-12-01T09:00:00Z\ntally --json log --actor agent-1 --kind claim",
	"verify":                "tally verify\ntally verify --full --trailers HEAD",
	"plan":                  "tally plan wave1.yaml\ncat wave1.json | tally plan -",
	"claim":                 "tally claim w1/api --ttl 20m\ntally --json claim --next --wave w1 --wait 10m\ntally claim --next --worktree",
	"renew":                 "tally renew w1/api --epoch 3\ntally renew w1/api --epoch 3 --ttl 1h",
	"release":               "tally release w1/api --epoch 3",
	"fail":                  `tally fail w1/api --epoch 3 --reason "tests need a database"`,
	"requeue":               "tally requeue w1/api",
	"done":                  "tally done w1/api --epoch 3\ntally done w1/api --epoch 3 --commit HEAD --evidence result.json\ntally done w1/api --epoch 3 --next --wait 10m\ntally done --merge",
	"status":                "tally status\ntally status w1\ntally status --wave w1",
	"show":                  "tally show w1/api",
	"worktree":              "tally worktree list",
	"worktree list":         "tally worktree list\ntally --json worktree list",
	"worktree prune":        "tally worktree prune\ntally worktree prune --force",
	"next":                  "tally next\ntally next --wave w1\ntally next w1",
	"demo":                  "tally demo --agents 4",
	"gc":                    "tally gc",
	"receipt":               "tally receipt show HEAD",
	"receipt show":          "tally receipt show HEAD",
	"receipt verify":        "tally receipt verify HEAD~2",
	"receipt export":        "tally receipt export HEAD --format in-toto > statement.json",
	"receipt repair":        "tally receipt repair\ntally --json receipt repair",
	"lock":                  "tally lock 'docs/**' --ttl 15m --reason 'release notes'\ncd src && tally lock 'api/**' ':/go.mod'",
	"unlock":                "tally unlock 'docs/**' --epoch 4",
	"locks":                 "tally locks",
	"deadlocks":             "tally deadlocks\ntally deadlocks --break",
	"checkpoint":            "tally checkpoint --save --sign ~/.ssh/tally_ed25519",
	"prove":                 "tally prove inclusion 42",
	"prove inclusion":       "tally prove inclusion 42 --size 100 > proof.txt",
	"prove consistency":     "tally prove consistency 100 > proof.txt",
	"verify-proof":          "tally verify-proof proof.txt --checkpoint checkpoint.txt",
	"anchor":                "tally anchor --ref refs/heads/main",
	"policy":                "tally policy show",
	"policy show":           "tally policy show",
	"policy set":            "tally policy set --receipts enforce --protected refs/heads/main --admins lead",
	"policy set-roles":      "tally policy set-roles lead=10 dev=5",
	"policy set-actors":     "tally policy set-actors agent-1=dev alice=lead",
	"policy set-pushers":    "tally policy set-pushers alice=alice,agent-* bob=bob",
	"keys":                  "tally keys show agent-1",
	"keys generate":         "tally keys generate --out ~/.ssh/tally_ed25519",
	"keys add":              "tally keys add agent-1 @$HOME/.ssh/tally_ed25519.pub",
	"keys revoke":           "tally keys revoke agent-1 @old.pub",
	"keys rotate":           "tally keys rotate agent-1 @old.pub @new.pub",
	"keys show":             "tally keys show agent-1",
	"remote":                "tally remote show",
	"remote set":            "tally remote set origin",
	"remote unset":          "tally remote unset",
	"remote show":           "tally remote show",
	"sync":                  "tally sync\ntally sync origin",
	"hooks":                 "tally hooks install",
	"hooks install":         "tally hooks install --client\ntally hooks install --agent claude,codex\ngit -C /srv/repo.git config core.hooksPath hooks && tally -C /srv/repo.git hooks install --server",
	"hooks uninstall":       "tally hooks uninstall\ntally hooks uninstall --agent all",
	"hooks status":          "tally hooks status --json",
	"report":                "tally report --out report.html --wave w1",
	"audit":                 "tally audit v1.0..v1.1 --ref refs/heads/main",
	"check":                 "tally check --ref refs/heads/main \"$BEFORE..$AFTER\"\ntally check --ref refs/tally/ledger \"$OLD_LEDGER..$NEW_LEDGER\"",
	"mcp":                   "tally mcp --auto-renew",
	"help":                  "tally help claim",
	"completion":            "tally completion bash > /etc/bash_completion.d/tally",
	"completion bash":       "tally completion bash > /etc/bash_completion.d/tally",
	"completion zsh":        "tally completion zsh > \"${fpath[1]}/_tally\"",
	"completion fish":       "tally completion fish > ~/.config/fish/completions/tally.fish",
	"completion powershell": "tally completion powershell > tally.ps1",
}

// organizeHelp puts the top-level commands of root into commandGroups and
// gives every command its example. It panics on a command named in
// commandGroups or examples that does not exist, so neither goes stale.
func organizeHelp(root *cobra.Command) {
	for _, g := range commandGroups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, name := range g.commands {
			c, _, err := root.Find([]string{name})
			if err != nil || c == root {
				panic(fmt.Sprintf("help group %s names unknown command %q", g.id, name))
			}
			c.GroupID = g.id
		}
	}
	// cobra adds completion and help only when it runs; add them now so
	// they are grouped and have examples too.
	root.SetHelpCommandGroupID("setup")
	root.SetCompletionCommandGroupID("setup")
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	used := map[string]bool{}
	for _, c := range root.Commands() {
		for _, p := range setExamples(c, c.Name()) {
			used[p] = true
		}
	}
	for p := range examples {
		if !used[p] {
			panic(fmt.Sprintf("example for unknown command %q", p))
		}
	}
}

// setExamples gives c, whose path below tally is path, and its subcommands
// the Example text of examples they do not set themselves, and returns the
// paths that have one there.
func setExamples(c *cobra.Command, path string) []string {
	var found []string
	if ex, ok := examples[path]; ok {
		found = append(found, path)
		if c.Example == "" {
			c.Example = indent(ex)
		}
	}
	for _, sub := range c.Commands() {
		found = append(found, setExamples(sub, path+" "+sub.Name())...)
	}
	return found
}

// indent formats example lines as cobra's help shows them (two spaces).
func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
