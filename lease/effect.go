package lease

import (
	"encoding/json"

	"github.com/tally-dev/tally/chain"
)

// DecodeEffect reads the JSON of an entry's effect (Result.Effect, as
// encoding/json writes it) back into the type Apply gives for kind: nil for
// a kind without one. A writer whose entries another writer appended for it
// (ledger.AppendHanded) reads their effects so.
func DecodeEffect(kind chain.Kind, raw []byte) (any, error) {
	var v any
	switch kind {
	case chain.KindClaim, chain.KindRenew:
		v = &Granted{}
	case chain.KindDone:
		v = &ReceiptRef{}
	case chain.KindLock:
		v = &LockGrant{}
	case chain.KindBreak:
		v = &BreakResult{}
	default:
		return nil, nil
	}
	return v, json.Unmarshal(raw, v)
}
