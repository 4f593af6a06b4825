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
//	contractconsumer -state F effects         # prints its effects, one JSON line each
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
}

func main() {
	state := flag.String("state", "", "the log file")
	dedupe := flag.String("dedupe", "file", "file: the dedupe is read back from the log at start; memory: it is not")
	commit := flag.String("commit", "after", "after: commit the offsets once the batch is written; first: before")
	flag.Parse()
	if *state == "" {
		fmt.Fprintln(os.Stderr, "contractconsumer: -state is required")
		os.Exit(2)
	}
	var err error
	if flag.Arg(0) == "effects" {
		err = printEffects(*state)
	} else {
		err = consume(*state, *dedupe == "file", *commit == "first")
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

func printEffects(path string) error {
	entries, err := readLog(path)
	if err != nil {
		return err
	}
	w := json.NewEncoder(os.Stdout)
	for _, e := range entries {
		if e.Effect != nil {
			if err := w.Encode(e.Effect); err != nil {
				return err
			}
		}
	}
	return nil
}

func consume(path string, durable, commitFirst bool) error {
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
	client, err := kgo.NewClient(
		kgo.SeedBrokers(os.Getenv("PIN_CONTRACT_BROKERS")),
		kgo.ConsumeTopics(os.Getenv("PIN_CONTRACT_TOPIC")),
		kgo.ConsumerGroup(os.Getenv("PIN_CONTRACT_GROUP")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if err != nil {
		return err
	}
	defer client.Close()
	quiet := slog.New(slog.DiscardHandler)
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		records := fetches.Records()
		if commitFirst {
			if err := client.CommitRecords(ctx, records...); err != nil {
				return err
			}
		}
		for _, r := range records {
			headers := map[string]string{}
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			e, err := contract.DecodeRecord(contract.Record{Key: r.Key, Headers: headers, Value: r.Value}, quiet)
			if err != nil {
				fmt.Fprintf(os.Stderr, "contractconsumer: dead-lettered %d/%d: %v\n", r.Partition, r.Offset, err)
				continue
			}
			p := e.Payload
			if seen[e.MessageID] {
				continue
			}
			line := entry{MessageID: e.MessageID, PurchaseID: p.PurchaseID, Version: p.Version}
			if p.Version > versions[p.PurchaseID] && (p.Status == contract.StatusActive || p.Status == contract.StatusCancelled || p.Status == contract.StatusExpired) {
				line.Effect = &scenarios.Effect{PurchaseID: p.PurchaseID, Status: p.Status, Version: p.Version}
			}
			data, err := json.Marshal(line)
			if err != nil {
				return err
			}
			if _, err := log.Write(append(data, '\n')); err != nil { // one write: a kill leaves it whole or absent
				return err
			}
			seen[e.MessageID] = true
			versions[p.PurchaseID] = max(versions[p.PurchaseID], p.Version)
		}
		if !commitFirst {
			if err := client.CommitRecords(ctx, records...); err != nil {
				return err
			}
		}
		client.AllowRebalance()
	}
	return nil
}
