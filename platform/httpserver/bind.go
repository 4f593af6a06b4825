package httpserver

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/platform/apperror"
)

// Bind decodes the request's JSON body into dst (a pointer) strictly:
//
//   - an empty body, a bare null, malformed JSON (invalid UTF-8 included), a
//     value of the wrong type, an unknown field, a key given twice or in
//     another case than the field's, a UUID not in its 36-character form, or
//     anything after the JSON value: apperror KindMalformed (400), naming the
//     field (a JSON path such as targets[0].targetId) in Fields;
//   - a body over the limit (with or without Content-Length): KindTooLarge
//     (413).
//
// Every leniency there is one where two parsers of the same body could
// disagree (a proxy that keeps the first duplicate key, a client that
// matches case), or where a misspelt optional field would be dropped
// silently (docs/adr/0005-hostile-input.md). Validation rules (422) are the
// use case's business, not Bind's. The Content-Type header is not checked.
func Bind(c *echo.Context, dst any) error {
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
	return DecodeJSON(data, dst)
}

// DecodeJSON is Bind without the request: it decodes a JSON document into
// dst (a non-nil pointer) with the same strict rules and errors.
func DecodeJSON(data []byte, dst any) error {
	if v := reflect.ValueOf(dst); v.Kind() != reflect.Pointer || v.IsNil() {
		// Our bug, not the client's.
		return fmt.Errorf("httpserver: bind: destination %T is not a non-nil pointer", dst)
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		return apperror.Malformed("The request body is empty; a JSON document is required.")
	case string(trimmed) == "null":
		return apperror.Malformed("The request body is null; a JSON document is required.")
	}
	// json v2's defaults already refuse duplicate keys, invalid UTF-8, data
	// after the value and keys that differ from a field's name in case.
	err := json.Unmarshal(data, dst,
		json.RejectUnknownMembers(true),
		json.WithUnmarshalers(json.UnmarshalFunc(unmarshalUUID)))
	if err != nil {
		return decodeError(err)
	}
	return nil
}

// errUUIDForm is the one message for a UUID field whatever its mistake.
var errUUIDForm = errors.New("must be a UUID string of 36 characters (8-4-4-4-12 hexadecimal digits)")

// unmarshalUUID reads a UUID only in the form the API writes, as paths and
// tokens do: uuid.Parse would also take urn:uuid:, braces and hyphen-less
// spellings, which other parsers of the same body may refuse. null leaves the
// field as it is, so a missing and a null id read the same.
func unmarshalUUID(data []byte, dst *uuid.UUID) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return errUUIDForm
	}
	id, err := ParseUUID(s)
	if err != nil {
		return errUUIDForm
	}
	*dst = id
	return nil
}

// ParseUUID accepts exactly the 36-character hyphenated form of a UUID, in
// either case (RFC 9562 §4): the one form the API writes (in lower case),
// and the only one it reads in bodies, paths and tokens.
func ParseUUID(s string) (uuid.UUID, error) {
	if len(s) != 36 {
		return uuid.Nil, fmt.Errorf("%.40q is not a 36-character UUID", s)
	}
	return uuid.Parse(s)
}

// decodeError turns a json error into a client-facing one naming the field.
func decodeError(err error) error {
	var (
		syntaxErr   *jsontext.SyntacticError
		semanticErr *json.SemanticError
	)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return wrapMalformed("The request body ends in the middle of a JSON document.", err)
	case errors.As(err, &syntaxErr) && errors.Is(syntaxErr.Err, jsontext.ErrDuplicateName):
		return wrapMalformed("The request body gives a field twice.", err,
			apperror.FieldError{Field: fieldPath(syntaxErr.JSONPointer), Message: "appears more than once"})
	case errors.As(err, &syntaxErr):
		return wrapMalformed(fmt.Sprintf("The request body is not valid JSON: %s (at byte %d).",
			syntaxErr.Err, syntaxErr.ByteOffset), err)
	case errors.As(err, &semanticErr) && errors.Is(semanticErr.Err, json.ErrUnknownName):
		return wrapMalformed("The request body has an unknown field.", err,
			apperror.FieldError{Field: fieldPath(semanticErr.JSONPointer), Message: "unknown field"})
	case errors.As(err, &semanticErr) && errors.Is(semanticErr.Err, errUUIDForm):
		return wrapMalformed("A field is not a UUID.", err,
			apperror.FieldError{Field: fieldPath(semanticErr.JSONPointer), Message: errUUIDForm.Error()})
	case errors.As(err, &semanticErr) && semanticErr.JSONKind == '0' && isInteger(semanticErr.GoType):
		// A fraction, an exponent or an out-of-range number for an integer.
		return wrapMalformed("A field has the wrong type.", err,
			apperror.FieldError{Field: fieldPath(semanticErr.JSONPointer), Message: "must be " + jsonTypeName(semanticErr.GoType) + " in range"})
	case errors.As(err, &semanticErr) && semanticErr.JSONKind != 0 && semanticErr.Err == nil:
		return wrapMalformed("A field has the wrong type.", err,
			apperror.FieldError{Field: fieldPath(semanticErr.JSONPointer), Message: "must be " + jsonTypeName(semanticErr.GoType)})
	case errors.As(err, &semanticErr):
		// A type's own UnmarshalJSON/UnmarshalText refused the value, or a
		// number does not fit its field: the message is about the value.
		msg := "has an invalid value"
		if semanticErr.Err != nil {
			msg = "has an invalid value: " + semanticErr.Err.Error()
		}
		return wrapMalformed("A field has an invalid value.", err,
			apperror.FieldError{Field: fieldPath(semanticErr.JSONPointer), Message: msg})
	}
	return wrapMalformed("The request body could not be decoded.", err)
}

func isInteger(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64
}

// fieldPath renders a JSON pointer (/targets/0/targetId) as the JSON path
// the API's errors use (targets[0].targetId); the whole body is "(body)".
func fieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if b.Len() == 0 {
		return "(body)"
	}
	return b.String()
}

func wrapMalformed(detail string, err error, fields ...apperror.FieldError) *apperror.Error {
	e := apperror.Malformed(detail, fields...)
	e.Err = err
	return e
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
