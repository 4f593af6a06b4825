package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
)

// TopicPartitions is the partition count of the module's topics in every
// environment: keys are spread by murmur2 over exactly this many, so
// changing it moves keys between partitions (see docs/event-pipeline.md).
const TopicPartitions = 3

// Topic is a topic the service needs, as it must exist on the cluster.
type Topic struct {
	Name       string
	Partitions int32
}

// TopicState is what the cluster holds for a topic: Partitions is 0 when
// the topic does not exist.
type TopicState struct {
	Name       string
	Partitions int32
}

// CreateOptions are the settings of topics CreateTopics creates; an
// existing topic is never altered.
type CreateOptions struct {
	ReplicationFactor int16
	Retention         time.Duration
}

// TopicResult is what CreateTopics did for one topic.
type TopicResult struct {
	Topic
	// Created is false when the topic already existed.
	Created bool
	// Found is the partition count of an existing topic.
	Found int32
}

// ErrPartitionCount is returned (wrapped) by CreateTopics when a topic
// exists with another partition count than the service needs.
var ErrPartitionCount = errors.New("kafka: topic has the wrong partition count")

// AdminConfig is the Sarama configuration of the service's administrative
// clients (topic creation and checks), with sec applied.
func AdminConfig(clientID string, sec Security) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V2_1_0_0
	setNetworkDefaults(c)
	// Sarama's admin finds the controller through a full metadata request;
	// with ACLs it lists only the topics the user may describe.
	c.Metadata.Full = true
	c.Metadata.AllowAutoTopicCreation = false
	c.Admin.Timeout = 10 * time.Second
	sec.Apply(c)
	return c
}

// DescribeTopics returns the partition count of each topic, 0 for a topic
// that does not exist. A topic the broker refuses to describe is left out
// and named in the error, beside the states of the others.
func DescribeTopics(brokers []string, sec Security, names []string) ([]TopicState, error) {
	admin, err := sarama.NewClusterAdmin(brokers, AdminConfig("pin-topic-check", sec))
	if err != nil {
		return nil, fmt.Errorf("kafka: connect: %w", err)
	}
	defer admin.Close()
	return describe(admin, names)
}

func describe(admin sarama.ClusterAdmin, names []string) ([]TopicState, error) {
	metas, err := admin.DescribeTopics(names)
	if err != nil {
		return nil, fmt.Errorf("kafka: describe topics: %w", err)
	}
	byName := make(map[string]*sarama.TopicMetadata, len(metas))
	for _, m := range metas {
		byName[m.Name] = m
	}
	// A topic the broker will not describe (its ACLs) is an error of its
	// own: the other topics are still reported.
	states := make([]TopicState, 0, len(names))
	var failed []error
	for _, name := range names {
		m := byName[name]
		switch {
		case m == nil || errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition):
			states = append(states, TopicState{Name: name})
		case m.Err != sarama.ErrNoError:
			failed = append(failed, fmt.Errorf("kafka: describe topic %s: %w", name, m.Err))
		default:
			states = append(states, TopicState{Name: name, Partitions: int32(len(m.Partitions))})
		}
	}
	return states, errors.Join(failed...)
}

// CreateTopics creates each topic that does not exist yet with opts and
// reports what it did. It is idempotent: an existing topic is left as it is,
// and one with another partition count is reported with ErrPartitionCount.
func CreateTopics(brokers []string, sec Security, topics []Topic, opts CreateOptions) ([]TopicResult, error) {
	admin, err := sarama.NewClusterAdmin(brokers, AdminConfig("pin-create-topics", sec))
	if err != nil {
		return nil, fmt.Errorf("kafka: connect: %w", err)
	}
	defer admin.Close()

	results := make([]TopicResult, 0, len(topics))
	var wrong error
	for _, t := range topics {
		res, err := createTopic(admin, t, opts)
		if err != nil {
			return results, err
		}
		if !res.Created && res.Found != t.Partitions {
			wrong = errors.Join(wrong, fmt.Errorf("%w: %s has %d partitions, needs %d", ErrPartitionCount, t.Name, res.Found, t.Partitions))
		}
		results = append(results, res)
	}
	return results, wrong
}

func createTopic(admin sarama.ClusterAdmin, t Topic, opts CreateOptions) (TopicResult, error) {
	states, err := describe(admin, []string{t.Name})
	if err != nil {
		return TopicResult{}, err
	}
	if states[0].Partitions > 0 {
		return TopicResult{Topic: t, Found: states[0].Partitions}, nil
	}
	retention := strconv.FormatInt(opts.Retention.Milliseconds(), 10)
	err = admin.CreateTopic(t.Name, &sarama.TopicDetail{
		NumPartitions:     t.Partitions,
		ReplicationFactor: opts.ReplicationFactor,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}, false)
	if errors.Is(err, sarama.ErrTopicAlreadyExists) {
		// Created meanwhile by another run: report what is there.
		states, err = describe(admin, []string{t.Name})
		if err != nil {
			return TopicResult{}, err
		}
		return TopicResult{Topic: t, Found: states[0].Partitions}, nil
	}
	if err != nil {
		return TopicResult{}, fmt.Errorf("kafka: create topic %s: %w", t.Name, err)
	}
	return TopicResult{Topic: t, Created: true}, nil
}
