package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// The files of a repository are opened without the runtime's poller
// (gitstore's openFile): os.Open offers each regular file to epoll on Linux,
// which refuses it, at four fcntl calls and an epoll_ctl an open
// (PERFORMANCE.md at b45f87f, "Append, fourth pass"). Counted from strace on a note
// and a view: no descriptor is switched to non-blocking mode and none is
// added to an epoll instance only to be refused.
func TestRepositoryFilesSkipPoller(t *testing.T) {
	testrepo.Strace(t)
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "note", "first")
	for _, args := range [][]string{{"note", "x"}, {"status"}} {
		log := straceTally(t, r, "openat,fcntl,epoll_ctl", args...)
		opened, offered := pollerOffers(log)
		if opened == 0 {
			t.Fatalf("tally %v opened no file of the repository: the trace does not show what it should\n%s", args, log)
		}
		if len(offered) > 0 {
			t.Errorf("tally %v offered %d of the %d files it opened in the repository to the poller:\n%s",
				args, len(offered), opened, strings.Join(offered, "\n"))
		}
	}
}

var (
	straceOpenFD    = regexp.MustCompile(`^(\d+) +openat\(AT_FDCWD, "([^"]+)", [^)]*\) += (\d+)`)
	straceNonblock  = regexp.MustCompile(`^(\d+) +fcntl\((\d+), F_SETFL, [^)]*O_NONBLOCK`)
	straceEpollFile = regexp.MustCompile(`^(\d+) +epoll_ctl\(\d+, EPOLL_CTL_ADD, (\d+),.* = -1 EPERM`)
)

// pollerOffers reads an strace -f log (openat, fcntl, epoll_ctl) and
// returns how many files of a .git directory were opened, and the calls
// that set one of them non-blocking or offered it to epoll.
func pollerOffers(log string) (opened int, offered []string) {
	repoFD := map[string]bool{} // by descriptor: the threads of one process share them
	for _, l := range straceJoin(log) {
		if m := straceOpenFD.FindStringSubmatch(l); m != nil {
			in := strings.Contains(m[2], "/.git/")
			repoFD[m[3]] = in
			if in {
				opened++
			}
		} else if m := straceNonblock.FindStringSubmatch(l); m != nil && repoFD[m[2]] {
			offered = append(offered, l)
		} else if m := straceEpollFile.FindStringSubmatch(l); m != nil && repoFD[m[2]] {
			offered = append(offered, l)
		}
	}
	return opened, offered
}
