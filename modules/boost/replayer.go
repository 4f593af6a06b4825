package boost

import (
	"log/slog"

	"github.com/pinmarket/pin/platform/consumer"
)

// DeadLetterReplayer is the projection's consumer as `pin consumer
// dead-letters replay` runs it: the same name and handler as the Runner New
// builds, applied in-process under the same inbox and version guard.
func DeadLetterReplayer(logger *slog.Logger) consumer.Replayer {
	logger = logger.With("module", Name)
	return consumer.NewReplayer(Name, Projection{Logger: logger}, logger)
}
