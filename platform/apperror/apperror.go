// Package apperror is the one error vocabulary of the service. Use cases
// return these errors; the HTTP error handler maps their Kind to a status and
// writes application/problem+json in one place.
package apperror

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error by how the caller should react to it.
type Kind int

// The kinds an application error can have.
const (
	KindInternal        Kind = iota // a fault of ours or of the infrastructure (500)
	KindInvalid                     // the request breaks a validation rule (422)
	KindMalformed                   // the request cannot be parsed (400)
	KindNotFound                    // the resource does not exist or is not visible (404)
	KindConflict                    // the resource's state forbids the change (409)
	KindUnauthenticated             // no valid credentials (401)
	KindForbidden                   // valid credentials without the right (403)
	KindTooLarge                    // the body is over the limit (413)
	KindUnavailable                 // a dependency cannot serve the request now; retry later (503)
)

// FieldError names one field that failed validation.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an application error with a kind, a stable slug (used as the
// problem type) and a human-readable detail.
type Error struct {
	Kind   Kind
	Slug   string
	Detail string
	Fields []FieldError
	Err    error
	// RetryAfter tells a client of a KindUnavailable error when to try
	// again (the Retry-After header); zero means the server's default.
	RetryAfter time.Duration
}

// Error renders slug, detail and cause for logs; clients see the problem
// document instead.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Slug, e.Detail, e.Err)
	}
	return e.Slug + ": " + e.Detail
}

// Unwrap returns the cause, so errors.Is and errors.As see through the
// application error.
func (e *Error) Unwrap() error { return e.Err }

// New builds an error of the given kind.
func New(kind Kind, slug, detail string) *Error {
	return &Error{Kind: kind, Slug: slug, Detail: detail}
}

// Invalid builds a validation error naming each failed field.
func Invalid(detail string, fields ...FieldError) *Error {
	return &Error{Kind: KindInvalid, Slug: SlugValidationFailed, Detail: detail, Fields: fields}
}

// NotFound builds a not-found error.
func NotFound(slug, detail string) *Error { return New(KindNotFound, slug, detail) }

// Conflict builds a conflict error.
func Conflict(slug, detail string) *Error { return New(KindConflict, slug, detail) }

// As returns the application error in err's chain, if there is one.
func As(err error) (*Error, bool) {
	var appErr *Error
	ok := errors.As(err, &appErr)
	return appErr, ok
}

// KindOf returns the kind of err; errors from outside the vocabulary are
// internal.
func KindOf(err error) Kind {
	if appErr, ok := As(err); ok {
		return appErr.Kind
	}
	return KindInternal
}

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case KindInternal:
		return "internal"
	case KindInvalid:
		return "invalid"
	case KindMalformed:
		return "malformed"
	case KindNotFound:
		return "not-found"
	case KindConflict:
		return "conflict"
	case KindUnauthenticated:
		return "unauthenticated"
	case KindForbidden:
		return "forbidden"
	case KindTooLarge:
		return "too-large"
	case KindUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Slugs of the errors built by the helpers below; they end up in the problem
// type URL, so they never change once published.
const (
	SlugValidationFailed = "validation-failed"
	SlugMalformedRequest = "malformed-request"
	SlugPayloadTooLarge  = "payload-too-large"
	SlugUnavailable      = "service-unavailable"
	// SlugDatabaseReadOnly is a write the database refused because it is
	// read-only: a failover is under way (503, ADR 0021).
	SlugDatabaseReadOnly = "database-read-only"
)

// Malformed builds an error for a request that cannot be parsed (bad JSON, a
// value of the wrong type, an unknown field). Fields may name the offending
// fields.
func Malformed(detail string, fields ...FieldError) *Error {
	return &Error{Kind: KindMalformed, Slug: SlugMalformedRequest, Detail: detail, Fields: fields}
}

// Unauthenticated builds an error for a request without valid credentials.
func Unauthenticated(slug, detail string) *Error { return New(KindUnauthenticated, slug, detail) }

// Forbidden builds an error for valid credentials that lack the right.
func Forbidden(slug, detail string) *Error { return New(KindForbidden, slug, detail) }

// Unavailable builds an error for a request that failed because a
// dependency (the database) is down, overloaded or timed out; cause stays in
// the log.
func Unavailable(detail string, cause error) *Error {
	return &Error{Kind: KindUnavailable, Slug: SlugUnavailable, Detail: detail, Err: cause}
}

// DatabaseReadOnly builds the error of a write the database refused as
// read-only; cause stays in the log.
func DatabaseReadOnly(cause error) *Error {
	return &Error{Kind: KindUnavailable, Slug: SlugDatabaseReadOnly,
		Detail: "The database takes no writes now (a failover is under way); nothing was changed. Try again later.", Err: cause}
}

// TooLarge builds an error for a request body over the limit.
func TooLarge(detail string) *Error { return New(KindTooLarge, SlugPayloadTooLarge, detail) }
