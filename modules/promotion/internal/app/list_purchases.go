package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
)

// Page sizes of ListPurchases.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// ListPurchases asks for one page of the tenant's purchases. The fields are
// the raw query parameters, so that every bad one is reported together.
type ListPurchases struct {
	TenantID uuid.UUID
	Status   string // "" for every status
	Limit    string // "" for DefaultPageSize
	Cursor   string // "" for the first page
}

// PurchasePage is one page of purchases, newest first. NextCursor is "" on
// the last page.
type PurchasePage struct {
	Items      []*domain.Purchase
	NextCursor string
}

// PurchaseListQuery is what ListPurchasesHandler asks the repository for.
type PurchaseListQuery struct {
	TenantID uuid.UUID
	Status   domain.Status // "" for every status
	After    *Cursor       // nil for the first page
	Limit    int
}

// Cursor is the position after which the next page starts: the sort key
// (created_at desc, id desc) of the last purchase of the previous page. A
// keyset cursor rather than an offset, so that purchases made while a client
// pages neither repeat nor go missing.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// ListPurchasesHandler lists a tenant's purchases.
type ListPurchasesHandler struct {
	purchases PurchaseRepository
}

// Handle validates the parameters (status one of the four, limit 1..100,
// cursor one this API issued) and returns the page.
func (h ListPurchasesHandler) Handle(ctx context.Context, q ListPurchases) (PurchasePage, error) {
	query, err := q.parse()
	if err != nil {
		return PurchasePage{}, err
	}
	// One more than asked tells whether a next page exists without a count.
	query.Limit++
	items, err := h.purchases.List(ctx, query)
	if err != nil {
		return PurchasePage{}, fmt.Errorf("list purchases: %w", err)
	}
	page := PurchasePage{Items: items}
	if len(items) == query.Limit {
		page.Items = items[:len(items)-1]
		last := page.Items[len(page.Items)-1]
		page.NextCursor = Cursor{CreatedAt: last.CreatedAt(), ID: last.ID()}.Encode()
	}
	return page, nil
}

func (q ListPurchases) parse() (PurchaseListQuery, error) {
	out := PurchaseListQuery{TenantID: q.TenantID, Limit: DefaultPageSize}
	var fields []apperror.FieldError
	if q.Status != "" {
		out.Status = domain.Status(q.Status)
		if !out.Status.IsValid() {
			fields = append(fields, apperror.FieldError{
				Field: "status", Message: fmt.Sprintf("must be one of %v", domain.Statuses),
			})
		}
	}
	if q.Limit != "" {
		n, err := strconv.Atoi(q.Limit)
		if err != nil || n < 1 || n > MaxPageSize {
			fields = append(fields, apperror.FieldError{
				Field: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", MaxPageSize),
			})
		}
		out.Limit = n
	}
	if q.Cursor != "" {
		c, err := DecodeCursor(q.Cursor)
		if err != nil {
			fields = append(fields, apperror.FieldError{Field: "cursor", Message: "is not a cursor issued by this API"})
		}
		out.After = &c
	}
	if len(fields) > 0 {
		return PurchaseListQuery{}, apperror.Invalid("Invalid query parameters.", fields...)
	}
	return out, nil
}

// Encode renders the cursor as an opaque URL-safe token. Clients must not
// build cursors; the format may change.
func (c Cursor) Encode() string {
	raw := c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID.String()
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor reads a token made by Encode.
func DecodeCursor(s string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, fmt.Errorf("cursor: %w", err)
	}
	at, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return Cursor{}, fmt.Errorf("cursor: no separator")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return Cursor{}, fmt.Errorf("cursor: %w", err)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return Cursor{}, fmt.Errorf("cursor: %w", err)
	}
	return Cursor{CreatedAt: t.UTC(), ID: u}, nil
}
