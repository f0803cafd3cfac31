package tally

import (
	"encoding/json"

	"github.com/tally-dev/tally/errs"
)

// The result objects of the command line's --json and of the MCP tools, one
// form for both (FORMAT.md §12): a success is the result's own fields with
// "ok": true beside them; a failure is {"ok": false, "error": {...}}.

// ResultObject is the success object for result, a value that marshals to a
// JSON object (or nil, for {"ok": true} alone). A field of result named "ok"
// is overwritten.
func ResultObject(result any) (map[string]any, error) {
	obj := map[string]any{}
	if result != nil {
		b, err := json.Marshal(result)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, err
		}
	}
	obj["ok"] = true
	return obj, nil
}

// ErrorObject is the failure object for err: its code, message and
// retryable (true exactly for exit class 1) beside its details, which never
// override those three.
func ErrorObject(err error) map[string]any {
	e := errs.From(err)
	body := map[string]any{}
	for k, v := range e.Details {
		body[k] = v
	}
	body["code"], body["message"], body["retryable"] = e.Code, e.Message, e.Retryable()
	return map[string]any{"ok": false, "error": body}
}
