package app

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeCursor: DecodeCursor never panics, and a cursor it accepts
// stands for one position: encoding it again and decoding gives the same.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(Cursor{CreatedAt: time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC), ID: uuid.MustParse("5f0c3a52-8d0e-4a52-9a77-2b7a8f0e6c11")}.Encode())
	f.Add(Cursor{}.Encode())
	f.Add("")
	f.Add("not-a-cursor")
	f.Add("MjAyNi0xMS0zMFQxMDowMDowMFp8bm9wZQ") // a time and "nope"

	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCursor(s)
		if err != nil {
			return
		}
		require.Equal(t, time.UTC, c.CreatedAt.Location(), "an accepted cursor is in UTC")
		back, err := DecodeCursor(c.Encode())
		require.NoError(t, err, "a cursor it made it reads")
		require.True(t, c.CreatedAt.Equal(back.CreatedAt), "%v != %v", c.CreatedAt, back.CreatedAt)
		require.Equal(t, c.ID, back.ID)
	})
}
