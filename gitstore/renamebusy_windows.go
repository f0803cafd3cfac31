package gitstore

import (
	"errors"

	"golang.org/x/sys/windows"
)

// renameBusy reports whether a rename failed because another process has
// the file it replaces open (access denied, or a sharing violation): worth
// trying again once the reader is done.
func renameBusy(err error) bool {
	return errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_SHARING_VIOLATION)
}
