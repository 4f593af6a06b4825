package adapters_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/app"
)

// BenchmarkAdd is one purchase through PurchaseRepository.Add, one client:
// the route's own cost (statements and round trips), without HTTP. The
// package is cached after the first purchase, as in the API's steady state.
func BenchmarkAdd(b *testing.B) {
	for _, withKey := range []bool{false, true} {
		name := "without-key"
		if withKey {
			name = "with-key"
		}
		b.Run(name, func(b *testing.B) {
			r := newRepoBundle(b)
			ctx := context.Background()
			require.NoError(b, r.add(ctx, r.newPurchase(b), nil))
			b.ResetTimer()
			for range b.N {
				p := r.newPurchase(b)
				var claim *app.IdempotencyRecord
				if withKey {
					claim = &app.IdempotencyRecord{TenantID: p.TenantID(), Key: p.ID().String(), RequestHash: strings.Repeat("a", 64),
						PurchaseID: p.ID(), CreatedAt: time.Now()}
				}
				require.NoError(b, r.add(ctx, p, claim))
			}
		})
	}
}
