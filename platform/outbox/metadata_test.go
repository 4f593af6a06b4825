package outbox

import (
	"encoding/json"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
)

func TestAppendMetadataIsJSONMarshal(t *testing.T) {
	t.Parallel()
	for _, md := range []message.Metadata{
		nil,
		{},
		{"partition_key": "0192f0a0-0000-7000-8000-000000000001", "event_type": "pin.promotion.purchase-changed",
			"contract_version": "1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"quote": `say "hi"\now`, "html": "<a href='x'>&</a>", "control": "a\x00b\x1ec\td\n", "unicode": "Российский рубль ₽",
			"separators": "\u2028\u2029", "invalid": "\xff\xfe", "": "empty key"},
	} {
		want, err := json.Marshal(md)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendMetadata(nil, md)))
	}
}

func FuzzAppendMetadata(f *testing.F) {
	f.Add("partition_key", "0192f0a0-0000-7000-8000-000000000001", "event_type", "x<y>&\"z\\")
	f.Add("k", "\x1e\u2028\xff", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		md := message.Metadata{k1: v1, k2: v2}
		want, err := json.Marshal(md)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendMetadata(nil, md)))
	})
}
