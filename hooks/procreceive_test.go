package hooks

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/ledger"
)

// TestProcReceiveLongRefusal: a refusal whose reason is longer than a
// pkt-line (here 70,000 bytes of message) is cut to fit, never dropped:
// the report holds one "ng" line for the request, within a pkt-line and
// with room for receive-pack's newline, starting with the code.
func TestProcReceiveLongRefusal(t *testing.T) {
	const ref = "refs/for/tally/claim-next"
	var in bytes.Buffer
	enc := pktline.NewEncoder(&in)
	enc.EncodeString("version=1\x00")
	enc.Flush()
	enc.EncodeString(strings.Repeat("0", 40) + " " + strings.Repeat("1", 40) + " " + ref)
	enc.Flush()
	var out bytes.Buffer
	err := ProcReceive(&in, &out, func(Update) Answer {
		return Refusal(errs.New(errs.Usage, "%s", strings.Repeat("é", 35000)))
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := pktline.NewScanner(&out)
	var lines []string
	for sc.Scan() {
		if l := sc.Bytes(); len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0] != "version=1\x00" {
		t.Fatalf("report %d lines, want the version and one refusal", len(lines))
	}
	ng := lines[1]
	if !strings.HasPrefix(ng, "ng "+ref+" tally USAGE: éé") || len(ng)+1 > pktline.MaxPayloadSize || len(ng) > ledger.MaxRefusalLine {
		t.Fatalf("refusal line of %d bytes starting %q", len(ng), ng[:min(len(ng), 60)])
	}
	if !strings.HasSuffix(ng, "é") {
		t.Fatalf("the refusal is cut inside a character: ends %q", ng[len(ng)-4:])
	}
}
