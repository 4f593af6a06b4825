package domain

import (
	"errors"
	"fmt"
	"unicode"

	"github.com/pinmarket/pin/platform/apperror"
)

// Sentinel errors of the domain. They travel inside *apperror.Error values
// (as Err), so callers can test them with errors.Is while the HTTP layer maps
// the surrounding apperror kind to a status without knowing the domain.
var (
	// ErrPurchaseTerminal means the purchase is Expired or Cancelled and so
	// admits no further transition (INV-6).
	ErrPurchaseTerminal = errors.New("purchase is in a terminal status")
	// ErrPurchaseNotDue means an expiry was asked for before EndsAt.
	ErrPurchaseNotDue = errors.New("purchase is not due to expire")
	// ErrTransitionNotAllowed means the current status has no such transition.
	ErrTransitionNotAllowed = errors.New("transition not allowed from the current status")
)

// fieldErrors collects every failed rule of one validation, so that a client
// learns about all of its mistakes in one 422 instead of one per attempt.
type fieldErrors []apperror.FieldError

func (f *fieldErrors) add(field, format string, args ...any) {
	*f = append(*f, apperror.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// err returns nil when nothing failed, else one validation error naming every
// failed field.
func (f fieldErrors) err(detail string) error {
	if len(f) == 0 {
		return nil
	}
	return apperror.Invalid(detail, f...)
}

// controlCharMessage is the rule hasControlChar enforces, as a client reads it.
const controlCharMessage = "must not contain control characters (NUL and the like; tab and line breaks are allowed)"

// hasControlChar reports a control character other than tab, line feed and
// carriage return in free text: PostgreSQL refuses NUL in a text column, and
// the others have no place in a name or a reason.
func hasControlChar(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return true
		}
	}
	return false
}

func transitionConflict(slug string, sentinel error, format string, args ...any) error {
	return &apperror.Error{
		Kind:   apperror.KindConflict,
		Slug:   slug,
		Detail: fmt.Sprintf(format, args...),
		Err:    sentinel,
	}
}

// Sentinels of lookups that found nothing.
var (
	// ErrPurchaseNotFound means no purchase has the id, or the caller may not
	// see it (the two are indistinguishable on purpose).
	ErrPurchaseNotFound = errors.New("purchase not found")
	// ErrPackageNotFound means no package has the id.
	ErrPackageNotFound = errors.New("package not found")
)

// PurchaseNotFound is the error for a purchase that does not exist or is
// not visible to the caller: another tenant's purchase must not reveal that
// it exists.
func PurchaseNotFound(id string) error {
	return &apperror.Error{
		Kind: apperror.KindNotFound, Slug: "purchase-not-found",
		Detail: fmt.Sprintf("promotion purchase %s not found", id), Err: ErrPurchaseNotFound,
	}
}

// PackageNotFound is the error for a package that does not exist.
func PackageNotFound(id string) error {
	return &apperror.Error{
		Kind: apperror.KindNotFound, Slug: "package-not-found",
		Detail: fmt.Sprintf("promotion package %s not found", id), Err: ErrPackageNotFound,
	}
}
