package publish

import (
	"strconv"

	"github.com/heraldevents/herald/internal/jsonappend"
)

// appendResults appends the batch answer {"results":[Result…]} to dst:
// the bytes json.Marshal writes for it, without json.Marshal's reflection
// and its second scan and compaction of every echoed message (a tenth of a
// batch publish's CPU). Strings and messages that need escaping or
// compacting take json.Marshal's own path, so the output stays byte for
// byte what it was (TestAppendResultsMatchesMarshal).
func appendResults(dst []byte, results []Result) []byte {
	dst = append(dst, `{"results":[`...)
	for i := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendResult(dst, &results[i])
	}
	return append(dst, "]}"...)
}

// appendSingle appends the single answer {"result":Result} to dst.
func appendSingle(dst []byte, r *Result) []byte {
	dst = append(dst, `{"result":`...)
	dst = appendResult(dst, r)
	return append(dst, '}')
}

func appendResult(dst []byte, r *Result) []byte {
	dst = append(dst, `{"event":`...)
	if r.Event == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendEvent(dst, r.Event)
	}
	dst = append(dst, `,"success":`...)
	dst = strconv.AppendBool(dst, r.Success)
	if r.FailureReason != "" {
		dst = append(dst, `,"failure_reason":`...)
		dst = jsonappend.String(dst, r.FailureReason)
	}
	if r.Replayed {
		dst = append(dst, `,"replayed":true`...)
	}
	return append(dst, '}')
}

func appendEvent(dst []byte, e *WireEvent) []byte {
	dst = append(dst, `{"event_type":`...)
	dst = jsonappend.String(dst, e.EventType)
	if len(e.Message) > 0 {
		dst = append(dst, `,"message":`...)
		if sc := e.scan; sc.Len == len(e.Message) && sc.Compact && sc.HTMLSafe {
			// What json.Marshal would write, known from the check.
			dst = append(dst, e.Message...)
		} else {
			dst = jsonappend.Raw(dst, e.Message)
		}
	}
	if e.OccurredAt != "" {
		dst = append(dst, `,"occurred_at":`...)
		dst = jsonappend.String(dst, e.OccurredAt)
	}
	if e.Resource != nil {
		dst = append(dst, `,"resource":{"resource_id":`...)
		dst = jsonappend.String(dst, e.Resource.ResourceID)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
