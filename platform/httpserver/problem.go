package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/correlation"
)

// ProblemContentType is the media type of every error response (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypeBase prefixes an error's slug to form the problem type URI.
const ProblemTypeBase = "https://pin.dev/problems/"

// StatusClientClosedRequest is the status recorded (in logs and metrics,
// the client never sees it) when the client went away before the response:
// counting those as 500 would page someone for a closed browser tab.
const StatusClientClosedRequest = 499

// Slugs of the problems the server itself produces.
const (
	SlugInternal            = "internal"
	SlugNotFound            = "not-found"
	SlugMethodNotAllowed    = "method-not-allowed"
	SlugClientClosedRequest = "client-closed-request"
)

const internalDetail = "An internal error occurred. Quote the request id when reporting it."

// ProblemDetails is the application/problem+json body.
type ProblemDetails struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// omitzero, not omitempty: a validation problem keeps an empty list.
	Errors []apperror.FieldError `json:"errors,omitzero"`
	// RequestID lets a client quote the failing request to support.
	RequestID string `json:"requestId,omitempty"`
}

// StatusOf maps an error kind to its HTTP status. It is the one place where
// kinds meet statuses.
func StatusOf(kind apperror.Kind) int {
	switch kind {
	case apperror.KindInvalid:
		return http.StatusUnprocessableEntity
	case apperror.KindMalformed:
		return http.StatusBadRequest
	case apperror.KindNotFound:
		return http.StatusNotFound
	case apperror.KindConflict:
		return http.StatusConflict
	case apperror.KindUnauthenticated:
		return http.StatusUnauthorized
	case apperror.KindForbidden:
		return http.StatusForbidden
	case apperror.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case apperror.KindUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Problem writes err as an application/problem+json response and logs it
// when it is a fault of ours. Errors outside the apperror vocabulary become
// 500 with a generic detail: their text may hold SQL, hostnames or stack
// details, so it goes only to the log. The returned error is a failure to
// write the response.
func Problem(c *echo.Context, err error) error {
	p, cause := problemOf(c, err)
	logProblem(c, p, cause)
	committed := responseCommitted(c)
	if appErr, ok := apperror.As(err); ok && appErr.Kind == apperror.KindUnavailable && !committed {
		retry := max(appErr.RetryAfter, time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	}

	if committed {
		// Headers are gone: all we can do is the log line above.
		return nil
	}
	if p.Status == StatusClientClosedRequest {
		// Nobody is listening; record the status for the request log and metrics.
		c.Response().WriteHeader(p.Status)
		return nil
	}
	if c.Request().Method == http.MethodHead {
		return c.NoContent(p.Status)
	}
	if p.Status == http.StatusUnauthorized && c.Response().Header().Get(echo.HeaderWWWAuthenticate) == "" {
		// RFC 9110 §15.5.2: a 401 must carry a challenge.
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="pin"`)
	}
	body, merr := json.Marshal(p)
	if merr != nil {
		return fmt.Errorf("httpserver: encode problem: %w", merr)
	}
	c.Response().Header().Set(echo.HeaderContentType, ProblemContentType)
	c.Response().WriteHeader(p.Status)
	if _, werr := c.Response().Write(body); werr != nil {
		return fmt.Errorf("httpserver: write problem: %w", werr)
	}
	return nil
}

// RenderProblems is the outermost route middleware of a module that may be
// mounted on any Echo host. On a server built by New it passes the error on,
// so that the handler deadline can turn a dependency's failure into 503 and
// the access log sees it; on another host it renders the error (and a
// panic) as application/problem+json itself, instead of leaving it to that
// host's error handler.
func RenderProblems() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		recovering := recoverPanics()(next)
		return func(c *echo.Context) error {
			if rendered, _ := c.Get(rendersProblemsKey).(bool); rendered {
				return next(c)
			}
			if err := recovering(c); err != nil {
				return Problem(c, err)
			}
			return nil
		}
	}
}

// rendersProblemsKey marks a request served through New, whose observe
// middleware renders every error as a problem.
const rendersProblemsKey = "pin.httpserver.renders_problems"

// errorHandler is the echo.HTTPErrorHandler of every server built by New.
// It names a write refused by a read-only database (readOnly, which may be
// nil) whatever an inner layer made of it, since only the cause tells.
func errorHandler(readOnly func(error) bool, retryAfter time.Duration) echo.HTTPErrorHandler {
	return func(c *echo.Context, err error) {
		if readOnly != nil && readOnly(err) {
			refused := apperror.DatabaseReadOnly(err)
			refused.RetryAfter = retryAfter
			err = refused
		}
		if werr := Problem(c, err); werr != nil {
			loggerOf(c).WarnContext(c.Request().Context(), "http: write error response", "error", werr)
		}
	}
}

// problemOf builds the problem for err; cause is non-nil when the error must
// be logged as a fault of ours.
func problemOf(c *echo.Context, err error) (p ProblemDetails, cause error) {
	req := c.Request()
	p = ProblemDetails{
		Instance:  Truncate(req.URL.Path, MaxEchoedPathBytes),
		RequestID: correlation.RequestID(req.Context()),
	}
	setStatus := func(status int, slug string) {
		p.Status, p.Type, p.Title = status, ProblemTypeBase+slug, http.StatusText(status)
	}

	var (
		appErr   *apperror.Error
		maxBytes *http.MaxBytesError
	)
	// Echo's own errors: *echo.HTTPError and the router's sentinels
	// (echo.ErrNotFound, echo.ErrMethodNotAllowed), which only carry a status.
	httpStatus := echo.StatusCode(err)
	switch {
	case errors.Is(err, context.Canceled) && req.Context().Err() != nil:
		setStatus(StatusClientClosedRequest, SlugClientClosedRequest)
		p.Title, p.Detail = "Client Closed Request", "The client closed the request."

	case errors.As(err, &appErr) && appErr.Kind != apperror.KindInternal:
		setStatus(StatusOf(appErr.Kind), appErr.Slug)
		p.Detail, p.Errors = appErr.Detail, appErr.Fields
		if appErr.Kind == apperror.KindUnavailable {
			cause = err // ours to know about, though not the client's fault either
		}
		if appErr.Kind == apperror.KindInvalid && p.Errors == nil {
			// Validation problems always carry the list, even if empty.
			p.Errors = []apperror.FieldError{}
		}

	case errors.As(err, &maxBytes):
		setStatus(http.StatusRequestEntityTooLarge, apperror.SlugPayloadTooLarge)
		p.Detail = bodyTooLargeDetail(maxBytes.Limit)

	case httpStatus >= http.StatusBadRequest:
		setStatus(httpStatus, httpSlug(httpStatus))
		if httpStatus >= http.StatusInternalServerError {
			// Keep the status (a 503 stays a 503) but never the message.
			p.Detail, cause = internalDetail, err
			break
		}
		p.Detail = httpDetail(httpStatus, err)

	default:
		setStatus(http.StatusInternalServerError, SlugInternal)
		p.Detail = internalDetail
		cause = err
	}
	return p, cause
}

// MaxEchoedPathBytes caps the request path as the problem's instance and in
// the access log: a client must not get a megabyte echoed for a megabyte.
const MaxEchoedPathBytes = 256

// Truncate cuts s to at most n bytes (on a rune boundary), marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func bodyTooLargeDetail(limit int64) string {
	return fmt.Sprintf("The request body is larger than %d bytes.", limit)
}

// httpSlug names the problems raised by echo itself (router, middleware).
func httpSlug(status int) string {
	switch status {
	case http.StatusBadRequest:
		return apperror.SlugMalformedRequest
	case http.StatusNotFound:
		return SlugNotFound
	case http.StatusMethodNotAllowed:
		return SlugMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return apperror.SlugPayloadTooLarge
	case http.StatusInternalServerError:
		return SlugInternal
	}
	text := http.StatusText(status)
	if text == "" {
		return fmt.Sprintf("status-%d", status)
	}
	return strings.ToLower(strings.ReplaceAll(text, " ", "-"))
}

func httpDetail(status int, err error) string {
	switch status {
	case http.StatusNotFound:
		return "No resource matches this path."
	case http.StatusMethodNotAllowed:
		return "This path does not support the method; see the Allow header."
	case http.StatusRequestEntityTooLarge:
		return "The request body is too large."
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Message != http.StatusText(status) {
		return he.Message
	}
	return ""
}

func logProblem(c *echo.Context, p ProblemDetails, cause error) {
	ctx := c.Request().Context()
	logger := loggerOf(c)
	switch {
	case p.Type == ProblemTypeBase+apperror.SlugDatabaseReadOnly:
		// The pool's postgres.ReadOnlyWatch logs the episode once.
	case cause != nil && p.Status == http.StatusServiceUnavailable:
		// During an outage every request fails alike: one line per interval
		// says so, with how many were not logged since the last one.
		if logged, suppressed := unavailableLogOf(c).allow(time.Now()); logged {
			logger.ErrorContext(ctx, "http: dependency unavailable",
				"error", cause.Error(), "status", p.Status, "suppressed", suppressed)
		}
	case cause != nil:
		attrs := []any{"error", cause.Error(), "status", p.Status}
		var pe *panicError
		if errors.As(cause, &pe) {
			attrs = append(attrs, "stack", string(pe.stack))
		}
		logger.ErrorContext(ctx, "http: internal error", attrs...)
		// Record on the span too: the response hides the cause, the trace must not.
		span := trace.SpanFromContext(ctx)
		span.RecordError(cause)
	case responseCommitted(c):
		logger.WarnContext(ctx, "http: error after the response was committed", "status", p.Status, "detail", p.Detail)
	}
}

// responseCommitted reports whether the response's status line is sent.
func responseCommitted(c *echo.Context) bool {
	res, err := echo.UnwrapResponse(c.Response())
	return err == nil && res.Committed
}

const loggerKey = "pin.httpserver.logger"

// UnavailableLogInterval is the least time between two "http: dependency
// unavailable" log lines of one server.
const UnavailableLogInterval = 10 * time.Second

const unavailableLogKey = "pin.httpserver.unavailable_log"

// intervalLog lets one event through per interval and counts the others.
type intervalLog struct {
	mu         sync.Mutex
	interval   time.Duration
	last       time.Time
	suppressed int
}

// allow reports whether an event at now is to be logged and, if so, how many
// were suppressed since the last one logged.
func (l *intervalLog) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		return false, 0
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	return true, suppressed
}

// fallbackUnavailableLog serves requests not routed through New (tests).
var fallbackUnavailableLog = &intervalLog{interval: UnavailableLogInterval}

func unavailableLogOf(c *echo.Context) *intervalLog {
	if l, ok := c.Get(unavailableLogKey).(*intervalLog); ok {
		return l
	}
	return fallbackUnavailableLog
}

// loggerOf returns the server's logger, which the request-id middleware
// stores in the echo context.
func loggerOf(c *echo.Context) *slog.Logger {
	if l, ok := c.Get(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
