package main

import (
	"fmt"
	"slices"
)

// declaredTopics are the Kafka topics the modules of the list publish to,
// each once, in module order: the one list that `pin migrate up` and `pin
// dev` make outbox tables for, `pin kafka create-topics` and the dev broker
// create, `pin status` reads and the test harness declares
// (testbed.DeclareTopics). `pin serve` refuses to start when the modules on
// its host declare others.
func declaredTopics() []string {
	var topics []string
	for _, m := range modules() {
		for _, t := range m.topics {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
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
		return fmt.Errorf("the modules declare the topics %q, cmd/pin's module list (declaredTopics) %q: give the module's entry in modules.go its topics", hostTopics, declared)
	}
	return nil
}
