//go:build pintestmodules

package main

import (
	"github.com/pinmarket/pin/cmd/pin/testdata/modules/reviews"
	"github.com/pinmarket/pin/platform/host"
)

// A build with -tags pintestmodules (make test, make lint) hosts the
// test-only modules too, registered as any module is.
func init() {
	testOnlyModules = append(testOnlyModules, moduleEntry{
		name:   reviews.Name,
		topics: []string{reviews.Topic},
		build: func(p *platform, hd hostDeps) (host.Module, error) {
			return reviews.New(reviews.Deps{DB: p.apiDB, Outbox: hd.outbox, Authenticate: hd.authenticate})
		},
	})
}
