package lease

// Cost limits. An entry's check reads a bounded amount of state and tests a
// bounded number of pattern pairs, so that the writer, verify and the server
// hook spend bounded time on any entry, however it was made. The limits are
// far above what real plans and locks use (a cell with 64 paths, a wave with
// a few thousand); every refusal is LIMIT-EXCEEDED (exit 2) with the details
// limit (a name below), value and max.
//
// Intrinsic limits depend on the entry alone; the hold limit and the check
// budget depend on the live holds as well, and clear as holds are released or
// expire. Both are refused, not retryable: holds live up to TTLMax, far longer
// than a retry loop waits, and a ledger at these limits needs a person.

import (
	"fmt"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/pathspec"
)

const (
	// MaxCellPaths is the most paths a plan may declare for one cell
	// (limit "cell-paths").
	MaxCellPaths = 256
	// MaxWavePaths is the most paths a plan may declare over all cells of
	// one wave (limit "wave-paths").
	MaxWavePaths = 8192
	// MaxLiveHolds is the most live path holds (path locks plus the declared
	// paths of claimed cells) a claim or lock may leave (limit "live-holds"),
	// and so the most holds one conflict check considers.
	MaxLiveHolds = 4096
	// MaxCheckCost is the budget of one entry's conflict check (limit
	// "check-cost"): the sum of pathspec.Cost over every pair of a requested
	// pattern and another actor's live hold that the key index cannot rule
	// out (see candidates). It is charged before any pair is tested.
	MaxCheckCost = 2_000_000
)

// Limit names, as the "limit" detail of a LIMIT-EXCEEDED refusal gives them.
const (
	limitPatternBytes = "pattern-bytes"
	limitLockPatterns = "lock-patterns"
	limitCellPaths    = "cell-paths"
	limitWavePaths    = "wave-paths"
	limitLiveHolds    = "live-holds"
	limitCheckCost    = "check-cost"
)

func limitErr(limit string, value, max int64, format string, args ...any) *errs.Error {
	return errs.New(errs.LimitExceeded, "%s (limit %s: %d, max %d)", fmt.Sprintf(format, args...), limit, value, max).
		With("limit", limit).With("value", value).With("max", max)
}

// NormalizePattern normalizes a user-written pathspec as the rules will
// accept it: LIMIT-EXCEEDED for one longer than pathspec.MaxLen bytes, USAGE
// for one that is not a pattern.
func NormalizePattern(spec string) (string, error) {
	if err := checkPatternLen(spec); err != nil {
		return "", err
	}
	n, err := pathspec.Normalize(spec)
	if err != nil {
		return "", errs.New(errs.Usage, "%v", err)
	}
	return n, nil
}

func checkPatternLen(p string) error {
	if len(p) > pathspec.MaxLen {
		return limitErr(limitPatternBytes, int64(len(p)), pathspec.MaxLen, "pattern %.40q… is too long", p)
	}
	return nil
}

// CheckLockCount bounds the patterns of one lock or unlock entry: 1 to
// MaxLockPatterns.
func CheckLockCount(n int) error {
	if n > MaxLockPatterns {
		return limitErr(limitLockPatterns, int64(n), MaxLockPatterns, "a lock entry names %d patterns", n)
	}
	if n == 0 {
		return errs.New(errs.Usage, "give 1..%d patterns", MaxLockPatterns)
	}
	return nil
}

// checkPlanLimits bounds the declared paths of a plan: per cell, per wave,
// and each path's length. It only counts, so it runs before anything else
// looks at the paths.
func checkPlanLimits(b *PlanBody) error {
	total := 0
	for _, c := range b.Cells {
		if len(c.Paths) > MaxCellPaths {
			return limitErr(limitCellPaths, int64(len(c.Paths)), MaxCellPaths, "cell %.64s declares %d paths", c.ID, len(c.Paths))
		}
		total += len(c.Paths)
		for _, p := range c.Paths {
			if err := checkPatternLen(p); err != nil {
				return err
			}
		}
	}
	if total > MaxWavePaths {
		return limitErr(limitWavePaths, int64(total), MaxWavePaths, "wave %.64s declares %d paths", b.Wave, total)
	}
	return nil
}
