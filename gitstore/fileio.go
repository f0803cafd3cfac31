package gitstore

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// createTemp is os.CreateTemp(dir, prefix+"*") without the poller: a new
// file, mode 0600, named prefix and a random number, that did not exist.
func createTemp(dir, prefix string) (*os.File, error) {
	return createTempMode(dir, prefix, 0o600)
}

// createTempMode is createTemp with the file's mode.
func createTempMode(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := openFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) || try == 10000 {
			return f, err
		}
	}
}

// OpenFile and ReadFile are openFile and readFile for the packages above
// gitstore that keep files of their own beside a repository's refs (the
// ledger's records).
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return openFile(name, flag, perm)
}

// ReadFile: see OpenFile.
func ReadFile(name string) ([]byte, error) { return readFile(name) }
