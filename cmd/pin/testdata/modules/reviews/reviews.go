// Package reviews is a test-only module: the smallest module that publishes
// an event of its own through the outbox, registered in cmd/pin like
// promotion (modules_testonly.go, -tags pintestmodules). It proves that a
// module costs one list entry (docs/architecture.md, "Adding a module") and
// ships in no binary.
package reviews

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v5"
	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/httpserver"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

// Name is the module's name; Topic the one topic it publishes to.
const (
	Name  = "reviews"
	Topic = "pin.reviews.review-posted.v1"
	// Path is the one route: POST a review, get its id.
	Path = "/api/developers/v1/reviews"
)

// Deps are what the host gives the module.
type Deps struct {
	DB           *gorm.DB
	Outbox       *outbox.Publisher
	Authenticate echo.MiddlewareFunc
}

// Module publishes pin.reviews.review-posted on each review posted.
type Module struct{ deps Deps }

var (
	_ host.Module      = (*Module)(nil)
	_ host.EventSource = (*Module)(nil)
)

// New builds the module.
func New(d Deps) (*Module, error) {
	if d.DB == nil || d.Outbox == nil {
		return nil, errors.New("reviews: DB and Outbox are required")
	}
	return &Module{deps: d}, nil
}

// Name implements host.Module.
func (m *Module) Name() string { return Name }

// Runners implements host.Module: none.
func (m *Module) Runners() []host.Runner { return nil }

// OutboxTopics implements host.EventSource.
func (m *Module) OutboxTopics() []string { return []string{Topic} }

// RegisterRoutes implements host.Module.
func (m *Module) RegisterRoutes(g *echo.Group) {
	g.POST(Path, m.post, m.deps.Authenticate)
}

// ReviewPosted is the event's payload.
type ReviewPosted struct {
	ReviewID uuid.UUID `json:"reviewId"`
	TenantID uuid.UUID `json:"tenantId"`
	Text     string    `json:"text"`
	PostedAt time.Time `json:"postedAt"`
}

// postQuery announces the review and stores its event in one statement; a
// module with a table would write its row in the first CTE.
const postQuery = `WITH posted AS (SELECT @id::uuid AS id),
published AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM posted)))
SELECT id FROM posted, published`

func (m *Module) post(c *echo.Context) error {
	var in struct {
		Text string `json:"text"`
	}
	if err := httpserver.Bind(c, &in); err != nil {
		return err
	}
	principal, _ := auth.FromContext(c.Request().Context())
	if in.Text == "" {
		return apperror.Invalid("text is required")
	}
	ev := ReviewPosted{ReviewID: uuid.New(), TenantID: principal.TenantID, Text: in.Text, PostedAt: time.Now().UTC()}
	if err := m.publish(c.Request().Context(), ev); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, ev)
}

func (m *Module) publish(ctx context.Context, ev ReviewPosted) error {
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	msg := message.NewMessage(uuid.NewString(), payload)
	id := ev.ReviewID.String()
	msg.Metadata.Set(kafka.MetaPartitionKey, id)
	msg.Metadata.Set(kafka.MetaEventType, "pin.reviews.review-posted")
	msg.Metadata.Set(kafka.MetaContractVersion, "1")
	tx, err := postgres.Autocommit(m.deps.DB)
	if err != nil {
		return err
	}
	_, err = m.deps.Outbox.WriteWith(ctx, tx, postQuery, pgx.NamedArgs{"id": id}, []string{id}, outbox.Events(Topic, msg))
	return err
}
