package httpserver

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pinmarket/pin/platform/apperror"
)

// Bind decodes the request's JSON body into dst (a pointer) strictly:
//
//   - an empty body, a bare null, malformed JSON, a value of the wrong type,
//     an unknown field or anything after the JSON value: apperror
//     KindMalformed (400), naming the field in Fields where it can;
//   - a body over the limit (with or without Content-Length): KindTooLarge
//     (413).
//
// Unknown fields are rejected because a misspelt optional field (a PATCH of
// "boostWieght") would otherwise succeed silently without its change.
// Field names match case-insensitively, as encoding/json does. The
// Content-Type header is not checked. Validation rules (422) are the use
// case's business, not Bind's.
func Bind(c echo.Context, dst any) error {
	limit, ok := c.Get(bodyLimitKey).(int64)
	if !ok {
		// Not served through New's middleware (a test); keep the same cap.
		limit, _ = ParseByteSize(DefaultBodyLimit)
	}
	var data []byte
	if body := c.Request().Body; body != nil {
		var err error
		data, err = io.ReadAll(io.LimitReader(body, limit+1))
		if err != nil {
			var maxBytes *http.MaxBytesError
			if errors.As(err, &maxBytes) {
				return &apperror.Error{Kind: apperror.KindTooLarge, Slug: apperror.SlugPayloadTooLarge,
					Detail: bodyTooLargeDetail(maxBytes.Limit), Err: err}
			}
			return &apperror.Error{Kind: apperror.KindMalformed, Slug: apperror.SlugMalformedRequest,
				Detail: "The request body could not be read.", Err: fmt.Errorf("httpserver: read body: %w", err)}
		}
	}
	if int64(len(data)) > limit {
		return apperror.TooLarge(bodyTooLargeDetail(limit))
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		return apperror.Malformed("The request body is empty; a JSON document is required.")
	case string(trimmed) == "null":
		return apperror.Malformed("The request body is null; a JSON document is required.")
	}

	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return apperror.Malformed("The request body has data after the JSON document.")
	}
	return nil
}

// decodeError turns an encoding/json error into a client-facing one.
func decodeError(err error) error {
	var (
		syntaxErr  *json.SyntaxError
		typeErr    *json.UnmarshalTypeError
		invalidErr *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &invalidErr):
		// dst is not a pointer: our bug, not the client's.
		return fmt.Errorf("httpserver: bind: %w", err)
	case errors.As(err, &syntaxErr):
		return wrapMalformed(fmt.Sprintf("The request body is not valid JSON: %s (at byte %d).", strings.TrimPrefix(syntaxErr.Error(), "json: "), syntaxErr.Offset), err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return wrapMalformed("The request body ends in the middle of a JSON document.", err)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		return wrapMalformed("A field has the wrong type.", err,
			apperror.FieldError{Field: field, Message: "must be " + jsonTypeName(typeErr.Type)})
	}
	if name, ok := unknownField(err); ok {
		return wrapMalformed("The request body has an unknown field.", err,
			apperror.FieldError{Field: name, Message: "unknown field"})
	}
	// A type's own UnmarshalJSON/UnmarshalText refused the value (a bad
	// UUID, a bad decimal); its message is about the value, not about us.
	return wrapMalformed("The request body has an invalid value: "+err.Error(), err)
}

func wrapMalformed(detail string, err error, fields ...apperror.FieldError) *apperror.Error {
	e := apperror.Malformed(detail, fields...)
	e.Err = err
	return e
}

// unknownField recognises DisallowUnknownFields' error, which has no type
// of its own.
func unknownField(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), `json: unknown field "`)
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(rest, `"`), true
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonTypeName names, in JSON terms, what a Go type accepts.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	if t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	return "of another type"
}
