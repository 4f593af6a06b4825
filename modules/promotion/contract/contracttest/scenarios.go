package contracttest

import "github.com/pinmarket/pin/modules/promotion/contract/scenarios"

// Scenario is a scenario of the kit: records and the effects they allow
// (package scenarios holds them as data, language-neutral).
type Scenario = scenarios.Scenario

// Effect is one side effect of the consumer, matched by purchase, status
// and version; Kind KindReversal for one that undoes an earlier one.
type Effect = scenarios.Effect

// KindReversal marks an effect that undoes an earlier one of its purchase.
const KindReversal = scenarios.KindReversal

// Scenarios returns every scenario run by default, with fresh ids.
func Scenarios() []Scenario { return scenarios.All() }

// named is scenarios.Named for a scenario that must exist.
func named(name string) Scenario {
	s, ok := scenarios.Named(name)
	if !ok {
		panic("contracttest: no scenario " + name)
	}
	return s
}

// Duplicates delivers each event two or three times in a row.
func Duplicates() Scenario { return named("duplicates") }

// OlderAfterNewer delivers a purchase's older event after its newer one.
func OlderAfterNewer() Scenario { return named("older-after-newer") }

// SnapshotRedeliveries delivers snapshots as `pin promotion snapshot`
// writes them.
func SnapshotRedeliveries() Scenario { return named("snapshot-redeliveries") }

// DeadLetterReplays delivers what the relay writes around a dead letter and
// its replay: each purchase's records in version order.
func DeadLetterReplays() Scenario { return named("dead-letter-replays") }

// RelayFailover delivers what two relays write around a failover.
func RelayFailover() Scenario { return named("relay-failover") }

// UnknownEnumValues delivers values a later additive revision may write.
func UnknownEnumValues() Scenario { return named("unknown-enum-values") }

// OtherContractVersions delivers events of contractVersion 2 with fields
// version 1 does not know.
func OtherContractVersions() Scenario { return named("other-contract-versions") }

// HostileRecords delivers records no revision of the contract writes.
func HostileRecords() Scenario { return named("hostile-records") }

// CancelledWithoutActivation delivers a purchase's Cancelled whose Active
// never comes (gone with the topic's retention, or cancelled while Pending).
func CancelledWithoutActivation() Scenario { return named("cancelled-without-activation") }

// LegacySnapshot is the snapshot as main wrote it before it became a
// redelivery (a new messageId); not among Scenarios: a consumer that
// deduplicates by messageId alone, as the contract says billing does,
// fails it.
func LegacySnapshot() Scenario { return named("legacy-snapshot") }
