package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// Every tally process runs the initializer of every package linked into the
// binary, whatever its command, so what they do is paid by every `note` and
// `claim`. Packages whose initializers cost more than the little tally used
// them for stay out of the build (callgrind on a tally note: go-git's config
// parser, through gcfg, linked encoding/gob; golang.org/x/net/html built its
// entity table; the progress bar library its spinners and colour tables;
// the MCP SDK, for tally mcp alone, JSON Schema, encoding/gob and OAuth;
// x/crypto/ssh its Diffie-Hellman groups with math/big and the NIST curves;
// net/http and crypto/tls, a third of the binary, for one error message),
// and tally's own packages build no pattern or table in an
// initializer (the ledger's compiled regexp was 85 allocations and 2% of a
// note, the demo's plan 18): at most initAllocs allocations each, as
// GODEBUG=inittrace=1 counts (cmd/tally's help examples, a map, are 8).
func TestStartInitializers(t *testing.T) {
	const initAllocs = 8
	out, err := exec.Command("go", "list", "-deps", "github.com/tally-dev/tally/cmd/tally").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, pkg := range []string{"github.com/go-git/gcfg", "golang.org/x/net/html", "github.com/schollz/progressbar/v3",
		// the MCP SDK and what only it links: tally-mcp serves MCP
		"github.com/modelcontextprotocol/go-sdk/mcp", "github.com/google/jsonschema-go/jsonschema", "encoding/gob", "golang.org/x/oauth2",
		// identity writes the OpenSSH formats it needs by hand
		"golang.org/x/crypto/ssh",
		// an HTTP error page is fetched with curl
		"net/http", "crypto/tls",
		// small objects are deflated by gitstore.deflateSmall, large ones by compress/zlib
		"github.com/klauspost/compress/flate"} {
		if slices.Contains(deps, pkg) {
			t.Errorf("tally links %s, whose initializers every process runs", pkg)
		}
	}
	cmd := exec.Command(testrepo.Tally(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	trace, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tally version: %v\n%s", err, trace)
	}
	line := regexp.MustCompile(`(?m)^init (\S+) @.* (\d+) allocs$`)
	seen := 0
	for _, m := range line.FindAllStringSubmatch(string(trace), -1) {
		if m[1] != "main" && !strings.HasPrefix(m[1], "github.com/tally-dev/tally") {
			continue
		}
		seen++
		if n, _ := strconv.Atoi(m[2]); n > initAllocs {
			t.Errorf("the initializer of %s allocates %d times (at most %d): build its tables when first used", m[1], n, initAllocs)
		}
	}
	if seen == 0 {
		t.Fatalf("no initializer of tally's packages in the trace:\n%s", trace)
	}
}
