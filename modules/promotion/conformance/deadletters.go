package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// deadLetter is one line of the dead-letters command: a record the consumer
// refused, and the rule it broke.
type deadLetter struct {
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
	Rule      string `json:"rule"`
}

// at is where a record sits on the topic.
type at struct {
	partition int32
	offset    int64
}

// readDeadLetters runs the dead-letters command and returns its rules by
// record.
func (v *verifier) readDeadLetters(ctx context.Context) (map[at]string, error) {
	out, err := v.output(ctx, "dead-letters", v.deadLettersCmd)
	if err != nil {
		return nil, err
	}
	letters := map[at]string{}
	lines := bufio.NewScanner(bytes.NewReader(out))
	lines.Buffer(nil, 1<<20)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		var d deadLetter
		if err := json.Unmarshal([]byte(line), &d); err != nil || d.Partition == nil || d.Offset == nil || strings.TrimSpace(d.Rule) == "" {
			return nil, fmt.Errorf(`the dead-letters command's line %d is not a dead letter {"partition":P,"offset":O,"rule":"…"}: %.200q`, n, line)
		}
		letters[at{*d.Partition, *d.Offset}] = d.Rule
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("the dead-letters command's output: %v", err)
	}
	return letters, nil
}

// judgeDeadLetters holds the scenario's records, as produced, against what
// the consumer dead-lettered: a record the contract refuses is acted on
// (Judge says so) or dead-lettered, never skipped in silence; one it admits
// is never dead-lettered.
func judgeDeadLetters(s scenarios.Scenario, produced []*kgo.Record, effects []scenarios.Effect, letters map[at]string) []string {
	// An effect with a refused record's key is its effect unless an
	// admitted record of the scenario has that key too (a spoilt copy of a
	// genuine event): then Judge counts it, and a missing dead letter is not
	// excused by it.
	acted := map[scenarios.EventRef]bool{}
	for _, e := range effects {
		acted[scenarios.EventRef{PurchaseID: e.PurchaseID, Status: e.Status, Version: e.Version}] = true
	}
	for _, e := range s.Effects {
		delete(acted, e.EventRef)
	}
	var fails []string
	for i, r := range s.Records {
		where := at{produced[i].Partition, produced[i].Offset}
		rule, lettered := letters[where]
		switch {
		case r.Refuse != nil && !lettered && (r.Event == nil || !acted[*r.Event]):
			fails = append(fails, fmt.Sprintf("%s (partition %d, offset %d) was neither acted on nor dead-lettered: "+
				"a record outside the contract's bounds is dead-lettered, naming the rule it broke", r.What, where.partition, where.offset))
		case r.Refuse == nil && lettered:
			fails = append(fails, fmt.Sprintf("%s (partition %d, offset %d) was dead-lettered (%.200q), but the contract admits it", r.What,
				where.partition, where.offset, rule))
		}
	}
	return fails
}
