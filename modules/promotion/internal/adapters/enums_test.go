package adapters

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/contract"
	"github.com/pinmarket/pin/modules/promotion/internal/domain"
)

// TestDomainEnumsAreTheContracts: the domain's enums and the contract's
// are two lists on purpose (domain/kinds.go says why); every domain value
// maps to the contract value of the same spelling, and the mapped values
// are exactly the JSON Schema's enum, so neither side gains a value alone.
func TestDomainEnumsAreTheContracts(t *testing.T) {
	t.Parallel()
	var schema struct {
		Defs map[string]struct {
			AnyOf []struct {
				Enum []string `json:"enum"`
			} `json:"anyOf"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(contract.JSONSchema(), &schema))
	check := func(name string, domainValues []string, toContract func(string) (string, error)) {
		t.Helper()
		var mapped []string
		for _, v := range domainValues {
			c, err := toContract(v)
			require.NoError(t, err, "%s %q", name, v)
			require.Equal(t, v, c, "%s %q keeps its spelling on the wire", name, v)
			mapped = append(mapped, c)
		}
		require.ElementsMatch(t, schema.Defs[name].AnyOf[0].Enum, mapped, "%s: the domain's values are the contract's", name)
	}
	check("Status", asStrings(domain.Statuses), func(v string) (string, error) {
		c, err := toContractStatus(domain.Status(v))
		return string(c), err
	})
	check("PaymentStatus", asStrings(domain.PaymentStatuses), func(v string) (string, error) {
		c, err := toContractPaymentStatus(domain.PaymentStatus(v))
		return string(c), err
	})
	check("PackageKind", asStrings(domain.PackageKinds), func(v string) (string, error) {
		c, err := toContractPackageKind(domain.PackageKind(v))
		return string(c), err
	})
	check("TargetKind", asStrings(domain.TargetKinds), func(v string) (string, error) {
		c, err := toContractTargetKind(domain.TargetKind(v))
		return string(c), err
	})
}

func asStrings[S ~string](values []S) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
