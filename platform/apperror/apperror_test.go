package apperror_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
)

func TestKindOfSeesThroughWrapping(t *testing.T) {
	t.Parallel()

	wrapped := fmt.Errorf("purchase.cancel: %w", apperror.Conflict("purchase-not-cancellable", "already expired"))
	require.Equal(t, apperror.KindConflict, apperror.KindOf(wrapped))

	appErr, ok := apperror.As(wrapped)
	require.True(t, ok)
	require.Equal(t, "purchase-not-cancellable", appErr.Slug)

	require.Equal(t, apperror.KindInternal, apperror.KindOf(io.ErrUnexpectedEOF))
	_, ok = apperror.As(io.ErrUnexpectedEOF)
	require.False(t, ok)
}

func TestHelpersSetKindAndSlug(t *testing.T) {
	t.Parallel()

	field := apperror.FieldError{Field: "targets", Message: "must not be empty"}
	tests := []struct {
		name string
		err  *apperror.Error
		kind apperror.Kind
		slug string
	}{
		{"invalid", apperror.Invalid("bad", field), apperror.KindInvalid, apperror.SlugValidationFailed},
		{"malformed", apperror.Malformed("bad json"), apperror.KindMalformed, apperror.SlugMalformedRequest},
		{"not found", apperror.NotFound("purchase-not-found", "x"), apperror.KindNotFound, "purchase-not-found"},
		{"conflict", apperror.Conflict("duplicate-code", "x"), apperror.KindConflict, "duplicate-code"},
		{"unauthenticated", apperror.Unauthenticated("invalid-token", "x"), apperror.KindUnauthenticated, "invalid-token"},
		{"forbidden", apperror.Forbidden("admin-required", "x"), apperror.KindForbidden, "admin-required"},
		{"too large", apperror.TooLarge("x"), apperror.KindTooLarge, apperror.SlugPayloadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.kind, tt.err.Kind)
			require.Equal(t, tt.slug, tt.err.Slug)
			require.NotEqual(t, "", tt.err.Kind.String())
		})
	}
	require.Equal(t, []apperror.FieldError{field}, apperror.Invalid("bad", field).Fields)
}

func TestErrorUnwrapsCause(t *testing.T) {
	t.Parallel()

	cause := errors.New("connection reset")
	err := &apperror.Error{Kind: apperror.KindInternal, Slug: "internal", Detail: "load purchase", Err: cause}
	require.ErrorIs(t, err, cause)
	require.Equal(t, "internal: load purchase: connection reset", err.Error())
}
