package consumer

import (
	"context"
	"time"

	"github.com/IBM/sarama"

	"github.com/pinmarket/pin/platform/kafka"
)

// watchLag sets the lag gauge every LagInterval until ctx ends. It runs
// beside the group, not in it: a consumer stuck joining its group still
// reports its lag growing (docs/adr/0020-consumer-group-after-crashes.md).
func (r *Runner[B]) watchLag(ctx context.Context) {
	var client sarama.Client
	defer func() {
		if client != nil {
			_ = client.Close()
		}
	}()
	tick := time.NewTicker(r.cfg.LagInterval)
	defer tick.Stop()
	for {
		var lag int64
		var err error
		if client == nil {
			client, err = sarama.NewClient(r.cfg.Brokers, r.cfg.Sarama)
		}
		if err == nil {
			lag, err = kafka.ClientGroupLag(client, r.cfg.Name, r.cfg.Topic)
		}
		if err != nil {
			r.logger.WarnContext(ctx, "consumer lag unknown", "error", err)
		} else {
			r.metrics.lag.WithLabelValues(r.cfg.Name).Set(float64(lag))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
