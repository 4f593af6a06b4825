package outbox

import (
	"encoding/json"
	"slices"

	"github.com/ThreeDotsLabs/watermill/message"
)

// appendMetadata appends md as the JSON object json.Marshal makes of it
// (keys sorted, the same escaping), byte for byte: json.Marshal's
// reflection over a map was a fifth of an expiry batch's CPU
// (docs/performance.md).
func appendMetadata(dst []byte, md message.Metadata) []byte {
	if md == nil {
		return append(dst, "null"...)
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, md[k])
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string. Printable ASCII that
// json.Marshal leaves as it is (all but `"`, `\`, `<`, `>`, `&`) is copied;
// anything else goes through json.Marshal, so the escaping is its own.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
