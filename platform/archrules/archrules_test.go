package archrules_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/archrules"
)

const module = "github.com/pinmarket/pin"

// TestProjectKeepsItsBoundaries is the architecture test of this repository.
func TestProjectKeepsItsBoundaries(t *testing.T) {
	t.Parallel()
	g, err := archrules.Load("../..", "./...")
	require.NoError(t, err)
	require.Contains(t, g, module+"/modules/promotion/internal/domain", "the loader must see the domain package")
	require.Contains(t, g, module+"/platform/host")
	require.Contains(t, g, module+"/modules/promotion/contract", "the contract rule must see the contract")
	require.Contains(t, g, module+"/modules/promotion/internal/promotiontest", "the test-support rule must see promotiontest")
	require.Contains(t, g, module+"/platform/schemacompattest", "the test-support rule must see the schema checker")
	require.Empty(t, archrules.Check(g, archrules.Rules(module)...))
}

// TestEachRuleCatchesAPlantedViolation builds a throw-away Go module that
// breaks every rule once and checks that each rule reports exactly its own
// violation: a rule that could never fail would fail this test.
func TestEachRuleCatchesAPlantedViolation(t *testing.T) {
	t.Parallel()
	const fake = "example.com/fake"
	dir := t.TempDir()
	files := map[string]string{
		// gorm.io/gorm and example.com/money(x) are replaced by local stubs,
		// so the imports have real-looking paths without a download;
		// moneyx shares money's prefix but is not an allowed library.
		"go.mod": "module " + fake + "\n\ngo 1.26\n\nrequire (\n\tgorm.io/gorm v1.0.0\n\texample.com/money v1.0.0\n\texample.com/moneyx v1.0.0\n)\n\n" +
			"replace gorm.io/gorm => ./stub/gorm\n\nreplace example.com/money => ./stub/money\n\nreplace example.com/moneyx => ./stub/moneyx\n",
		"stub/moneyx/go.mod":                                        "module example.com/moneyx\n\ngo 1.26\n",
		"stub/moneyx/moneyx.go":                                     "package moneyx\n",
		"stub/gorm/go.mod":                                          "module gorm.io/gorm\n\ngo 1.26\n",
		"stub/gorm/gorm.go":                                         "package gorm\n",
		"stub/money/go.mod":                                         "module example.com/money\n\ngo 1.26\n",
		"stub/money/money.go":                                       "package money\n",
		"modules/billing/contract/contract.go":                      "package contract\n",
		"modules/billing/ledger/ledger.go":                          "package ledger\n",
		"modules/promotion/contract/contract.go":                    "package contract\n\nimport _ \"" + fake + "/modules/promotion/internal/app\"\n",
		"modules/promotion/contract/gorm.go":                        "package contract\n\nimport _ \"gorm.io/gorm\"\n",
		"modules/promotion/contract/lookalike.go":                   "package contract\n\nimport _ \"example.com/moneyx\"\n",
		"modules/promotion/contract/fields.go":                      "package contract\n\nimport (\n\t_ \"example.com/money\"\n\t_ \"strings\"\n\t_ \"" + fake + "/modules/promotion/contract/v2\"\n)\n",
		"modules/promotion/contract/v2/v2.go":                       "package v2\n",
		"modules/promotion/internal/app/app.go":                     "package app\n",
		"modules/promotion/internal/app/app_test.go":                "package app\n\nimport _ \"" + fake + "/modules/promotion/internal/promotiontest\"\n",
		"modules/promotion/internal/domain/domain.go":               "package domain\n\nimport _ \"gorm.io/gorm\"\n",
		"modules/promotion/internal/ports/ports.go":                 "package ports\n\nimport _ \"" + fake + "/modules/billing/ledger\"\n",
		"modules/promotion/internal/ports/contract.go":              "package ports\n\nimport _ \"" + fake + "/modules/billing/contract\"\n",
		"modules/promotion/internal/adapters/adapters.go":           "package adapters\n\nimport _ \"" + fake + "/modules/promotion/internal/promotiontest\"\n",
		"modules/promotion/internal/promotiontest/promotiontest.go": "package promotiontest\n\nimport _ \"" + fake + "/platform/testbed\"\n",
		"platform/testbed/testbed.go":                               "package testbed\n\nimport _ \"testing\"\n",
		"platform/host/host.go":                                     "package host\n\nimport _ \"" + fake + "/modules/billing/contract\"\n",
		"platform/clean/clean.go":                                   "package clean\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	g, err := archrules.Load(dir, "./...")
	require.NoError(t, err)

	tests := []struct {
		rule archrules.Rule
		want []string
	}{
		{archrules.PlatformImportsNoModule(fake), []string{fake + "/platform/host -> " + fake + "/modules/billing/contract"}},
		{archrules.DomainIsPure(fake), []string{fake + "/modules/promotion/internal/domain -> gorm.io/gorm"}},
		{archrules.ModulesMeetOnlyThroughContracts(fake), []string{fake + "/modules/promotion/internal/ports -> " + fake + "/modules/billing/ledger"}},
		{archrules.ContractIsSelfContained(fake, "example.com/money"), []string{
			fake + "/modules/promotion/contract -> " + fake + "/modules/promotion/internal/app",
			fake + "/modules/promotion/contract -> example.com/moneyx",
			fake + "/modules/promotion/contract -> gorm.io/gorm",
		}},
		{archrules.TestSupportStaysInTests(fake), []string{
			fake + "/modules/promotion/internal/adapters -> " + fake + "/modules/promotion/internal/promotiontest",
			fake + "/modules/promotion/internal/adapters -> " + fake + "/platform/testbed",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.rule.Name, func(t *testing.T) {
			var got []string
			for _, v := range archrules.Check(g, tt.rule) {
				got = append(got, v.Package+" -> "+v.Dependency)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestDomainRuleMatchesTheRealLibraries checks the domain rule against the
// real import paths it exists for, including a transitive dependency.
func TestDomainRuleMatchesTheRealLibraries(t *testing.T) {
	t.Parallel()
	domain := module + "/modules/promotion/internal/domain"
	g := archrules.Graph{
		domain: {"gorm.io/gorm", "github.com/labstack/echo/v4", "github.com/ThreeDotsLabs/watermill/message", "github.com/google/uuid"},
		module + "/modules/promotion/internal/adapters": {"gorm.io/gorm"},
	}
	var deps []string
	for _, v := range archrules.Check(g, archrules.DomainIsPure(module)) {
		deps = append(deps, v.Dependency)
	}
	require.ElementsMatch(t, []string{"gorm.io/gorm", "github.com/labstack/echo/v4", "github.com/ThreeDotsLabs/watermill/message"}, deps)
}
