package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/correlation"
)

// RouteUnmatched is the route label of requests that matched no route (the
// router's 404 and 405): labelling them by raw path would let any client
// create unbounded metric series.
const RouteUnmatched = "unmatched"

const maxRequestIDLength = 128

// requestID is Echo's RequestID: it accepts an incoming X-Request-ID (so a
// caller's id follows the request through our logs) or makes a UUID, echoes
// it in the response and puts it into the request context for logs and
// events. An id saneRequestID refuses is dropped first, so a new one is
// made: Echo's keeps any non-empty header (docs/adr/0023).
func requestID(logger *slog.Logger) echo.MiddlewareFunc {
	unavailableLog := &intervalLog{interval: UnavailableLogInterval}
	ids := middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: uuid.NewString,
		RequestIDHandler: func(c *echo.Context, id string) {
			req := c.Request()
			c.SetRequest(req.WithContext(correlation.WithRequestID(req.Context(), id)))
			c.Set(loggerKey, logger)
			c.Set(unavailableLogKey, unavailableLog)
		},
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		withID := ids(next)
		return func(c *echo.Context) error {
			if h := c.Request().Header; !saneRequestID(h.Get(echo.HeaderXRequestID)) {
				h.Del(echo.HeaderXRequestID)
			}
			return withID(c)
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

// recoverPanics is Echo's Recover, whose panic becomes a *panicError: a
// 500 whatever the panic's value (Echo's error unwraps to it, so a panic
// with an *apperror.Error would answer its status), logged once with the
// stack, never in the error's text. The server and the connection stay up;
// http.ErrAbortHandler still aborts the connection.
func recoverPanics() echo.MiddlewareFunc {
	recovering := middleware.RecoverWithConfig(middleware.RecoverConfig{
		StackSize:       maxPanicStack,
		DisableStackAll: true, // this goroutine's stack, not every one's
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := recovering(next)
		return func(c *echo.Context) error {
			err := h(c)
			if p, ok := err.(*middleware.PanicStackError); ok { //nolint:errorlint // Recover returns it as it is
				return &panicError{value: p.Err, stack: p.Stack}
			}
			return err
		}
	}
}

// maxPanicStack bounds the stack a panic logs.
const maxPanicStack = 64 << 10

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

// admitWrites asks admit (nil: admit all) before a write to a route is
// handled and answers its error instead. Reads, and requests no route
// matched (their 404 or 405), pass.
func admitWrites(admit func() error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if admit == nil {
			return next
		}
		return func(c *echo.Context) error {
			switch c.Request().Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
				return next(c)
			}
			if isRouterFallback(c) {
				return next(c)
			}
			if err := admit(); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// deadline is Echo's ContextTimeout: the request's context gets the
// handler timeout. Its error handler answers 503 with Retry-After for what
// ran out of that time or failed in a way transient recognises, instead of
// a 500. Application errors pass as they are: a use case that chose to call
// a lock wait a conflict keeps its 409.
func deadline(timeout time.Duration, transient func(error) bool, retryAfter time.Duration) echo.MiddlewareFunc {
	return middleware.ContextTimeoutWithConfig(middleware.ContextTimeoutConfig{
		Timeout: timeout,
		ErrorHandler: func(c *echo.Context, err error) error {
			req := c.Request()
			// Only the timeout's own deadline ends the context with
			// DeadlineExceeded; a client that went away cancels it.
			ranOut := errors.Is(req.Context().Err(), context.DeadlineExceeded)
			if ranOut {
				// The error is rendered outside, where a done context would
				// read as a client that went away.
				c.SetRequest(req.WithContext(context.WithoutCancel(req.Context())))
			}
			if apperror.KindOf(err) != apperror.KindInternal {
				return err
			}
			var unavailable *apperror.Error
			switch {
			case ranOut && errors.Is(err, context.DeadlineExceeded):
				unavailable = apperror.Unavailable("The request ran out of time; try again later.", err)
			case transient != nil && transient(err):
				unavailable = apperror.Unavailable("The database is unavailable or busy; try again later.", err)
			default:
				return err
			}
			unavailable.RetryAfter = retryAfter
			return unavailable
		},
	})
}

// observe is Echo's RequestLogger: it renders the handler's error itself
// (HandleError) so that it sees the final status, then records the
// request's metrics and writes the access log line. The error, rendered, is
// not passed on, or Echo would render it again.
func observe(logger *slog.Logger, m *httpMetrics) echo.MiddlewareFunc {
	logged := middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		HandleError:    true,
		BeforeNextFunc: func(c *echo.Context) { c.Set(rendersProblemsKey, true) },
		LogLatency:     true, LogRemoteIP: true, LogMethod: true, LogStatus: true, LogResponseSize: true,
		LogValuesFunc: func(c *echo.Context, v middleware.RequestLoggerValues) error {
			req := c.Request()
			ctx := req.Context()
			route := routeLabel(c)
			m.observe(ctx, route, methodLabel(v.Method), v.Status, v.Latency)
			level := slog.LevelInfo
			switch {
			case v.Status >= http.StatusInternalServerError:
				level = slog.LevelWarn
			case quietRoutes[route] && v.Status < http.StatusBadRequest:
				level = slog.LevelDebug
			}
			logger.Log(ctx, level, "http request",
				"method", v.Method, "route", route, "path", Truncate(req.URL.Path, MaxEchoedPathBytes),
				"status", v.Status, "duration_ms", float64(v.Latency.Microseconds())/1000,
				"bytes_out", max(v.ResponseSize, 0), "remote_ip", v.RemoteIP)
			return nil
		},
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := logged(next)
		return func(c *echo.Context) error {
			_ = h(c) // rendered by HandleError
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
