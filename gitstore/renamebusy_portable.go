//go:build portable && !windows

package gitstore

// renameBusy is false: unix replaces a file whatever has it open
// (renamebusy_windows.go has the Windows case).
func renameBusy(error) bool { return false }
