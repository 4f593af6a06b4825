package adapters

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/postgres"
)

// publishCall is how a module statement hands its events to the outbox: in
// a CTE, with the ids of the rows it wrote, read by the final SELECT.
var publishCall = regexp.MustCompile(`(\w+) AS \(\s*SELECT outbox\.publish\(@events::text\[\], ARRAY\(SELECT id::text FROM (\w+)\)\)\s*\)\s*SELECT id FROM (\w+), (\w+)\s*$`)

// checkPublishes says what is wrong with query, a module statement that
// writes events. PostgreSQL never runs a SELECT CTE that nothing reads, so
// a final SELECT that leaves the publication out stores no event, silently.
func checkPublishes(query string) error {
	if strings.Contains(query, "INTO outbox") {
		return errors.New("it inserts into the outbox itself: rows go in only through outbox.publish")
	}
	m := publishCall.FindStringSubmatch(query)
	if m == nil {
		return errors.New("no CTE `x AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM <written>)))` " +
			"followed by the final `SELECT id FROM <written>, x`")
	}
	if m[3] != m[2] || m[4] != m[1] {
		return fmt.Errorf("the final SELECT reads %s, %s: it must read %s, the rows announced, and %s, the publication", m[3], m[4], m[2], m[1])
	}
	return nil
}

// publishingStatements are the statements the module hands to writeWith,
// by the name the code gives them.
var publishingStatements = map[string]string{
	"insertPurchaseQuery": insertPurchaseQuery,
	"transitionQuery":     transitionQuery,
}

// Every statement that writes events goes through outbox.publish, in a CTE
// the statement's result reads: each query given to writeWith is one of
// publishingStatements, and each of those passes checkPublishes.
func TestStatementsThatWriteEventsCallOutboxPublish(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	calls := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "writeWith" {
				return true
			}
			calls++
			id, ok := call.Args[3].(*ast.Ident)
			require.True(t, ok, "%s: writeWith's query is not a named statement", fset.Position(call.Pos()))
			_, known := publishingStatements[id.Name]
			require.True(t, known, "%s: writeWith runs %s, which this test does not check", fset.Position(call.Pos()), id.Name)
			return true
		})
	}
	require.Positive(t, calls)
	for name, q := range publishingStatements {
		require.NoError(t, checkPublishes(q), name)
	}
}

// The check catches the two ways events would be lost or misplaced.
func TestCheckPublishesNamesAStatementThatWouldLoseEvents(t *testing.T) {
	t.Parallel()
	unread := strings.Replace(transitionQuery, "SELECT id FROM updated, published", "SELECT id FROM updated", 1)
	require.ErrorContains(t, checkPublishes(unread), "SELECT id FROM <written>, x")
	other := strings.Replace(transitionQuery, "SELECT id FROM updated, published", "SELECT id FROM forgotten, published", 1)
	require.ErrorContains(t, checkPublishes(other), "it must read updated")
	require.ErrorContains(t, checkPublishes(`INSERT INTO outbox.messages (topic) VALUES ('t')`), "through outbox.publish")
}

// What the check guards against, in PostgreSQL: the same statement stores
// its events only when its final SELECT reads the publication's CTE.
func TestAnUnreadPublicationStoresNothing(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	purchases, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	const read = `WITH written AS (SELECT unnest(@ids::uuid[]) AS id),
published AS (SELECT outbox.publish(@events::text[], ARRAY(SELECT id::text FROM written)))
SELECT id FROM written, published`
	unread := strings.Replace(read, "FROM written, published", "FROM written", 1)
	require.Error(t, checkPublishes(strings.ReplaceAll(unread, "written", "x")))

	ids := b.insertDue(t, 2)
	for i, q := range []string{unread, read} {
		p, err := purchases.Get(b.ctx, ids[i])
		require.NoError(t, err)
		msgs, _, err := purchases.events.messages(b.ctx, p, p.UpdatedAt())
		require.NoError(t, err)
		require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
			ids, err := purchases.events.writeWith(b.ctx, tx, b.publisher, q, pgx.NamedArgs{"ids": []string{p.ID().String()}},
				[]string{p.ID().String()}, msgs)
			require.Equal(t, []string{p.ID().String()}, ids)
			return err
		}))
	}
	stored := b.events(t)
	require.Len(t, stored, 1, "only the statement that reads published stored its event")
	require.Equal(t, ids[1].String(), stored[0].Metadata["partition_key"])
}

// One transition statement stores an event with each row it wrote and none
// for a row its version guard left unwritten, in the same statement.
func TestTransitionStatementStoresEventsOnlyWithWrittenRows(t *testing.T) {
	t.Parallel()
	b := newExpireBundle(t)
	purchases, err := NewPurchaseRepository(b.db.Gorm, b.publisher)
	require.NoError(t, err)
	ids := b.insertDue(t, 3)
	asOf := time.Now().UTC().Truncate(time.Microsecond)
	var ts []transition
	var events [][]*message.Message
	for _, id := range ids {
		p, err := purchases.Get(b.ctx, id)
		require.NoError(t, err)
		previous := p.Version()
		require.NoError(t, p.Expire(asOf))
		msgs, ev, err := purchases.events.messages(b.ctx, p, p.UpdatedAt())
		require.NoError(t, err)
		ts, events = append(ts, transition{purchase: p, previousVersion: previous, event: ev}), append(events, msgs)
	}
	b.exec(t, `UPDATE promotion.promotion_purchases SET version = version + 1 WHERE id = '`+ids[1].String()+`'`)

	var written []string
	require.NoError(t, postgres.InTx(b.ctx, b.db.Gorm, func(tx postgres.Tx) error {
		written, err = purchases.events.writeTransitions(context.Background(), tx, b.publisher, ts, events, false)
		return err
	}))
	require.ElementsMatch(t, []string{ids[0].String(), ids[2].String()}, written)
	stored := b.expiredEvents(t)
	require.Len(t, stored, 2)
	require.Len(t, stored[ids[0]], 1)
	require.Len(t, stored[ids[2]], 1)
	require.Empty(t, stored[ids[1]], "the guarded row got no event")
	require.Equal(t, map[string]int{"Active": 1, "Expired": 2}, b.statusCounts(t))
}
