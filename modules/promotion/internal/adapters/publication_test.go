package adapters_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
)

// TestPublicationsAreChecked: a repository publishes to contract version 1
// by default and refuses a publication list it could not write correctly.
func TestPublicationsAreChecked(t *testing.T) {
	t.Parallel()
	db, pub := &gorm.DB{}, promotiontest.Publisher(t, nil)
	v1 := adapters.PurchaseChangedV1()
	require.Equal(t, contract.Topic, v1.Topic)
	require.Equal(t, []string{contract.Topic, "x.v2"}, adapters.Publications{v1, {Topic: "x.v2", Message: v1.Message}}.Topics())

	_, err := adapters.NewPurchaseRepository(db, pub)
	require.NoError(t, err, "no publication given: version 1")
	for name, ps := range map[string][]adapters.Publication{
		"topic twice": {v1, v1},
		"no topic":    {v1, {Message: v1.Message}},
		"no builder":  {v1, {Topic: "x.v2"}},
	} {
		_, err := adapters.NewPurchaseRepository(db, pub, ps...)
		require.Error(t, err, name)
		_, err = adapters.NewExpireRepository(db, pub, ps...)
		require.Error(t, err, name)
	}
}
