package gitstore_test

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestErrorPageOfEndlessBody: a server whose error page never ends (broken
// or hostile) still yields the page's text, read only up to its first 64 KiB,
// instead of a download that runs until the time limit and yields nothing.
func TestErrorPageOfEndlessBody(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testrepo.Missing(t, "curl is not on PATH (apt-get install curl): tally reads an HTTP error page with it")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("<html><body><p>push access is for maintainers only</p>"))
		pad := []byte(strings.Repeat("<!-- padding -->", 4096))
		for {
			if _, err := w.Write(pad); err != nil {
				return // curl was stopped
			}
		}
	}))
	defer srv.Close()
	page := gitstore.ErrorPage(srv.URL + "/info/refs?service=git-receive-pack")
	if !strings.Contains(page, "push access is for maintainers only") {
		t.Fatalf("the endless 403 page gave %q, want its text", page)
	}

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("git says this itself"))
	}))
	defer plain.Close()
	if page := gitstore.ErrorPage(plain.URL); page != "" {
		t.Fatalf("a text/plain error (git shows it already) gave %q, want none", page)
	}
}
