package gitstore

// ErrorPage is errorPage for the external tests (gitstore_test), which may
// use internal/testrepo.
var ErrorPage = errorPage

// PushRequestGit and PushRequestNative are PushRequest's two ways, for
// tests that hold them to each other.
var (
	PushRequestGit    = (*Repo).pushRequestGit
	PushRequestNative = pushRequestNative
	NativePushTarget  = (*Repo).nativePushTarget
)
