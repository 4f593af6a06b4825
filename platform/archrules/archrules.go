// Package archrules makes the monolith's boundaries executable: it loads the
// import graph with `go list -deps` and checks it against the rules below.
// The rules are tested against planted violations, so a rule that can never
// fail would be noticed.
package archrules

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

// Graph maps each package of the module to every package it depends on,
// directly or not (as `go list -deps` reports them).
type Graph map[string][]string

// Load lists the packages matching patterns in dir and their dependencies.
func Load(dir string, patterns ...string) (Graph, error) {
	return goList(dir, `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, patterns)
}

// LoadTests lists, for each package matching patterns in dir, the packages
// its test files import (in-package and external tests together; none for
// a package without tests). Only direct imports: what a test reaches through a
// test-support package is that package's, which Load's graph holds.
func LoadTests(dir string, patterns ...string) (Graph, error) {
	return goList(dir, `{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, patterns)
}

// goList runs `go list -f format` over patterns in dir, whose template
// prints a package and the packages it maps to on one line, and reads the
// lines into a Graph.
func goList(dir, format string, patterns []string) (Graph, error) {
	cmd := exec.Command("go", append([]string{"list", "-f", format}, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("archrules: go list in %s: %w: %s", dir, err, stderr.String())
	}
	g := Graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 {
			g[fields[0]] = fields[1:]
		}
	}
	return g, sc.Err()
}

// Violation is one forbidden dependency.
type Violation struct {
	Rule       string
	Package    string
	Dependency string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s depends on %s", v.Rule, v.Package, v.Dependency)
}

// Rule is one boundary: Check reports whether pkg may not depend on dep.
type Rule struct {
	Name  string
	Check func(pkg, dep string) bool // true = forbidden
}

// Check applies rules to every package of g.
func Check(g Graph, rules ...Rule) []Violation {
	var out []Violation
	for pkg, deps := range g {
		for _, dep := range deps {
			for _, r := range rules {
				if r.Check(pkg, dep) {
					out = append(out, Violation{Rule: r.Name, Package: pkg, Dependency: dep})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// under reports whether pkg is prefix or inside it.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// PlatformImportsNoModule forbids platform/** from depending on modules/**:
// the host serves modules, it never knows them.
func PlatformImportsNoModule(module string) Rule {
	return Rule{
		Name: "platform imports no module",
		Check: func(pkg, dep string) bool {
			return under(pkg, module+"/platform") && under(dep, module+"/modules")
		},
	}
}

// forbiddenInDomain are the infrastructure libraries a domain package must
// not reach, directly or through another package.
var forbiddenInDomain = []string{
	"gorm.io",
	"github.com/labstack/echo",
	"github.com/ThreeDotsLabs/watermill",
}

// DomainIsPure forbids modules/*/internal/domain from depending on GORM,
// Echo or Watermill.
func DomainIsPure(module string) Rule {
	return layerAvoids(module, "domain", "domain imports no GORM, Echo or Watermill", forbiddenInDomain)
}

// layerAvoids forbids modules/*/internal/<layer> (and the packages under
// it) from depending on the libraries, directly or through another package.
func layerAvoids(module, layer, name string, libraries []string) Rule {
	return Rule{
		Name: name,
		Check: func(pkg, dep string) bool {
			if !strings.HasPrefix(pkg, module+"/modules/") || !strings.Contains(pkg+"/", "/internal/"+layer+"/") {
				return false
			}
			for _, l := range libraries {
				if under(dep, l) {
					return true
				}
			}
			return false
		},
	}
}

// forbiddenInApp are the telemetry libraries a use case must not reach: it
// declares what it reports (an observer), and ports implement that with them.
var forbiddenInApp = []string{
	"github.com/prometheus",
	"go.opentelemetry.io",
}

// AppReportsThroughPorts forbids modules/*/internal/app from depending on
// Prometheus or OpenTelemetry, directly or through another package.
func AppReportsThroughPorts(module string) Rule {
	return layerAvoids(module, "app", "app imports no Prometheus or OpenTelemetry", forbiddenInApp)
}

// ExpiryReportsThroughItsObserver forbids modules/*/internal/expiry, the
// expiry cycle, from depending on Prometheus or OpenTelemetry: it reports
// through ExpireObserver, which its telemetry subpackage implements.
func ExpiryReportsThroughItsObserver(module string) Rule {
	return Rule{
		Name: "the expiry cycle imports no Prometheus or OpenTelemetry",
		Check: func(pkg, dep string) bool {
			rest, ok := strings.CutPrefix(pkg, module+"/modules/")
			if !ok || !strings.HasSuffix(rest, "/internal/expiry") || strings.Count(rest, "/") != 2 {
				return false
			}
			return slices.ContainsFunc(forbiddenInApp, func(l string) bool { return under(dep, l) })
		},
	}
}

// ModulesMeetOnlyThroughContracts forbids a package of one module from
// depending on another module other than through its contract package.
func ModulesMeetOnlyThroughContracts(module string) Rule {
	root := module + "/modules/"
	name := func(pkg string) string {
		rest, ok := strings.CutPrefix(pkg, root)
		if !ok {
			return ""
		}
		return strings.SplitN(rest, "/", 2)[0]
	}
	return Rule{
		Name: "modules meet only through contract packages",
		Check: func(pkg, dep string) bool {
			from, to := name(pkg), name(dep)
			if from == "" || to == "" || from == to {
				return false
			}
			return !under(dep, root+to+"/contract")
		},
	}
}

// ContractLibraries are the only libraries a contract package may pull into
// a consumer's build: the types its fields are made of.
var ContractLibraries = []string{
	"github.com/google/uuid",
	"github.com/shopspring/decimal",
}

// ContractIsSelfContained forbids a module's contract package, which other
// modules import, from depending on anything but the standard library, its
// own contract packages and libraries: the rest of its module, the platform,
// GORM or Watermill would leak the producer's implementation into every
// consumer.
func ContractIsSelfContained(module string, libraries ...string) Rule {
	return Rule{
		Name: "contract depends only on the standard library and the types of its fields",
		Check: func(pkg, dep string) bool {
			rest, ok := strings.CutPrefix(pkg, module+"/modules/")
			if !ok {
				return false
			}
			parts := strings.SplitN(rest, "/", 3)
			if len(parts) < 2 || parts[1] != "contract" {
				return false
			}
			if isStandard(dep) || under(dep, module+"/modules/"+parts[0]+"/contract") {
				return false
			}
			for _, l := range libraries {
				if under(dep, l) {
					return false
				}
			}
			return true
		},
	}
}

// isStandard reports whether dep belongs to the standard library, whose
// paths alone have no dot in their first element.
func isStandard(dep string) bool {
	first, _, _ := strings.Cut(dep, "/")
	return !strings.Contains(first, ".")
}

// isTestSupport reports whether pkg is a test-support package: by this
// project's convention its name ends in "test" (promotiontest) or is testbed.
func isTestSupport(pkg string) bool {
	name := pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.HasSuffix(name, "test") || name == "testbed"
}

// TestSupportStaysInTests forbids code that ships from depending on a
// test-support package: those import package testing and fail through
// testing.TB. Test files are not in the graph, and test-support packages may
// use each other.
func TestSupportStaysInTests(module string) Rule {
	return Rule{
		Name: "only tests and test support depend on test support",
		Check: func(pkg, dep string) bool {
			return under(pkg, module) && !isTestSupport(pkg) && under(dep, module) && isTestSupport(dep)
		},
	}
}

// ModulesWriteOnlyToTheOutbox forbids a module from depending on any room of
// the outbox but its write API (platform/outbox): the relay and the
// dead-letter administration are the host's and the operators'. The rooms'
// shared store is internal to platform/outbox, which the compiler enforces.
func ModulesWriteOnlyToTheOutbox(module string) Rule {
	return Rule{
		Name: "modules depend only on the outbox's write API",
		Check: func(pkg, dep string) bool {
			return under(pkg, module+"/modules") && outboxRoom(module, dep)
		},
	}
}

// OutboxWriteAPIStandsAlone forbids the outbox's write API from depending on
// its other rooms, so a module that publishes builds no relay.
func OutboxWriteAPIStandsAlone(module string) Rule {
	return Rule{
		Name: "the outbox's write API depends on no other room of the outbox",
		Check: func(pkg, dep string) bool {
			return pkg == module+"/platform/outbox" && outboxRoom(module, dep)
		},
	}
}

// outboxRoom reports whether dep is a room of the outbox other than its
// write API and its internal store.
func outboxRoom(module, dep string) bool {
	root := module + "/platform/outbox"
	return strings.HasPrefix(dep, root+"/") && !under(dep, root+"/internal")
}

// ModulesUseOnlyTheConsumerKit forbids a module from depending on a room of
// the consumer kit other than the kit itself (platform/consumer: the
// Runner, the handler types, the Replayer) and the inbox the kit runs: the
// dead-letter administration is the operators'. The rooms' shared store is
// internal to platform/consumer, which the compiler enforces.
func ModulesUseOnlyTheConsumerKit(module string) Rule {
	return Rule{
		Name: "modules depend only on the consumer kit",
		Check: func(pkg, dep string) bool {
			return under(pkg, module+"/modules") && consumerRoom(module, dep)
		},
	}
}

// ConsumerKitStandsApart forbids the consumer kit and its inbox from
// depending on the kit's other rooms, and the inbox from depending on the
// kit, so a consuming module builds no dead-letter administration and the
// inbox stays a room below the runner.
func ConsumerKitStandsApart(module string) Rule {
	root := module + "/platform/consumer"
	return Rule{
		Name: "the consumer kit and its inbox depend on no other room of the kit",
		Check: func(pkg, dep string) bool {
			return (pkg == root || pkg == root+"/inbox") && consumerRoom(module, dep) ||
				pkg == root+"/inbox" && dep == root
		},
	}
}

// consumerRoom reports whether dep is a room of the consumer kit other than
// the kit, its inbox and its internal store.
func consumerRoom(module, dep string) bool {
	root := module + "/platform/consumer"
	return strings.HasPrefix(dep, root+"/") && !under(dep, root+"/internal") && !under(dep, root+"/inbox")
}

// DeadLetterAdminKnowsNoSide forbids the shared dead-letter administration
// (platform/deadletter) from depending on the outbox or the consumer kit:
// both sides' rooms use it, so it must know neither.
func DeadLetterAdminKnowsNoSide(module string) Rule {
	return Rule{
		Name: "the dead-letter administration depends on neither side",
		Check: func(pkg, dep string) bool {
			return pkg == module+"/platform/deadletter" &&
				(under(dep, module+"/platform/outbox") || under(dep, module+"/platform/consumer"))
		},
	}
}

// TestRules returns the rules that hold for test files too, to check
// against LoadTests' graph. A module's test may use what the module may
// use, and test support besides: a test-support package of the outbox or
// the consumer kit (outboxtest) runs the host's rooms as the host would, so
// a module's end-to-end test sees its events leave without reaching into
// the relay or the dead-letter administration itself. The other rules do
// not apply to tests: a contract's tests pull test libraries that never
// reach a consumer's build, test support belongs in tests, a module's test
// may drive another module to judge its events end to end, a use case's
// test reads its observer's reports through the ports' Prometheus
// registry, and the platform's rooms are tested together.
func TestRules(module string) []Rule {
	return []Rule{
		PlatformImportsNoModule(module),
		DomainIsPure(module),
		exceptTestSupport(ModulesWriteOnlyToTheOutbox(module)),
		exceptTestSupport(ModulesUseOnlyTheConsumerKit(module)),
	}
}

// exceptTestSupport is r for test files: a dependency on a test-support
// package is allowed.
func exceptTestSupport(r Rule) Rule {
	return Rule{
		Name: r.Name + " (test files: and its test support)",
		Check: func(pkg, dep string) bool {
			return !isTestSupport(dep) && r.Check(pkg, dep)
		},
	}
}

// Rules returns every rule of the project for the Go module path module.
func Rules(module string) []Rule {
	return []Rule{
		PlatformImportsNoModule(module),
		DomainIsPure(module),
		AppReportsThroughPorts(module),
		ExpiryReportsThroughItsObserver(module),
		ModulesMeetOnlyThroughContracts(module),
		ContractIsSelfContained(module, ContractLibraries...),
		TestSupportStaysInTests(module),
		ModulesWriteOnlyToTheOutbox(module),
		OutboxWriteAPIStandsAlone(module),
		ModulesUseOnlyTheConsumerKit(module),
		ConsumerKitStandsApart(module),
		DeadLetterAdminKnowsNoSide(module),
	}
}
