package consumer
