package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/correlation"
)

// RouteUnmatched is the route label of requests that matched no route (the
// router's 404 and 405): labelling them by raw path would let any client
// create unbounded metric series.
const RouteUnmatched = "unmatched"

const maxRequestIDLength = 128

// requestID accepts a sane incoming X-Request-ID (so a caller's id follows
// the request through our logs) or makes one, echoes it in the response and
// puts it into the request context for logs and events.
func requestID(logger *slog.Logger) echo.MiddlewareFunc {
	unavailableLog := &intervalLog{interval: UnavailableLogInterval}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			req := c.Request()
			id := req.Header.Get(echo.HeaderXRequestID)
			if !saneRequestID(id) {
				id = uuid.NewString()
			}
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			c.SetRequest(req.WithContext(correlation.WithRequestID(req.Context(), id)))
			c.Set(loggerKey, logger)
			c.Set(unavailableLogKey, unavailableLog)
			return next(c)
		}
	}
}

// saneRequestID admits ids that are safe to put into logs, headers and Kafka
// headers verbatim: short, printable ASCII, no spaces or quotes.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '-', r == '_', r == '.', r == ':', r == '=', r == '+', r == '/', r == '@':
		default:
			return false
		}
	}
	return true
}

// panicError carries a recovered panic to the error handler, which logs it
// once, with the stack.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// recoverPanics turns a handler's panic into a 500 problem; the server and
// the connection stay up.
func recoverPanics() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) (err error) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if r == http.ErrAbortHandler { //nolint:errorlint // net/http compares the sentinel the same way
					// The handler's deliberate way to abort the connection.
					panic(r)
				}
				err = &panicError{value: r, stack: debug.Stack()}
			}()
			return next(c)
		}
	}
}

const bodyLimitKey = "pin.httpserver.body_limit"

// bodyLimit rejects a declared Content-Length over limit at once and caps
// what can be read from any body, chunked ones included; a read past the
// limit fails with *http.MaxBytesError, which Bind and the error handler
// turn into 413. http.MaxBytesReader also makes net/http close the
// connection, since the rest of the body is never read.
func bodyLimit(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			c.Set(bodyLimitKey, limit)
			req := c.Request()
			if req.ContentLength > limit {
				return apperror.TooLarge(bodyTooLargeDetail(limit))
			}
			if req.Body != nil && req.Body != http.NoBody {
				req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
			}
			return next(c)
		}
	}
}

// deadline gives the request's context the handler timeout, and answers
// 503 with Retry-After for what ran out of it or failed in a way transient
// recognises, instead of a 500. Application errors pass as they are: a
// use case that chose to call a lock wait a conflict keeps its 409.
func deadline(timeout time.Duration, transient func(error) bool, retryAfter time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			req := c.Request()
			ctx, cancel := context.WithTimeout(req.Context(), timeout)
			defer cancel()
			c.SetRequest(req.WithContext(ctx))
			err := next(c)
			// The error is rendered outside, where a done context would read
			// as a client that went away.
			c.SetRequest(req)
			if err == nil || apperror.KindOf(err) != apperror.KindInternal {
				return err
			}
			var unavailable *apperror.Error
			switch {
			case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil && req.Context().Err() == nil:
				unavailable = apperror.Unavailable("The request ran out of time; try again later.", err)
			case transient != nil && transient(err):
				unavailable = apperror.Unavailable("The database is unavailable or busy; try again later.", err)
			default:
				return err
			}
			unavailable.RetryAfter = retryAfter
			return unavailable
		}
	}
}

// observe renders the handler's error itself (instead of leaving it to
// Echo after the chain) so that it sees the final status, then records the
// request's metrics and writes the access log line.
func observe(logger *slog.Logger, m *httpMetrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			start := time.Now()
			c.Set(rendersProblemsKey, true)
			if err := next(c); err != nil {
				c.Echo().HTTPErrorHandler(c, err)
			}
			elapsed := time.Since(start)

			req := c.Request()
			ctx := req.Context()
			method := methodLabel(req.Method)
			route := routeLabel(c)
			res, status := echo.ResolveResponseStatus(c.Response(), nil)
			var size int64
			if res != nil {
				size = res.Size
			}
			m.observe(ctx, route, method, status, elapsed)

			level := slog.LevelInfo
			switch {
			case status >= http.StatusInternalServerError:
				level = slog.LevelWarn
			case quietRoutes[route] && status < http.StatusBadRequest:
				level = slog.LevelDebug
			}
			attrs := []any{
				"method", req.Method, "route", route, "path", Truncate(req.URL.Path, MaxEchoedPathBytes),
				"status", status, "duration_ms", float64(elapsed.Microseconds()) / 1000,
				"bytes_out", size, "remote_ip", c.RealIP(),
			}
			logger.Log(ctx, level, "http request", attrs...)
			return nil
		}
	}
}

// quietRoutes are polled by probes and scrapers every few seconds; their
// successes would drown the access log at info level.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// routeLabel is the route template ("/x/:id"), never the raw path.
func routeLabel(c *echo.Context) string {
	path := c.Path()
	if path == "" || isRouterFallback(c) {
		return RouteUnmatched
	}
	return path
}

// isRouterFallback reports whether the router matched no route: a 404, or a
// 405 other than the answer to OPTIONS (which, as in Echo v4, keeps the
// route's label). For those, c.Path() holds the closest route template,
// which would mislabel the request.
func isRouterFallback(c *echo.Context) bool {
	switch c.RouteInfo().Name {
	case echo.NotFoundRouteName:
		return true
	case echo.MethodNotAllowedRouteName:
		return c.Request().Method != http.MethodOptions
	}
	return false
}

// methodLabel keeps the method label to the standard set: the method is
// client input.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "OTHER"
}

func statusLabel(status int) string { return strconv.Itoa(status) }
