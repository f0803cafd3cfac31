package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
)

// ttlValue is a --ttl flag: a duration as --wait takes it (10m, 1h30m, 90s)
// or, as before durations were accepted, a bare integer of seconds. It
// stores whole seconds, the unit of the ledger's ttl.
type ttlValue struct{ secs *int }

func (v ttlValue) String() string {
	if v.secs == nil || *v.secs == 0 {
		return "0"
	}
	return (time.Duration(*v.secs) * time.Second).String()
}

func (v ttlValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		*v.secs = n
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration (10m, 1h30m, 90s) or whole seconds, got %q", s)
	}
	if d%time.Second != 0 {
		return fmt.Errorf("want whole seconds, got %q", s)
	}
	*v.secs = int(d / time.Second)
	return nil
}

func (v ttlValue) Type() string { return "DURATION" }

// ttlVar defines --ttl on cmd, stored in *secs, starting at def seconds.
func ttlVar(cmd *cobra.Command, secs *int, def int, usage string) {
	*secs = def
	cmd.Flags().Var(ttlValue{secs}, "ttl", usage)
}

// ttlFlag refuses a --ttl given outside the ledger's range (so 0, which
// would otherwise read as "not given", is USAGE too).
func ttlFlag(cmd *cobra.Command, ttl int) error {
	if cmd.Flags().Changed("ttl") && (ttl < lease.TTLMin || ttl > lease.TTLMax) {
		return usageErr("--ttl must be %v..%v (%d..%d seconds), got %d seconds", time.Duration(lease.TTLMin)*time.Second,
			time.Duration(lease.TTLMax)*time.Second, lease.TTLMin, lease.TTLMax, ttl)
	}
	return nil
}
