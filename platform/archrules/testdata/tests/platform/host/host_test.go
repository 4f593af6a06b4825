package host_test

// Planted: the platform's test reaches a module.
import _ "example.com/fake/modules/billing"
