package ports

// Planted: a module's test runs the consumer kit's dead-letter administration.
import _ "example.com/fake/platform/consumer/deadletters"
