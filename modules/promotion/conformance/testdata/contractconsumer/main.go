// Command contractconsumer is a notifications-style consumer of
// pin.promotion.purchase-changed for `pin contract verify`'s own tests: it
// deduplicates by messageId, keeps a version guard per purchase, and makes
// one effect per Active, Cancelled and Expired transition. Its state is a
// log file; each record's dedupe entry and effect are one appended line,
// written before the offset is committed.
//
//	contractconsumer -state F                 # the correct consumer
//	contractconsumer -state F -dedupe memory  # forgets what it saw when restarted
//	contractconsumer -state F -commit first   # commits the offsets before it writes
//	contractconsumer -state F -commit polled  # librdkafka's default: offsets stored when polled, committed on a timer
//	contractconsumer -state F -commit stored  # its correct recipe: each offset stored once written, committed on a timer
//	contractconsumer -state F -refused skip   # refuses records outside the bounds without a dead letter
//	contractconsumer -state F -unknown exit   # exits on an unknown enum value
//	contractconsumer -state F effects         # prints its effects, one JSON line each
//	contractconsumer -state F dead-letters    # prints its dead letters, one JSON line each
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
)

// entry is one line of the log: a record acknowledged, and the effect it
// made if any.
type entry struct {
	MessageID  uuid.UUID         `json:"messageId"`
	PurchaseID uuid.UUID         `json:"purchaseId"`
	Version    int64             `json:"version"`
	Effect     *scenarios.Effect `json:"effect,omitempty"` // the line `pin contract verify` reads
	DeadLetter *deadLetter       `json:"deadLetter,omitempty"`
}

// deadLetter is a record refused, as --dead-letters prints it.
type deadLetter struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Rule      string `json:"rule"`
}

func main() {
	state := flag.String("state", "", "the log file")
	dedupe := flag.String("dedupe", "file", "file: the dedupe is read back from the log at start; memory: it is not")
	commit := flag.String("commit", "after", "after: commit the offsets once the batch is written; first: before; "+
		"polled, stored: on a timer (-commit-interval), the offsets of what was polled, or of what was written")
	interval := flag.Duration("commit-interval", time.Second, "how often -commit polled and stored commit")
	writeDelay := flag.Duration("write-delay", 0, "how long each record's write takes")
	refused := flag.String("refused", "dead-letter", "dead-letter: a refused record is logged as a dead letter; skip: it is not")
	unknown := flag.String("unknown", "keep", "keep: an unknown enum value is kept; exit: the consumer exits on it")
	flag.Parse()
	if *state == "" {
		fmt.Fprintln(os.Stderr, "contractconsumer: -state is required")
		os.Exit(2)
	}
	var err error
	switch flag.Arg(0) {
	case "effects":
		err = printLines(*state, func(e entry) *scenarios.Effect { return e.Effect })
	case "dead-letters":
		err = printLines(*state, func(e entry) *deadLetter { return e.DeadLetter })
	default:
		err = consume(*state, *dedupe == "file", *refused == "dead-letter", *unknown == "exit", *commit, *interval, *writeDelay)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "contractconsumer:", err)
		os.Exit(1)
	}
}

func readLog(path string) ([]entry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		var e entry
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, lines.Err()
}

// printLines prints what pick takes of each log line, one JSON line each,
// skipping lines it takes nothing of.
func printLines[T any](path string, pick func(entry) *T) error {
	entries, err := readLog(path)
	if err != nil {
		return err
	}
	w := json.NewEncoder(os.Stdout)
	for _, e := range entries {
		if v := pick(e); v != nil {
			if err := w.Encode(v); err != nil {
				return err
			}
		}
	}
	return nil
}

func consume(path string, durable, keepDeadLetters, exitOnUnknown bool, commit string, interval, writeDelay time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	seen, versions := map[uuid.UUID]bool{}, map[uuid.UUID]int64{}
	if durable {
		entries, err := readLog(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			seen[e.MessageID] = true
			versions[e.PurchaseID] = max(versions[e.PurchaseID], e.Version)
		}
	}
	log, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	opts := []kgo.Opt{
		kgo.SeedBrokers(os.Getenv("PIN_CONTRACT_BROKERS")),
		kgo.ConsumeTopics(os.Getenv("PIN_CONTRACT_TOPIC")),
		kgo.ConsumerGroup(os.Getenv("PIN_CONTRACT_GROUP")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.BlockRebalanceOnPoll(),
	}
	onTimer := commit == "polled" || commit == "stored"
	if onTimer {
		opts = append(opts, kgo.AutoCommitMarks(), kgo.AutoCommitInterval(interval))
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer client.Close()
	defer client.AllowRebalance() // or Close waits for a rebalance the poll still blocks
	quiet := slog.New(slog.DiscardHandler)
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		records := fetches.Records()
		if commit == "polled" {
			client.MarkCommitRecords(records...)
		}
		if commit == "first" {
			if err := client.CommitRecords(ctx, records...); err != nil {
				return err
			}
		}
		for _, r := range records {
			headers := map[string]string{}
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			stored := func() {
				if commit == "stored" {
					client.MarkCommitRecords(r)
				}
			}
			e, err := contract.DecodeRecord(contract.Record{Key: r.Key, Headers: headers, Value: r.Value}, quiet)
			if err != nil {
				if keepDeadLetters {
					if err := appendLine(log, entry{DeadLetter: &deadLetter{Partition: r.Partition, Offset: r.Offset, Rule: err.Error()}}); err != nil {
						return err
					}
				}
				stored()
				continue
			}
			p := e.Payload
			if exitOnUnknown && (!p.Status.Known() || !p.PaymentStatus.Known() || !p.PackageKind.Known()) {
				return fmt.Errorf("%d/%d: unknown enum value in %s/%s/%s", r.Partition, r.Offset, p.Status, p.PaymentStatus, p.PackageKind)
			}
			if seen[e.MessageID] {
				stored()
				continue
			}
			line := entry{MessageID: e.MessageID, PurchaseID: p.PurchaseID, Version: p.Version}
			if p.Version > versions[p.PurchaseID] && (p.Status == contract.StatusActive || p.Status == contract.StatusCancelled || p.Status == contract.StatusExpired) {
				line.Effect = &scenarios.Effect{PurchaseID: p.PurchaseID, Status: p.Status, Version: p.Version}
			}
			time.Sleep(writeDelay)
			if err := appendLine(log, line); err != nil {
				return err
			}
			seen[e.MessageID] = true
			versions[p.PurchaseID] = max(versions[p.PurchaseID], p.Version)
			stored()
		}
		if commit == "after" {
			if err := client.CommitRecords(ctx, records...); err != nil {
				return err
			}
		}
		client.AllowRebalance()
	}
	return nil
}

// appendLine appends e to the log in one write: a kill leaves it whole or
// absent.
func appendLine(log *os.File, e entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = log.Write(append(data, '\n'))
	return err
}
