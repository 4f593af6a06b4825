module github.com/pinmarket/pin/modules/promotion/contract

go 1.26.0

toolchain go1.26.11

require (
	github.com/google/uuid v1.6.0
	github.com/pinmarket/pin/platform/schemacompat v0.0.0-00010101000000-000000000000
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/shopspring/decimal v1.6.0
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.6
)

require golang.org/x/text v0.14.0 // indirect

// The schema compatibility gate, a Go module of its own in platform/ so that
// any module's contract can take it.
replace github.com/pinmarket/pin/platform/schemacompat => ../../../platform/schemacompat
