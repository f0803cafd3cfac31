package gitstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"
)

// A request pushed over git:// is sent by tally itself rather than by `git
// push`: a request is one commit with the empty tree, already a pack in
// memory, and git's push and its pack-objects were two process starts a
// claim (12–17 ms of CPU at 8 agents, PERFORMANCE.md at b45f87f) for two objects.
// tally speaks `git push`'s side of the protocol to receive-pack exactly
// (protocol version 0, as git ≥ 2.26 speaks it for every push): the
// connection request with the same host, the same command and capabilities
// (report-status-v2, side-band-64k, quiet, object-format), the request's
// pack, and the report read as git reads it. The server sees the same push
// and checks it as any other: receive-pack indexes and checks the pack and
// its connectivity, pre-receive and proc-receive run as they do for git's
// push, and the pusher variables are the server's (git daemon's
// REMOTE_ADDR), not anything the client says. Only git:// is spoken:
// smart HTTP and ssh reach the server through the user's credential helpers,
// proxies, TLS settings and ssh configuration, which only git applies as git
// does, so those keep `git push` (nativePushTarget).

// errNotNative says the server's advertisement asks for more than tally
// speaks (no side-band-64k, no report-status, another object format): the
// connection is closed without a command, as an empty push, and `git push`
// sends the request instead.
var errNotNative = errors.New("the server's receive-pack needs the git CLI")

// gitDaemonPort is git's default port for git:// URLs.
const gitDaemonPort = "9418"

// nativePushTarget returns the host (as the URL gives it, with its port if
// any: git sends that as the virtual host), the address to dial and the
// repository path of remote's push URL, when tally pushes a request there
// itself. That is when `git push <remote>` would connect to a git:// URL
// with nothing in between that only git applies: the remote's one push URL
// (remote.<name>.pushurl, else remote.<name>.url; a remote given as a URL
// is that URL), with no url.<base>.insteadOf or pushInsteadOf anywhere in
// the configuration, no proxy command (core.gitProxy, GIT_PROXY_COMMAND),
// no protocol restrictions (protocol.allow, protocol.git.allow,
// GIT_ALLOW_PROTOCOL), no receive-pack command, remote helper or push
// options configured, protocol version 0 or 2 (a push speaks 0 then) and
// no push negotiation, no virtual host override (GIT_OVERRIDE_VIRTUAL_HOST)
// and no configuration from the environment (GIT_CONFIG_PARAMETERS,
// GIT_CONFIG_COUNT, GIT_CONFIG_SYSTEM), which the in-process reader does
// not see; the URL's host is a name or an IPv4 address and its path has no
// "~", "%" or control character (forms git rewrites). Any other case
// pushes with `git push`.
func (r *Repo) nativePushTarget(remote string) (host, addr, path string, ok bool) {
	for _, v := range []string{"GIT_PROXY_COMMAND", "GIT_ALLOW_PROTOCOL", "GIT_OVERRIDE_VIRTUAL_HOST",
		"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_SYSTEM"} {
		if _, set := os.LookupEnv(v); set {
			return "", "", "", false
		}
	}
	c := r.Config()
	for _, v := range c.vars {
		if v.section == "url" && (v.key == "insteadof" || v.key == "pushinsteadof") {
			return "", "", "", false
		}
	}
	for _, name := range []string{"core.gitProxy", "protocol.allow", "protocol.git.allow", "push.pushOption"} {
		if _, set := c.Value(name); set {
			return "", "", "", false
		}
	}
	if v, set := c.Value("protocol.version"); set && v != "0" && v != "2" {
		return "", "", "", false
	}
	if v, set := c.Value("push.negotiate"); set && v != "false" {
		return "", "", "", false
	}
	urls := []string{remote}
	if u := c.Values("remote." + remote + ".url"); len(u) > 0 {
		for _, k := range []string{"receivepack", "vcs", "pushoption"} {
			if _, set := c.Value("remote." + remote + "." + k); set {
				return "", "", "", false
			}
		}
		urls = u
		if pu := c.Values("remote." + remote + ".pushurl"); len(pu) > 0 {
			urls = pu
		}
	}
	if len(urls) != 1 {
		return "", "", "", false // git pushes to each
	}
	rest, ok := strings.CutPrefix(urls[0], "git://")
	if !ok {
		return "", "", "", false
	}
	host, path, ok = strings.Cut(rest, "/")
	path = "/" + path
	if !ok || host == "" || strings.ContainsAny(host, "[]@") || strings.ContainsAny(path, "~%") ||
		strings.ContainsFunc(urls[0], func(c rune) bool { return c < ' ' || c == 0x7f }) {
		return "", "", "", false
	}
	addr = host
	if h, port, found := strings.Cut(host, ":"); !found {
		addr = net.JoinHostPort(host, gitDaemonPort)
	} else if h == "" || port == "" || strings.Contains(port, ":") {
		return "", "", "", false
	}
	return host, addr, path, true
}

// boundedConn is a connection on which every read and write must progress
// within idle (GitRun.Idle's bound on a silent git), and all of them end
// by end (GitRun.Timeout's: a server that trickles is cut off too).
type boundedConn struct {
	net.Conn
	idle time.Duration
	end  time.Time
}

// errPastDeadline is a request push cut off at its deadline.
var errPastDeadline = errors.New("the request's deadline passed")

func (c boundedConn) bound() error {
	now := time.Now()
	if !now.Before(c.end) {
		return errPastDeadline
	}
	at := now.Add(c.idle)
	if c.end.Before(at) {
		at = c.end
	}
	return c.SetDeadline(at)
}

func (c boundedConn) Read(p []byte) (int, error) {
	if err := c.bound(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(c.end) {
		err = errPastDeadline
	}
	return n, err
}

func (c boundedConn) Write(p []byte) (int, error) {
	if err := c.bound(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(c.end) {
		err = errPastDeadline
	}
	return n, err
}

// pushRequestNative pushes the one-commit pack to ref on the git daemon at
// addr (host as the URL names it, path the repository) as `git push
// --porcelain` does, and returns the same RequestResult that parsing git's
// porcelain report and stderr gives (PushRequest), or an error of the same
// class git's failure has (classifyFailure, given the words git would have
// printed): a connection that cannot be made or is cut, or a report that
// does not come, wraps ErrRemoteUnreachable (the request may have been
// acted on); an ERR line from the daemon (git's "remote error: …") wraps
// ErrRemoteDenied. errNotNative: nothing was sent. The whole push ends by
// end, and what the server says is kept up to MaxSaid bytes (past either,
// ErrRemoteUnreachable).
func pushRequestNative(host, addr, path, ref string, commit ObjectID, pack []byte, end time.Time) (*RequestResult, error) {
	raw, err := net.DialTimeout("tcp", addr, min(remoteIdle, time.Until(end)))
	if err != nil {
		return nil, dialFailure(addr, err)
	}
	conn := boundedConn{raw, remoteIdle, end}
	defer conn.Close()
	w := bufio.NewWriter(conn)
	enc := pktline.NewEncoder(w)
	sent := func(err error) error {
		if err == nil {
			err = w.Flush()
		}
		return err
	}
	// git's connect.c: "<service> <path>\0host=<host>\0", and nothing after
	// it for protocol version 0.
	if err := sent(enc.EncodeString("git-receive-pack " + path + "\x00host=" + host + "\x00")); err != nil {
		return nil, cutFailure(err)
	}
	sc := pktline.NewScanner(bufio.NewReader(conn))
	caps, err := readAdvertisement(sc)
	if err != nil {
		return nil, err
	}
	// The capabilities git's send-pack asks for, in its order, for a push
	// without progress; a server it would speak to otherwise is git's.
	report := "report-status-v2"
	if !caps[report] {
		report = "report-status"
	}
	format := hasCapPrefix(caps, "object-format=")
	if !caps[report] || !caps["side-band-64k"] || format && !caps["object-format=sha1"] {
		sent(enc.Flush()) // no command: receive-pack ends as after an empty push
		return nil, errNotNative
	}
	want := []string{report, "side-band-64k"}
	if caps["quiet"] {
		want = append(want, "quiet")
	}
	if format {
		want = append(want, "object-format=sha1")
	}
	if hasCapPrefix(caps, "agent=") {
		want = append(want, "agent=tally")
	}
	var zero ObjectID
	if err := enc.EncodeString(zero.String() + " " + commit.String() + " " + ref + "\x00 " + strings.Join(want, " ")); err != nil {
		return nil, cutFailure(err)
	}
	if err := enc.Flush(); err != nil {
		return nil, cutFailure(err)
	}
	if _, err := w.Write(pack); err != nil {
		return nil, cutFailure(err)
	}
	if err := sent(nil); err != nil {
		return nil, cutFailure(err)
	}
	return readReport(sc, ref, commit)
}

// hasCapPrefix reports whether a capability starting with prefix was
// advertised.
func hasCapPrefix(caps map[string]bool, prefix string) bool {
	for c := range caps {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// readAdvertisement reads receive-pack's ref advertisement up to its flush
// and returns the capabilities of its first line (after the NUL; an empty
// repository advertises them on "<zero> capabilities^{}"). A daemon's ERR
// line is its refusal of the connection: ErrRemoteDenied, in git's words.
func readAdvertisement(sc *pktline.Scanner) (map[string]bool, error) {
	caps := map[string]bool{}
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			return caps, nil
		}
		if first {
			first = false
			if _, c, ok := bytes.Cut(line, []byte{0}); ok {
				for _, f := range strings.Fields(string(c)) {
					caps[f] = true
				}
			}
		}
	}
	var el *pktline.ErrorLine
	if errors.As(sc.Err(), &el) {
		return nil, classifyFailure(splitStderr("fatal: remote error: " + el.Text))
	}
	if err := sc.Err(); first && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		// Closed before a word: a server at its connection limit.
		return nil, cutFailure(fmt.Errorf("%w: the remote end hung up unexpectedly", errDropped))
	}
	return nil, cutFailure(sc.Err())
}

// readReport reads what receive-pack sends after the pack, demultiplexed
// as git's recv_sideband does: band 1 carries the report (pkt-lines of
// their own), band 2 the server's messages (its hooks' output), band 3 a
// fatal error, up to the flush that ends the stream. It returns ref's
// result as parsePorcelain reads git's status line for it: accepted, with
// the reported ref and range ("[new reference]", no range, when old is
// zero; a deletion, none either), or refused with the reason; a report
// without ref's status is git's "remote failed to report status".
//
// What the server says (its report and messages together) is kept up to
// MaxSaid bytes; more is a transport failure, as a cut connection is.
func readReport(sc *pktline.Scanner, ref string, commit ObjectID) (*RequestResult, error) {
	var report []byte
	var said sidebandLines
	var fatal string
	done := false
	kept := 0
	for !done && sc.Scan() {
		b := sc.Bytes()
		if kept += len(b); kept > MaxSaid {
			return nil, fmt.Errorf("%w: the server said more than %d bytes in answer to the request", ErrRemoteUnreachable, MaxSaid)
		}
		switch {
		case len(b) == 0:
			done = true
		case b[0] == 1:
			report = append(report, b[1:]...)
		case b[0] == 2:
			said.add(b[1:])
		case b[0] == 3:
			fatal = strings.TrimRight(string(b[1:]), "\n")
			done = true
		default:
			return nil, fmt.Errorf("%w: bad sideband band %d from the server", ErrRemoteUnreachable, b[0])
		}
	}
	lines := said.end()
	if fatal != "" {
		lines = append(lines, fatal)
	}
	if !done || fatal != "" {
		cause := "the remote end hung up unexpectedly"
		if err := sc.Err(); err != nil {
			cause = err.Error()
		}
		return nil, classifyFailure(saidText(lines), plainText("fatal: "+cause))
	}
	res := &RequestResult{Ref: ref, OK: false, Reason: "remote failed to report status", Lines: lines}
	rs := pktline.NewScanner(bytes.NewReader(report))
	found, options := false, false
	var old, new ObjectID
	for rs.Scan() && len(rs.Bytes()) > 0 {
		l := strings.TrimSuffix(string(rs.Bytes()), "\n")
		switch {
		case !found && l == "ok "+ref:
			found, options, res.OK, res.Reason = true, true, true, ""
			new = commit
		case !found && strings.HasPrefix(l, "ng "+ref+" "):
			found, res.Reason = true, strings.TrimPrefix(l, "ng "+ref+" ")
		case strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "ng "):
			options = false // another ref's, or the same ref's next report
		case options && strings.HasPrefix(l, "option "):
			k, v, _ := strings.Cut(strings.TrimPrefix(l, "option "), " ")
			switch k {
			case "refname":
				res.Ref = v
			case "old-oid":
				old, _ = ParseObjectID(v)
			case "new-oid":
				new, _ = ParseObjectID(v)
			}
		}
	}
	if res.OK && !old.IsZero() && !new.IsZero() {
		res.Old, res.New = old.String(), new.String()
	}
	if !res.OK {
		res.Said = saidText(lines)
	}
	return res, nil
}

// sidebandLines cuts the server's messages into lines as git prints them,
// one "remote: " line each, as they arrive: split at every newline and
// carriage return (recv_sideband ends a line at either), a last
// unterminated piece kept (end), trailing spaces dropped as remoteLines
// drops git's padding. Cutting as they arrive keeps one copy of each line:
// a sent range is ≈ 100 KB relayed in packets of 128 bytes, and collecting
// them whole first grew a buffer to five times that.
type sidebandLines struct {
	lines []string
	part  []byte // the line being received, up to the packet at hand
}

// add takes the next packet of the server's messages.
func (s *sidebandLines) add(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b)
		}
		if r := bytes.IndexByte(b[:i], '\r'); r >= 0 {
			i = r
		}
		if i == len(b) {
			if s.part == nil {
				s.part = make([]byte, 0, 16<<10) // above a range's longest line
			}
			s.part = append(s.part, b...)
			return
		}
		line := b[:i]
		if len(s.part) > 0 {
			s.part = append(s.part, line...)
			line = s.part
		}
		s.lines = append(s.lines, string(bytes.TrimRight(line, " ")))
		s.part = s.part[:0]
		b = b[i+1:]
	}
}

// end returns the lines, the last unterminated piece among them.
func (s *sidebandLines) end() []string {
	if len(s.part) > 0 {
		s.lines = append(s.lines, string(bytes.TrimRight(s.part, " ")))
		s.part = s.part[:0]
	}
	return s.lines
}

// dialFailure is a connection that could not be made, classified by the
// causes unreachableCauses names in git's words.
func dialFailure(addr string, err error) error {
	var dns *net.DNSError
	cause := ""
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		cause = "connection refused"
	case errors.As(err, &dns):
		cause = "host not found"
	case errors.Is(err, os.ErrDeadlineExceeded):
		cause = "timed out"
	}
	if cause == "" {
		return fmt.Errorf("%w: unable to connect to %s: %v", ErrRemoteUnreachable, addr, err)
	}
	return fmt.Errorf("%w: %s: unable to connect to %s: %v", ErrRemoteUnreachable, cause, addr, err)
}

// cutFailure is a connection that ended, or went silent for remoteIdle,
// before the push was done: the request may or may not have been acted on.
func cutFailure(err error) error {
	if err == nil {
		err = errors.New("the remote end hung up unexpectedly")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: timed out: the server said nothing for %v", ErrRemoteUnreachable, remoteIdle)
	}
	if errors.Is(err, errPastDeadline) {
		return fmt.Errorf("%w: timed out: %v", ErrRemoteUnreachable, err)
	}
	return fmt.Errorf("%w: %w", ErrRemoteUnreachable, err)
}
