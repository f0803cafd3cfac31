package lease

import "github.com/tally-dev/tally/errs"

// anchor is implemented with the anchors feature.
func (r *rule) anchor() (string, error) {
	return "", errs.New("USAGE", "unknown entry kind %q", r.e.Kind)
}
