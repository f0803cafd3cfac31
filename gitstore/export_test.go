package gitstore

// ErrorPage is errorPage for the external tests (gitstore_test), which may
// use internal/testrepo.
var ErrorPage = errorPage
