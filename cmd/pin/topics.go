package main

import (
	"fmt"
	"slices"

	"github.com/pinmarket/pin/modules/promotion"
)

// declaredTopics are the Kafka topics the modules publish to, each once, in
// module order: the one list that `pin migrate up` and `pin dev` make outbox
// tables for, `pin kafka create-topics` and the dev broker create, and `pin
// status` reads. A module that publishes adds its topics here, as it adds
// itself to the host; `pin serve` refuses to start when the two differ.
func declaredTopics() []string {
	var topics []string
	for _, t := range promotion.Topics() {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	return topics
}

// checkDeclaredTopics fails when the modules registered on the host declare
// other topics than declaredTopics: a topic the relay would serve with no
// outbox table or Kafka topic made for it.
func checkDeclaredTopics(hostTopics []string) error {
	declared := declaredTopics()
	if !slices.Equal(slices.Sorted(slices.Values(hostTopics)), slices.Sorted(slices.Values(declared))) {
		return fmt.Errorf("the modules declare the topics %q, cmd/pin's declaredTopics lists %q: add the module's topics to declaredTopics", hostTopics, declared)
	}
	return nil
}
