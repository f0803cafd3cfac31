package main

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

var (
	firstContact = flag.Bool("firstcontact", false, "only measure the first remote command in fresh clones of DIR/empty (built with -build) served by git daemon, with and without a trusted checkpoint key")
	fcRuns       = flag.Int("fcruns", 3, "fresh clones per first-contact measurement")
	fcFullRuns   = flag.Int("fcfullruns", 1, "fresh clones per measurement of the full-history path (slow)")
	fcAfter      = flag.Int("fcafter", 0, "entries appended to DIR/empty after the checkpoint, which a first contact fetches and replays")
)

// firstContactBench signs and stores a checkpoint of DIR/empty's ledger (a
// new note key, as a user's witness would), serves DIR over a loopback git
// daemon, and in fresh clones measures, side by side in one run, wall and
// peak RSS (/usr/bin/time) of the first `tally --remote origin verify` and
// `status` with the key trusted, the status view alone in the complete
// repository, git fetching the ledger ref with --depth=1 (as git offers
// haves, and without them as a first contact fetches), and the path
// without a key beside git fetching all of the ref's history. With
// -fcafter N the ledger first grows N entries past the checkpoint, which the
// trusted first contact then fetches (deepening) and replays.
func (b *bench) firstContactBench() {
	empty := filepath.Join(b.dir, "empty")
	skey, vkey, err := note.GenerateKey(rand.Reader, "bench.witness")
	if err != nil {
		die(err)
	}
	keyFile := filepath.Join(b.dir, "witness.key")
	if err := os.WriteFile(keyFile, []byte(skey), 0o600); err != nil {
		die(err)
	}
	cp := sh(empty, nil, b.tally, "--json", "checkpoint", "--sign", keyFile, "--save")
	var res struct{ Size int }
	json.Unmarshal([]byte(cp), &res)
	fmt.Fprintf(os.Stderr, "checkpoint of %d entries stored in %s\n", res.Size, empty)
	if *fcAfter > 0 {
		b.grow(empty, res.Size+*fcAfter)
	}

	daemon, url := b.daemon()
	defer daemon.Process.Kill()
	clone := func(name string) string {
		dir := filepath.Join(b.dir, "fc", name)
		os.RemoveAll(dir) // each measurement starts from a fresh clone
		sh(".", nil, "git", "clone", "-q", url+"/empty", dir)
		return dir
	}
	type sample struct {
		wall, rss []float64
		failed    []string
	}
	// measure runs args in dir under /usr/bin/time; a command that fails is
	// recorded with its output, not fatal (the full path may hit tally's
	// 60 s network timeout on a loaded machine).
	measure := func(s *sample, dir string, args ...string) string {
		timeFile := filepath.Join(b.dir, "fc.time")
		cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%e %M", "-o", timeFile}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		t, terr := os.ReadFile(timeFile)
		f := strings.Fields(string(t))
		if terr != nil || len(f) < 2 {
			die(fmt.Errorf("/usr/bin/time: %v %q", terr, t))
		}
		w, _ := strconv.ParseFloat(f[len(f)-2], 64)
		kb, _ := strconv.ParseFloat(f[len(f)-1], 64)
		s.wall, s.rss = append(s.wall, w), append(s.rss, kb/1024)
		if err != nil {
			s.failed = append(s.failed, fmt.Sprintf("%.120s", out))
		}
		return string(out)
	}
	trustedArg := func(dir string) string {
		sh(dir, nil, "git", "config", "tally.checkpointKey", vkey)
		return dir
	}
	fromCP := `"from":{"checkpoint_size":` + strconv.Itoa(res.Size)
	var verifyT, statusT, statusLocal, shallow, shallowNoHaves, verifyU, full sample
	for i := 0; i < *fcRuns; i++ {
		if out := measure(&verifyT, trustedArg(clone("verify")), b.tally, "--remote", "origin", "verify", "--json"); !strings.Contains(out, fromCP) {
			die(fmt.Errorf("trusted first verify did not start from the checkpoint: %.300s", out))
		}
		if out := measure(&statusT, trustedArg(clone("status")), b.tally, "--remote", "origin", "status", "--json"); !strings.Contains(out, fromCP) {
			die(fmt.Errorf("trusted first status did not start from the checkpoint: %.300s", out))
		}
		measure(&statusLocal, empty, b.tally, "status", "--json")
		measure(&shallow, clone("git-shallow"), "git", "fetch", "-q", "--depth=1", "origin", "refs/tally/ledger:refs/remotes/origin/tally/ledger")
		// What a first contact's fetch asks of the server: no haves.
		measure(&shallowNoHaves, clone("git-shallow-nohaves"), "git", "-c", "fetch.negotiationAlgorithm=noop", "fetch", "-q", "--depth=1", "origin", "refs/tally/ledger:refs/remotes/origin/tally/ledger")
	}
	for i := 0; i < *fcFullRuns; i++ {
		if out := measure(&verifyU, clone("untrusted"), b.tally, "--remote", "origin", "verify", "--json"); strings.Contains(out, `"from":`) {
			die(fmt.Errorf("untrusted first contact started from a checkpoint"))
		}
		measure(&full, clone("git-full"), "git", "fetch", "-q", "origin", "refs/tally/ledger:refs/remotes/origin/tally/ledger")
	}
	os.RemoveAll(filepath.Join(b.dir, "fc"))
	span := func(xs []float64, unit string) string {
		if len(xs) == 0 {
			return "not run"
		}
		lo, hi := xs[0], xs[0]
		for _, x := range xs {
			lo, hi = min(lo, x), max(hi, x)
		}
		return fmt.Sprintf("%.2f–%.2f %s", lo, hi, unit)
	}
	fmt.Printf("\nfirst remote command in a fresh clone of a %d-entry remote, checkpoint at %d (git daemon on loopback), %d runs (full path %d):\n\n",
		res.Size+*fcAfter, res.Size, *fcRuns, *fcFullRuns)
	fmt.Println("| what | wall | peak RSS | failed |")
	fmt.Println("|---|---|---|---|")
	for _, r := range []struct {
		name string
		s    sample
	}{
		{"`tally --remote origin verify --json`, key trusted", verifyT},
		{"`tally --remote origin status --json`, key trusted", statusT},
		{"`tally status --json` in the complete served repository (the view alone)", statusLocal},
		{"`git fetch --depth=1` of refs/tally/ledger", shallow},
		{"`git -c fetch.negotiationAlgorithm=noop fetch --depth=1` of refs/tally/ledger (no haves)", shallowNoHaves},
		{"`tally --remote origin verify --json`, no key (all history, from genesis)", verifyU},
		{"`git fetch` of refs/tally/ledger (all history)", full},
	} {
		fmt.Printf("| %s | %s | %s | %s |\n", r.name, span(r.s.wall, "s"), span(r.s.rss, "MB"), strings.Join(r.s.failed, "; "))
	}
	fmt.Println()
	for _, r := range []struct {
		name     string
		num, den sample
	}{
		{"trusted first verify / git fetch --depth=1", verifyT, shallow},
		{"trusted first status / git fetch --depth=1", statusT, shallow},
		{"trusted first verify / git fetch --depth=1 without haves", verifyT, shallowNoHaves},
		{"trusted first status / git fetch --depth=1 without haves", statusT, shallowNoHaves},
	} {
		ratios := make([]float64, len(r.num.wall))
		for i := range ratios {
			ratios[i] = r.num.wall[i] / r.den.wall[i]
		}
		fmt.Printf("%s, paired by run: %s\n", r.name, span(ratios, "×"))
	}
}

// daemon serves b.dir read-only with git daemon on a free loopback port
// and returns it and its base URL.
func (b *bench) daemon() (*exec.Cmd, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("git", "daemon", "--export-all", "--reuseaddr", "--listen=127.0.0.1",
		"--port="+strconv.Itoa(port), "--base-path="+b.dir, b.dir)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		die(err)
	}
	go cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			return cmd, "git://127.0.0.1:" + strconv.Itoa(port)
		}
		time.Sleep(20 * time.Millisecond) // waiting for the daemon to listen, not for a race
	}
	die(fmt.Errorf("git daemon did not listen on port %d", port))
	return nil, ""
}
