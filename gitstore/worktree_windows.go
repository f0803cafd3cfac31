package gitstore

// WorkTreeClean answers false on Windows, leaving the question to git:
// Git for Windows fills the index's stat data from its own emulation of
// lstat (creation time as ctime, no device, inode or owner), which the
// check in worktree_unix.go cannot compare with what Windows reports.
func (r *Repo) WorkTreeClean() bool { return false }
