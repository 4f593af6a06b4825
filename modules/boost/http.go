package boost

import (
	"database/sql"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/platform/apperror"
)

// boostResponse is the body of GET PathBoost.
type boostResponse struct {
	TargetKind      string    `json:"targetKind"`
	TargetID        uuid.UUID `json:"targetId"`
	BoostWeight     int64     `json:"boostWeight"`
	ActivePurchases int       `json:"activePurchases"`
}

// getBoost answers a target's boost as the projection has it; a target with
// no Active purchase answers 0 and 0.
func (m *Module) getBoost(c *echo.Context) error {
	kind := contract.TargetKind(c.Param("targetKind"))
	if !kind.Known() {
		return apperror.Invalid("unknown target kind", apperror.FieldError{
			Field: "targetKind", Message: fmt.Sprintf("must be one of %s, %s, %s", contract.TargetProject, contract.TargetPropertyObject, contract.TargetPost)})
	}
	raw := c.Param("targetId")
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		return apperror.Invalid("malformed target id", apperror.FieldError{Field: "targetId", Message: "must be a UUID"})
	}
	resp := boostResponse{TargetKind: string(kind), TargetID: id}
	err = m.db.WithContext(c.Request().Context()).Raw(
		`SELECT boost_weight, active_purchases FROM boost.target_boosts WHERE target_kind = ? AND target_id = ?`,
		string(kind), id).Row().Scan(&resp.BoostWeight, &resp.ActivePurchases)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("boost: read %s %s: %w", kind, id, err)
	}
	return c.JSON(http.StatusOK, resp)
}
