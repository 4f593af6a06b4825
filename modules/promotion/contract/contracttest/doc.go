// Package contracttest is the conformance kit of the event
// pin.promotion.purchase-changed: a team that consumes the topic runs its
// own consumer through it, in its own Go tests, and learns whether it keeps
// the contract's promises whatever the topic hands it.
//
// The team gives the kit a Consumer: the function its Kafka client calls
// with each record (Handler), and a way to read back what the consumer did
// (Observe: its side effects, and for a projection what it holds). The kit
// drives it through Scenarios — duplicates, an older event after a newer
// one, redeliveries by snapshot and by dead-letter replay, resends after a
// relay failover, unknown enum values and contract versions, hostile
// records — and checks that each transition's side effect happens once,
// that nothing goes backwards, and that a record outside the contract's
// bounds is refused naming the rule it broke:
//
//	func TestOurConsumerKeepsTheContract(t *testing.T) {
//		contracttest.Run(t, contracttest.Consumer{
//			Handle:   ourHandler,
//			Observe:  ourEffects,
//			EffectOn: []contract.Status{contract.StatusActive},
//		})
//	}
//
// The scenarios are data, in package scenarios (one JSON file each), which
// `pin contract verify` also runs against a consumer process in any
// language (docs/adr/0022-conformance-kit-as-a-black-box.md). Effects are
// matched by purchase, status and version; a refund is an effect of kind
// KindReversal and must follow the charge it undoes. Each scenario uses
// purchases and targets of its own, with fresh ids each run, so one
// consumer (one database) serves every scenario and no state needs
// resetting. Billing and
// Notifier are two reference consumers written from the contract alone;
// docs/consuming-the-event.md is the page a team reads first.
//
// Like the contract, the kit depends on nothing but the standard library,
// google/uuid and shopspring/decimal.
package contracttest
