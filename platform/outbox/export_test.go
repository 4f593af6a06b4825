package outbox

import "fmt"

// RelayReadQuery is the relay's read of topic's outbox in batches of batch,
// for the plan guard; its arguments are the topic and the producer's limit.
func RelayReadQuery(topic string, batch int) string {
	return fmt.Sprintf(readQuery, TableName(topic), batch)
}
