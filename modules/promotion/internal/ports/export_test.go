package ports

import "github.com/pinmarket/pin/modules/promotion/internal/domain"

// PurchaseResponseJSON is the HTTP body of p, for the shape test in
// package ports_test (which may import promotiontest; package ports may not).
func PurchaseResponseJSON(p *domain.Purchase) any { return toHTTPPurchase(p) }
