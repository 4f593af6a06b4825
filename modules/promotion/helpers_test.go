package promotion_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/modules/promotion/internal/adapters"
	"github.com/pinmarket/pin/modules/promotion/internal/promotiontest"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/observability"
	"github.com/pinmarket/pin/platform/postgres"
	"github.com/pinmarket/pin/platform/testbed"
)

// Every test database has the outbox tables of the topics the module
// declares, as `pin migrate up` makes them for the binary's module list.
func init() { testbed.DeclareTopics(promotion.Topics()...) }

// openAPIPath is the API document the handlers' responses must match.
const openAPIPath = "../../docs/api/openapi.yaml"

var testSecret = []byte("promotion-test-secret-0123456789abcdef")

// loadOpenAPI loads and validates the API document once per test binary.
var loadOpenAPI = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", openAPIPath, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate %s: %w", openAPIPath, err)
	}
	return doc, nil
})

var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := loadOpenAPI()
	if err != nil {
		return nil, err
	}
	// Requests in tests go to any host; the document's server URL is for
	// people.
	local := *doc
	local.Servers = nil
	return gorillamux.NewRouter(&local)
})

// testBundle is one module on its own fresh database behind the real HTTP
// stack (httpserver.New: request ids, body limit, problem+json).
type testBundle struct {
	db     *testbed.Database
	e      *echo.Echo
	authn  *auth.Authenticator
	module *promotion.Module
	apiDB  *gorm.DB // the API's own pool, when wiring.apiPool asked for one
}

func newTestBundle(tb testing.TB) *testBundle {
	tb.Helper()
	return newWiredBundle(tb, wiring{})
}

// wiring is what a test varies when it wires the module; left zero, the
// module runs quiet: logs discarded, no metrics, no tracing, the default
// expiry settings.
type wiring struct {
	registerer prometheus.Registerer
	tp         trace.TracerProvider
	expire     promotion.ExpireSettings
	// apiPool, when set, gives the API a pool of its own, as `pin serve`
	// does (postgres.APIPool).
	apiPool *postgres.PoolConfig
	// logs receives the server's and the module's JSON logs.
	logs io.Writer
	// apiHost, with apiPool, puts the API pool's sessions behind a host a
	// test can demote (URL with target_session_attrs=read-write).
	apiHost *testbed.DatabaseHost
	// apiURL, with apiPool and no apiHost, makes the API pool's URL from
	// the test database's.
	apiURL func(dbURL string) string
	// apiDB is set by newWiredBundle from apiPool.
	apiDB *gorm.DB
	// publications replace the module's own topics of the event when set.
	publications adapters.Publications
}

// logger is where the wiring's logs go.
func (w wiring) logger() *slog.Logger {
	if w.logs == nil {
		return slog.New(slog.DiscardHandler)
	}
	return observability.NewLogger(w.logs, slog.LevelInfo)
}

// newModule wires the module on db as cmd/pin does, and returns it with
// the authenticator that issues its tokens.
func newModule(tb testing.TB, db *gorm.DB, w wiring) (*promotion.Module, *auth.Authenticator) {
	tb.Helper()
	logger := w.logger()
	authn, err := auth.NewAuthenticator(testSecret)
	require.NoError(tb, err)
	deps := promotion.Deps{
		DB: db, APIDB: w.apiDB, Outbox: promotiontest.Publisher(tb, w.tp), Authenticate: authn.Middleware(), Logger: logger,
		Registerer: w.registerer, TracerProvider: w.tp, Expire: w.expire,
	}
	build := promotion.New
	if w.publications != nil {
		build = func(d promotion.Deps) (*promotion.Module, error) { return promotion.NewPublishingTo(d, w.publications) }
	}
	module, err := build(deps)
	require.NoError(tb, err)
	return module, authn
}

// newWiredBundle is a testBundle whose module and HTTP server are wired
// with w.
func newWiredBundle(tb testing.TB, w wiring) *testBundle {
	tb.Helper()
	db := testbed.NewDatabase(tb)
	if w.tp != nil {
		// The statements' spans go to the test's provider, as `pin serve`'s
		// go to the global one.
		db.Gorm = db.Traced(tb, w.tp)
		sqlDB, err := db.Gorm.DB()
		require.NoError(tb, err)
		db.SQL = sqlDB
	}
	if w.apiPool != nil {
		pool := *w.apiPool
		pool.Logger = w.logger()
		pool.TracerProvider = w.tp
		apiURL := db.URL
		switch {
		case w.apiHost != nil:
			apiURL = testbed.HostListURL(tb, db.URL, []string{w.apiHost.Addr()}, url.Values{"target_session_attrs": {"read-write"}})
		case w.apiURL != nil:
			apiURL = w.apiURL(db.URL)
		}
		apiDB, err := postgres.OpenPool(context.Background(), apiURL, pool)
		require.NoError(tb, err)
		apiSQL, err := apiDB.DB()
		require.NoError(tb, err)
		tb.Cleanup(func() { _ = apiSQL.Close() }) // before the database is dropped
		w.apiDB = apiDB
	}
	module, authn := newModule(tb, db.Gorm, w)
	tp := w.tp
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	httpCfg := httpserver.Config{Transient: postgres.IsTransient, ReadOnly: postgres.IsReadOnly}
	if w.apiPool != nil && w.apiPool.ReadOnly != nil {
		httpCfg.AdmitWrite = w.apiPool.ReadOnly.AdmitWrite // as `pin serve` wires it
	}
	e := httpserver.New(httpCfg, w.logger(), w.registerer, tp)
	module.RegisterRoutes(e.Group(""))
	return &testBundle{db: db, e: e, authn: authn, module: module, apiDB: w.apiDB}
}

// token issues a valid token for p.
func (b *testBundle) token(tb testing.TB, p auth.Principal) string {
	tb.Helper()
	tok, err := b.authn.Issue(p, time.Hour)
	require.NoError(tb, err)
	return tok
}

// tenantToken is a token of a fresh user of tenant.
func (b *testBundle) tenantToken(tb testing.TB, tenant uuid.UUID) string {
	tb.Helper()
	return b.token(tb, auth.Principal{UserID: uuid.New(), TenantID: tenant})
}

// adminToken is a token of a platform admin without a tenant.
func (b *testBundle) adminToken(tb testing.TB) string {
	tb.Helper()
	return b.token(tb, auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}})
}

// request is one HTTP call. Body is sent as is when it is a string or
// []byte, else as JSON.
type request struct {
	method string
	path   string
	token  string
	body   any
	header map[string]string
	// repeated are headers sent several times.
	repeated http.Header
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(tb testing.TB, dst any) {
	tb.Helper()
	require.NoError(tb, json.Unmarshal(r.body, dst), string(r.body))
}

// problem is the application/problem+json body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (r response) problem(tb testing.TB) problem {
	tb.Helper()
	require.Equal(tb, httpserver.ProblemContentType, r.header.Get(echo.HeaderContentType))
	var p problem
	r.decode(tb, &p)
	require.Equal(tb, r.status, p.Status)
	return p
}

// fields lists the fields a validation problem names.
func (p problem) fields() []string {
	out := make([]string, len(p.Errors))
	for i, e := range p.Errors {
		out[i] = e.Field
	}
	return out
}

// do serves one request and checks the response against the OpenAPI
// document: its status must be documented for the operation and its body
// must match the schema.
func (b *testBundle) do(tb testing.TB, r request) response {
	tb.Helper()
	return b.doOffTest(r).check(tb)
}

// served is a request served by doOffTest, not yet checked.
type served struct {
	req request
	res response
	err error
}

// doOffTest is do for a goroutine, which must not stop the test: the
// test's goroutine checks what it returns with check.
func (b *testBundle) doOffTest(r request) served {
	res, err := b.serve(r)
	return served{r, res, err}
}

// check fails the test, on its own goroutine, where do would have.
func (s served) check(tb testing.TB) response {
	tb.Helper()
	require.NoError(tb, s.err)
	validateAgainstOpenAPI(tb, s.req, s.res)
	return s.res
}

// serve sends r through the Echo host.
func (b *testBundle) serve(r request) (response, error) {
	var body []byte
	switch v := r.body.(type) {
	case nil:
	case string:
		body = []byte(v)
	case []byte:
		body = v
	default:
		var err error
		if body, err = json.Marshal(v); err != nil {
			return response{}, err
		}
	}
	req := httptest.NewRequest(r.method, r.path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	if r.token != "" {
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	for k, vs := range r.repeated {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, nil
}

func validateAgainstOpenAPI(tb testing.TB, r request, res response) {
	tb.Helper()
	require.NoError(tb, openAPIMismatch(r, res), "%s %s -> %d %s does not match the OpenAPI document",
		r.method, r.path, res.status, res.body)
}

// openAPIMismatch says how the response to r breaks the OpenAPI document:
// an undocumented route or status, or a body off its schema.
func openAPIMismatch(r request, res response) error {
	router, err := openAPIRouter()
	if err != nil {
		return err
	}
	// A fresh request: the served one's body has been read.
	req := httptest.NewRequest(r.method, r.path, nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("find route: %w", err)
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: res.status,
		Header: res.header,
		Body:   io.NopCloser(bytes.NewReader(res.body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true, // an undocumented status fails
			MultiError:            true,
		},
	})
}

// Paths.
const (
	packagesPath      = "/api/developers/v1/promotion-packages"
	adminPackagesPath = "/api/admin/v1/promotion-packages"
	purchasesPath     = "/api/developers/v1/promotions"
)

func purchasePath(id string) string { return purchasesPath + "/" + id }
func cancelPath(id string) string   { return purchasesPath + "/" + id + "/cancel" }

// Response shapes, decoded loosely enough to compare. They are the tests'
// own reading of the wire, not the server's DTOs: a field the server renames
// must fail here (and in the OpenAPI check of every response).
type packageJSON struct {
	ID           string    `json:"id"`
	Code         string    `json:"code"`
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	DurationDays int       `json:"durationDays"`
	BoostWeight  int       `json:"boostWeight"`
	Price        priceJSON `json:"price"`
	IsActive     bool      `json:"isActive"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

type priceJSON struct {
	Amount     json.Number `json:"amount"`
	CurrencyID int         `json:"currencyId"`
	Currency   struct {
		IsoCode string `json:"isoCode"`
		Name    string `json:"name"`
		Sign    string `json:"sign"`
	} `json:"currency"`
}

type targetJSON struct {
	TargetKind string `json:"targetKind"`
	TargetID   string `json:"targetId"`
}

type purchaseJSON struct {
	ID            string       `json:"id"`
	TenantID      string       `json:"tenantId"`
	PackageID     string       `json:"packageId"`
	PackageCode   string       `json:"packageCode"`
	PackageKind   string       `json:"packageKind"`
	Targets       []targetJSON `json:"targets"`
	Status        string       `json:"status"`
	PaymentStatus string       `json:"paymentStatus"`
	BoostWeight   int          `json:"boostWeight"`
	StartsAt      time.Time    `json:"startsAt"`
	EndsAt        time.Time    `json:"endsAt"`
	Price         priceJSON    `json:"price"`
	Version       int64        `json:"version"`
	CreatedAt     time.Time    `json:"createdAt"`
	UpdatedAt     time.Time    `json:"updatedAt"`
	CancelReason  *string      `json:"cancelReason"`
}

type purchaseListJSON struct {
	Items      []purchaseJSON `json:"items"`
	NextCursor *string        `json:"nextCursor"`
}

// packageBody is a valid package creation body of the given kind.
func packageBody(code, kind string) map[string]any {
	return map[string]any{
		"code": code, "name": "Test " + code, "kind": kind, "durationDays": 7, "boostWeight": 10,
		"price": map[string]any{"amount": json.Number("1500.00"), "currencyId": 643},
	}
}

// createPackage creates a package through the admin API.
func (b *testBundle) createPackage(tb testing.TB, code, kind string) packageJSON {
	tb.Helper()
	res := b.do(tb, request{method: http.MethodPost, path: adminPackagesPath, token: b.adminToken(tb), body: packageBody(code, kind)})
	require.Equal(tb, http.StatusCreated, res.status, string(res.body))
	var p packageJSON
	res.decode(tb, &p)
	return p
}

// purchaseBody is a purchase body of targets of one kind.
func purchaseBody(packageID, targetKind string, targetIDs ...uuid.UUID) map[string]any {
	targets := make([]map[string]any, len(targetIDs))
	for i, id := range targetIDs {
		targets[i] = map[string]any{"targetKind": targetKind, "targetId": id.String()}
	}
	return map[string]any{"packageId": packageID, "targets": targets}
}

// buy makes a purchase of n fresh Project targets and returns it.
func (b *testBundle) buy(tb testing.TB, token, packageID string, n int) purchaseJSON {
	tb.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	res := b.do(tb, request{method: http.MethodPost, path: purchasesPath, token: token, body: purchaseBody(packageID, "Project", ids...)})
	require.Equal(tb, http.StatusCreated, res.status, string(res.body))
	var p purchaseJSON
	res.decode(tb, &p)
	return p
}

// events returns every message in the promotion topic's outbox table, in
// the order they were written, each checked to keep the contract.
func (b *testBundle) events(tb testing.TB) []promotiontest.OutboxEvent {
	tb.Helper()
	out := promotiontest.OutboxEvents(tb, b.db)
	for _, ev := range out {
		require.NoError(tb, ev.Envelope.Validate(), "the producer keeps every rule of the contract")
		require.Equal(tb, ev.Envelope.MessageID.String(), ev.MessageID, "the message UUID is the event's messageId")
	}
	return out
}

// count runs a SELECT count(*) ... query.
func (b *testBundle) count(tb testing.TB, query string, args ...any) int {
	tb.Helper()
	return promotiontest.Count(tb, b.db, query, args...)
}

// exec runs a statement directly on the database, as an operator would.
func (b *testBundle) exec(tb testing.TB, query string, args ...any) sql.Result {
	tb.Helper()
	res, err := b.db.SQL.Exec(query, args...)
	require.NoError(tb, err)
	return res
}

// requireNothingWritten asserts that no purchase, target, idempotency key or
// outbox message exists.
func (b *testBundle) requireNothingWritten(tb testing.TB) {
	tb.Helper()
	for _, table := range []string{
		"promotion.promotion_purchases", "promotion.promotion_purchase_targets",
		"promotion.idempotency_keys", "outbox.messages",
	} {
		require.Zero(tb, b.count(tb, "SELECT count(*) FROM "+table), "rows in %s", table)
	}
}

// parallel runs fn n times at once and waits for all.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}
