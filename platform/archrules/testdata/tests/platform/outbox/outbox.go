package outbox
