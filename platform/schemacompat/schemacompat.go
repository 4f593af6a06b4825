// Package schemacompat compares a released JSON Schema of an event contract
// with the current one by the contracts' compatibility rule: within a
// contract version only a new optional property and a new value of an open
// enum are allowed; every other difference a consumer could observe is
// breaking. It understands the subset of draft 2020-12 the contracts use
// (local $ref, properties, required, open enums written as anyOf [closed,
// open], the usual constraints) and treats any other keyword that differs as
// breaking rather than guessing.
package schemacompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
)

// Rule names one kind of breaking change.
type Rule string

// The rules, each reported with the JSON path of the field it concerns.
const (
	// PropertyRemoved: a property of the released schema is gone (removed or
	// renamed); consumers reading it find nothing.
	PropertyRemoved Rule = "property-removed"
	// PropertyMadeRequired: a property is required that was optional or did
	// not exist; released events lack it.
	PropertyMadeRequired Rule = "property-made-required"
	// PropertyMadeOptional: a required property became optional; consumers
	// relying on it receive events without it.
	PropertyMadeOptional Rule = "property-made-optional"
	// TypeChanged: the set of JSON types differs, in either direction
	// (integer to number lets a producer send 1.5 to a consumer reading int64).
	TypeChanged Rule = "type-changed"
	// EnumValueRemoved: a value listed by the released schema is not listed
	// any more.
	EnumValueRemoved Rule = "enum-value-removed"
	// ConstChanged: a const holds another value.
	ConstChanged Rule = "const-changed"
	// ConstraintNarrowed: a released event may fail the new constraint
	// (format or pattern added or changed, minimum raised, maximum lowered,
	// a length or item bound tightened, a const or enum added…).
	ConstraintNarrowed Rule = "constraint-narrowed"
	// ConstraintWidened: the producer may now send what consumers validating
	// with the released schema reject (a bound relaxed or dropped, a format
	// or pattern dropped, a closed enum extended).
	ConstraintWidened Rule = "constraint-widened"
	// AdditionalPropertiesClosed: an object no longer admits properties it
	// does not list, so a consumer-side schema stops tolerating additions.
	AdditionalPropertiesClosed Rule = "additional-properties-closed"
	// SchemaChanged: a keyword the checker does not model, or the shape of a
	// composition (anyOf/oneOf/allOf branches), differs.
	SchemaChanged Rule = "schema-changed"
)

// Violation is one breaking difference.
type Violation struct {
	Rule Rule
	// Path is the field in the event, e.g. $.payload.targets[*].targetKind.
	Path   string
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at %s: %s", v.Rule, v.Path, v.Detail)
}

// Check compares the current schema with the released one and returns every
// breaking difference, in a stable order. An error means a schema could not
// be read (not JSON, or a $ref the checker cannot follow).
func Check(released, current []byte) ([]Violation, error) {
	oldDoc, err := parse(released)
	if err != nil {
		return nil, fmt.Errorf("schemacompat: released schema: %w", err)
	}
	newDoc, err := parse(current)
	if err != nil {
		return nil, fmt.Errorf("schemacompat: current schema: %w", err)
	}
	w := &walker{old: oldDoc, cur: newDoc, seen: map[[2]string]bool{}}
	w.compare("$", oldDoc, newDoc, false)
	if w.err != nil {
		return nil, w.err
	}
	return w.out, nil
}

// parse reads a schema keeping numbers exact (999999999999.99 stays text).
func parse(data []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	m, ok := asSchema(v)
	if !ok {
		return nil, fmt.Errorf("not a JSON Schema object")
	}
	return m, nil
}

// annotations carry no validation; editing them is never breaking. $defs is
// reached through $ref, where it is used.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "$comment": true, "default": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "$id": true, "$defs": true,
}

// Lower and upper bounds: which way a change narrows.
var (
	lowerBounds = []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"}
	upperBounds = []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"}
	// exact constraints narrow when added or changed and widen when dropped.
	exact = []string{"format", "pattern", "not"}
)

// modelled are the keywords compare understands; any other that differs is
// reported as SchemaChanged.
var modelled = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range slices.Concat(lowerBounds, upperBounds, exact, []string{"$ref", "type", "const", "enum",
		"properties", "required", "additionalProperties", "unevaluatedProperties", "multipleOf", "uniqueItems",
		"items", "anyOf", "oneOf", "allOf"}) {
		m[k] = true
	}
	return m
}()

type walker struct {
	old, cur map[string]any
	seen     map[[2]string]bool
	out      []Violation
	err      error
}

func (w *walker) report(rule Rule, path, format string, args ...any) {
	w.out = append(w.out, Violation{Rule: rule, Path: path, Detail: fmt.Sprintf(format, args...)})
}

// compare walks one released node and the current node at the same place.
// openEnum is set in the first branch of an open value (anyOf [closed, open]),
// where a new enum value is additive.
func (w *walker) compare(path string, o, c map[string]any, openEnum bool) {
	if w.err != nil {
		return
	}
	o, oref, err := resolve(w.old, o)
	if err != nil {
		w.err = fmt.Errorf("schemacompat: released schema at %s: %w", path, err)
		return
	}
	c, cref, err := resolve(w.cur, c)
	if err != nil {
		w.err = fmt.Errorf("schemacompat: current schema at %s: %w", path, err)
		return
	}
	if oref != "" || cref != "" {
		key := [2]string{oref, cref}
		if w.seen[key] {
			return // a recursive definition already being compared
		}
		w.seen[key] = true
		defer delete(w.seen, key)
	}

	w.compareType(path, o, c)
	w.compareConst(path, o, c)
	w.compareEnum(path, o, c, openEnum)
	w.compareProperties(path, o, c)
	w.compareAdditional(path, "additionalProperties", o, c)
	w.compareAdditional(path, "unevaluatedProperties", o, c)
	w.compareConstraints(path, o, c)
	w.compareMultipleOf(path, o, c)
	w.compareUniqueItems(path, o, c)
	if oi, ci, ok := bothSchemas(o["items"], c["items"]); ok {
		w.compare(path+"[*]", oi, ci, false)
	} else if !reflect.DeepEqual(o["items"], c["items"]) {
		w.report(SchemaChanged, path, "items changed from %s to %s", show(o["items"]), show(c["items"]))
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		w.compareBranches(path, k, o[k], c[k])
	}
	for _, k := range sortedKeys(o, c) {
		if modelled[k] || annotations[k] || reflect.DeepEqual(o[k], c[k]) {
			continue
		}
		w.report(SchemaChanged, path, "%s changed from %s to %s; the checker cannot tell whether consumers notice, so it counts as breaking", k, show(o[k]), show(c[k]))
	}
}

func (w *walker) compareType(path string, o, c map[string]any) {
	ot, ct := typeSet(o["type"]), typeSet(c["type"])
	if !slices.Equal(ot, ct) {
		w.report(TypeChanged, path, "type %s became %s", showTypes(ot), showTypes(ct))
	}
}

func (w *walker) compareConst(path string, o, c map[string]any) {
	ov, ook := o["const"]
	cv, cok := c["const"]
	switch {
	case ook && cok && !reflect.DeepEqual(ov, cv):
		w.report(ConstChanged, path, "const %s became %s", show(ov), show(cv))
	case !ook && cok:
		w.report(ConstraintNarrowed, path, "const %s added", show(cv))
	case ook && !cok:
		w.report(ConstraintWidened, path, "const %s dropped", show(ov))
	}
}

func (w *walker) compareEnum(path string, o, c map[string]any, openEnum bool) {
	ov, ook := o["enum"].([]any)
	cv, cok := c["enum"].([]any)
	if !ook && !cok {
		return
	}
	if !ook {
		w.report(ConstraintNarrowed, path, "enum %s added", show(cv))
		return
	}
	for _, v := range ov {
		if !containsValue(cv, v) {
			w.report(EnumValueRemoved, path, "value %s removed", show(v))
		}
	}
	if !cok || openEnum {
		return
	}
	for _, v := range cv {
		if !containsValue(ov, v) {
			w.report(ConstraintWidened, path, "value %s added to a closed enum (only an open enum, anyOf [closed, open], may grow)", show(v))
		}
	}
}

func (w *walker) compareProperties(path string, o, c map[string]any) {
	op, _ := o["properties"].(map[string]any)
	cp, _ := c["properties"].(map[string]any)
	oreq, creq := stringSet(o["required"]), stringSet(c["required"])
	removed := map[string]bool{}
	for _, name := range sortedKeys(op, cp) {
		child := path + "." + name
		ov, inOld := op[name]
		cv, inNew := cp[name]
		switch {
		case inOld && !inNew:
			removed[name] = true
			w.report(PropertyRemoved, child, "property removed (a rename is a removal); consumers reading it find nothing")
		case inOld && inNew:
			if os, cs, ok := bothSchemas(ov, cv); ok {
				w.compare(child, os, cs, false)
			} else if !reflect.DeepEqual(ov, cv) {
				w.report(SchemaChanged, child, "schema %s became %s", show(ov), show(cv))
			}
		}
	}
	for _, name := range sortedKeys(boolMap(oreq), boolMap(creq)) {
		child := path + "." + name
		switch {
		case creq[name] && !oreq[name]:
			w.report(PropertyMadeRequired, child, "required now; released events may lack it (a new property must be optional)")
		case oreq[name] && !creq[name] && !removed[name]:
			w.report(PropertyMadeOptional, child, "optional now; consumers rely on its presence")
		}
	}
}

// compareAdditional checks additionalProperties or unevaluatedProperties:
// absent or true is open, a schema constrains, false is closed.
func (w *walker) compareAdditional(path, key string, o, c map[string]any) {
	ov, cv := o[key], c[key]
	openness := func(v any) int {
		switch v {
		case nil, true:
			return 2
		case false:
			return 0
		}
		return 1
	}
	switch oo, co := openness(ov), openness(cv); {
	case co < oo:
		w.report(AdditionalPropertiesClosed, path, "%s was %s and is %s now; consumers must tolerate fields an additive revision adds", key, show(ov), show(cv))
	case co > oo:
		w.report(ConstraintWidened, path, "%s %s became %s", key, show(ov), show(cv))
	case co == 1:
		if os, cs, ok := bothSchemas(ov, cv); ok {
			w.compare(path+".*", os, cs, false)
		}
	}
}

// compareConstraints checks the bounds and the exact-match constraints.
func (w *walker) compareConstraints(path string, o, c map[string]any) {
	bound := func(k string, lower bool) {
		ov, ook := number(o[k])
		cv, cok := number(c[k])
		switch {
		case !ook && cok:
			w.report(ConstraintNarrowed, path, "%s %s added", k, cv.RatString())
		case ook && !cok:
			w.report(ConstraintWidened, path, "%s %s dropped", k, ov.RatString())
		case ook && cok && ov.Cmp(cv) != 0:
			raised := cv.Cmp(ov) > 0
			rule, verb := ConstraintWidened, "lowered"
			if raised {
				verb = "raised"
			}
			if raised == lower {
				rule = ConstraintNarrowed
			}
			w.report(rule, path, "%s %s from %s to %s", k, verb, ov.RatString(), cv.RatString())
		}
	}
	for _, k := range lowerBounds {
		bound(k, true)
	}
	for _, k := range upperBounds {
		bound(k, false)
	}
	for _, k := range exact {
		ov, ook := o[k]
		cv, cok := c[k]
		switch {
		case !ook && cok:
			w.report(ConstraintNarrowed, path, "%s %s added", k, show(cv))
		case ook && !cok:
			w.report(ConstraintWidened, path, "%s %s dropped", k, show(ov))
		case ook && cok && !reflect.DeepEqual(ov, cv):
			w.report(ConstraintNarrowed, path, "%s %s changed to %s", k, show(ov), show(cv))
		}
	}
}

// compareMultipleOf: a new step that divides the old one admits more values.
func (w *walker) compareMultipleOf(path string, o, c map[string]any) {
	ov, ook := number(o["multipleOf"])
	cv, cok := number(c["multipleOf"])
	switch {
	case !ook && cok:
		w.report(ConstraintNarrowed, path, "multipleOf %s added", cv.RatString())
	case ook && !cok:
		w.report(ConstraintWidened, path, "multipleOf %s dropped", ov.RatString())
	case ook && cok && ov.Cmp(cv) != 0:
		if new(big.Rat).Quo(ov, cv).IsInt() {
			w.report(ConstraintWidened, path, "multipleOf %s became %s", ov.RatString(), cv.RatString())
		} else {
			w.report(ConstraintNarrowed, path, "multipleOf %s became %s", ov.RatString(), cv.RatString())
		}
	}
}

func (w *walker) compareUniqueItems(path string, o, c map[string]any) {
	ov, cv := o["uniqueItems"] == true, c["uniqueItems"] == true
	switch {
	case !ov && cv:
		w.report(ConstraintNarrowed, path, "uniqueItems added")
	case ov && !cv:
		w.report(ConstraintWidened, path, "uniqueItems dropped")
	}
}

// compareBranches compares composition branches position by position; the
// first branch of an open value is where new enum values go.
func (w *walker) compareBranches(path, key string, ov, cv any) {
	if ov == nil && cv == nil {
		return
	}
	ob, _ := ov.([]any)
	cb, _ := cv.([]any)
	if len(ob) != len(cb) {
		w.report(SchemaChanged, path, "%s had %d branches and has %d now", key, len(ob), len(cb))
		return
	}
	open := key == "anyOf" && isOpenValue(ob) && isOpenValue(cb)
	for i := range ob {
		os, cs, ok := bothSchemas(ob[i], cb[i])
		if !ok {
			if !reflect.DeepEqual(ob[i], cb[i]) {
				w.report(SchemaChanged, path, "%s[%d] changed", key, i)
			}
			continue
		}
		w.compare(path, os, cs, open && i == 0)
	}
}

// isOpenValue reports whether branches are [closed list, open type]: the
// first holds enum or const, a later one admits any value of a type.
func isOpenValue(branches []any) bool {
	if len(branches) < 2 {
		return false
	}
	first, ok := branches[0].(map[string]any)
	if !ok || (first["enum"] == nil && first["const"] == nil) {
		return false
	}
	for _, b := range branches[1:] {
		if m, ok := b.(map[string]any); ok && m["type"] != nil && m["enum"] == nil && m["const"] == nil {
			return true
		}
	}
	return false
}

// resolve follows a local $ref (#/…) and merges the referencing node's own
// keywords over the target, returning the target's pointer ("" when none).
func resolve(root, n map[string]any) (map[string]any, string, error) {
	ref, ok := n["$ref"].(string)
	if !ok {
		return n, "", nil
	}
	var chain []string
	for ok {
		if !strings.HasPrefix(ref, "#") {
			return nil, "", fmt.Errorf("$ref %q: only references inside the schema (#/…) are supported", ref)
		}
		if slices.Contains(chain, ref) {
			return nil, "", fmt.Errorf("$ref %q refers to itself", ref)
		}
		chain = append(chain, ref)
		target, err := pointer(root, strings.TrimPrefix(ref, "#"))
		if err != nil {
			return nil, "", fmt.Errorf("$ref %q: %w", ref, err)
		}
		merged := make(map[string]any, len(target)+len(n))
		for k, v := range target {
			merged[k] = v
		}
		for k, v := range n {
			if k != "$ref" {
				merged[k] = v
			}
		}
		n = merged
		ref, ok = target["$ref"].(string)
	}
	return n, chain[0], nil
}

// pointer follows a JSON Pointer (RFC 6901) from root to a schema.
func pointer(root map[string]any, ptr string) (map[string]any, error) {
	var node any = root
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := node.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not an object", tok)
			}
			if node, ok = m[tok]; !ok {
				return nil, fmt.Errorf("no %s", tok)
			}
		}
	}
	s, ok := asSchema(node)
	if !ok {
		return nil, fmt.Errorf("not a schema")
	}
	return s, nil
}

// asSchema turns a schema value into its object form: true is {}, false is
// {"not": {}}.
func asSchema(v any) (map[string]any, bool) {
	switch s := v.(type) {
	case map[string]any:
		return s, true
	case bool:
		if s {
			return map[string]any{}, true
		}
		return map[string]any{"not": map[string]any{}}, true
	}
	return nil, false
}

func bothSchemas(o, c any) (map[string]any, map[string]any, bool) {
	os, ok1 := asSchema(o)
	cs, ok2 := asSchema(c)
	return os, cs, ok1 && ok2
}

func typeSet(v any) []string {
	var out []string
	switch t := v.(type) {
	case string:
		out = []string{t}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

func showTypes(ts []string) string {
	if len(ts) == 0 {
		return "(any)"
	}
	return `"` + strings.Join(ts, `", "`) + `"`
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	list, _ := v.([]any)
	for _, e := range list {
		if s, ok := e.(string); ok {
			out[s] = true
		}
	}
	return out
}

func boolMap(m map[string]bool) map[string]any {
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(n.String())
	return r, ok
}

func containsValue(list []any, v any) bool {
	return slices.ContainsFunc(list, func(e any) bool { return reflect.DeepEqual(e, v) })
}

func sortedKeys(maps ...map[string]any) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// show renders a schema value for a message.
func show(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
