package lease

import "github.com/tally-dev/tally/errs"

// Path leases are implemented with the path-lease feature; until then their
// kinds are unknown.
func (r *rule) lock() (string, any, error) {
	return "", nil, errs.New("USAGE", "unknown entry kind %q", r.e.Kind)
}

func (r *rule) unlock() (string, error) {
	return "", errs.New("USAGE", "unknown entry kind %q", r.e.Kind)
}
func (r *rule) wait() (string, error) {
	return "", errs.New("USAGE", "unknown entry kind %q", r.e.Kind)
}
func (r *rule) breakDeadlocks() (string, any, error) {
	return "", nil, errs.New("USAGE", "unknown entry kind %q", r.e.Kind)
}
