package yamlpos

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// UnknownFieldFunc is called for a mapping key that matches no field of the target type.
// path is the key's path relative to the document; key and value are the YAML nodes.
type UnknownFieldFunc func(path *field.Path, key, value *yaml.Node)

// Decoder fills Go values from YAML documents. The zero value is strict: an unknown field
// is an error.
//
// Field names come from `json` tags (the names Kubernetes types use; fields tagged "-"
// are never decoded, anonymous struct fields without a name are inlined as encoding/json
// does). Matching is case-sensitive. Scalars must have the YAML type of the Go field:
// `port: "80"` into an int32 is an error, as is `name: 80` into a string (as the
// Kubernetes API server does). A type that implements json.Unmarshaler (such as
// intstr.IntOrString or resource.Quantity) receives its value converted to JSON. A field
// of type *yaml.Node receives the node itself, for callers that decode it later. A null
// value leaves the field untouched. Merge keys (`<<`) are not supported.
type Decoder struct {
	// OnUnknownField, when set, is called for each unknown field instead of reporting an
	// error (lenient decoding).
	OnUnknownField UnknownFieldFunc
	// Shared, when set, is shared with the other decodes of the same file: one work
	// budget for all of them (aliases cannot multiply the work across the file's values)
	// and one cache of struct layouts. Nil: each Decode has its own.
	Shared *Shared
}

// Shared is what the decodes of one file share: the work budget (values visited, aliases
// expanded) and the layouts of the struct types decoded so far. It is not safe for
// concurrent use.
type Shared struct {
	budget int
	fields map[reflect.Type]map[string]fieldInfo
	rest   map[reflect.Type][]int
	// unmarshals caches whether *T implements json.Unmarshaler: reflect's Implements
	// walks the method set, and was 15% of loading a manifest-heavy scenario.
	unmarshals map[reflect.Type]bool
}

// NewShared returns the shared state of one file's decodes, with the full budget.
func NewShared() *Shared {
	return &Shared{budget: maxNodes, fields: map[reflect.Type]map[string]fieldInfo{}, rest: map[reflect.Type][]int{}, unmarshals: map[reflect.Type]bool{}}
}

// NewSharedFor returns the shared state of the decodes of docs (one file): the budget
// is what the documents hold as written, four times over (aliases may repeat a value,
// not multiply the work of a file), plus room for small files, at most the full budget.
func NewSharedFor(docs ...*Doc) *Shared {
	sh := NewShared()
	written := 0
	for _, d := range docs {
		written += countNodes(d.Node, maxNodes-written)
	}
	sh.budget = min(maxNodes, 4*written+aliasAllowance)
	return sh
}

// aliasAllowance is the budget a file has beyond four times what it holds.
const aliasAllowance = 10000

// countNodes counts the nodes of a tree as written (aliases not followed), at most limit.
func countNodes(n *yaml.Node, limit int) int {
	if n == nil || limit <= 0 {
		return 0
	}
	count := 1
	for _, c := range n.Content {
		if count >= limit {
			break
		}
		count += countNodes(c, limit-count)
	}
	return count
}

// structFields returns t's fields by JSON name (cached).
func (sh *Shared) structFields(t reflect.Type) map[string]fieldInfo {
	f, ok := sh.fields[t]
	if !ok {
		f = structFields(t)
		sh.fields[t] = f
	}
	return f
}

// restField returns the index of t's Rest field, or nil (cached).
func (sh *Shared) restField(t reflect.Type) []int {
	r, ok := sh.rest[t]
	if !ok {
		r = restField(t)
		sh.rest[t] = r
	}
	return r
}

// unmarshalsJSON reports whether *t implements json.Unmarshaler (cached).
func (sh *Shared) unmarshalsJSON(t reflect.Type) bool {
	u, ok := sh.unmarshals[t]
	if !ok {
		u = reflect.PointerTo(t).Implements(jsonUnmarshalerType)
		sh.unmarshals[t] = u
	}
	return u
}

// Decode decodes doc strictly into v (a non-nil pointer). It returns Errors listing every
// problem found, or nil.
func Decode(doc *Doc, v any) error { return Decoder{}.Decode(doc, v) }

// Decode decodes doc into v (a non-nil pointer). It returns Errors listing every problem
// found, or nil; v holds whatever could be decoded.
func (dc Decoder) Decode(doc *Doc, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("yamlpos: Decode needs a non-nil pointer, got %T", v)
	}
	sh := dc.Shared
	if sh == nil {
		sh = NewShared()
	}
	d := &decoder{doc: doc, unknown: dc.OnUnknownField, sh: sh}
	d.value(doc.Node, nil, rv.Elem())
	return d.errs.Err()
}

// decoder holds the state of one Decode call.
type decoder struct {
	doc     *Doc
	unknown UnknownFieldFunc
	errs    Errors
	sh      *Shared
	// overBudget is set once this decode ran out of the shared budget.
	overBudget bool
}

// maxErrors bounds the errors one decode reports; past it a document is hopeless.
const maxErrors = 100

func (d *decoder) errorf(n *yaml.Node, path *field.Path, format string, args ...any) {
	switch {
	case len(d.errs) > maxErrors:
		return
	case len(d.errs) == maxErrors:
		d.errs = append(d.errs, &Error{File: d.doc.File, Msg: fmt.Sprintf("too many errors (more than %d), giving up", maxErrors)})
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{File: d.doc.File, Line: line, Field: d.doc.FieldString(path.String()), Msg: fmt.Sprintf(format, args...)})
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	yamlNodePtrType     = reflect.TypeFor[*yaml.Node]()
	restType            = reflect.TypeFor[Rest]()
)

// Rest holds the entries of a mapping that matched no field of the struct holding the
// Rest, in document order.
type Rest []Entry

// Entry is one mapping entry kept in a Rest.
type Entry struct {
	// Key and Value are the entry's nodes (Key is a scalar).
	Key, Value *yaml.Node
	// Path is the entry's field path, relative to the document being decoded.
	Path *field.Path
}

// restField returns the index of t's Rest field, or nil.
func restField(t reflect.Type) []int {
	for i := range t.NumField() {
		if f := t.Field(i); f.Type == restType && f.IsExported() {
			return []int{i}
		}
	}
	return nil
}

// value decodes n into v (settable).
func (d *decoder) value(n *yaml.Node, path *field.Path, v reflect.Value) {
	d.sh.budget--
	if d.sh.budget < 0 {
		if !d.overBudget { // once per decode: every decode past the budget fails
			d.overBudget = true
			d.errorf(n, path, "document too large or too many aliases (more than %d values)", maxNodes)
		}
		return
	}
	if v.Type() == yamlNodePtrType {
		v.Set(reflect.ValueOf(n))
		return
	}
	if n.Kind == yaml.AliasNode {
		target := resolveAlias(n)
		if target == nil {
			d.errorf(n, path, "alias nested too deeply")
			return
		}
		// Keep the alias's line for errors at this level: that is where the user looks.
		n = target
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, path, v.Elem())
		return
	}
	if d.sh.unmarshalsJSON(v.Type()) {
		d.unmarshalJSON(n, path, v.Addr().Interface().(json.Unmarshaler))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structValue(n, path, v)
	case reflect.Map:
		d.mapValue(n, path, v)
	case reflect.Slice:
		d.sliceValue(n, path, v)
	case reflect.Interface:
		x, err := toGeneric(n, &d.sh.budget)
		if err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		d.scalar(n, path, v)
	}
}

func (d *decoder) unmarshalJSON(n *yaml.Node, path *field.Path, u json.Unmarshaler) {
	x, err := toGeneric(n, &d.sh.budget)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return
	}
	raw, err := json.Marshal(x)
	if err != nil {
		d.errorf(n, path, "cannot convert to JSON: %v", err)
		return
	}
	if err := u.UnmarshalJSON(raw); err != nil {
		d.errorf(n, path, "Invalid value: %s: %v", describe(n), err)
	}
}

// fieldInfo locates one decodable struct field.
type fieldInfo struct {
	index []int
	depth int
}

// structFields returns the fields of t by their JSON names, inlining anonymous structs
// and `json:",inline"` fields; a shallower field wins over an inlined one.
func structFields(t reflect.Type) map[string]fieldInfo {
	out := map[string]fieldInfo{}
	var walk func(t reflect.Type, prefix []int, depth int)
	walk = func(t reflect.Type, prefix []int, depth int) {
		if depth > 10 {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), prefix...), i)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			inline := name == "" && (f.Anonymous || strings.Contains(","+opts+",", ",inline,")) && ft.Kind() == reflect.Struct
			if inline {
				walk(ft, idx, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if old, ok := out[name]; ok && old.depth <= depth {
				continue
			}
			out[name] = fieldInfo{index: idx, depth: depth}
		}
	}
	walk(t, nil, 0)
	return out
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded pointers.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

func (d *decoder) structValue(n *yaml.Node, path *field.Path, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "Invalid value: %s: expected a mapping (an object with fields)", describe(n))
		return
	}
	fields := d.sh.structFields(v.Type())
	rest := d.sh.restField(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k, path) {
			continue
		}
		p := path.Child(k.Value)
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, p, "Duplicate value: field already set at line %d", first)
			continue
		}
		seen[k.Value] = k.Line
		fi, ok := fields[k.Value]
		if !ok {
			if rest != nil {
				f := v.FieldByIndex(rest)
				f.Set(reflect.Append(f, reflect.ValueOf(Entry{Key: k, Value: val, Path: p})))
				continue
			}
			if d.unknown != nil {
				d.unknown(p, k, val)
				continue
			}
			d.errorf(k, p, "unknown field%s", suggest(k.Value, fields))
			continue
		}
		d.value(val, p, fieldByIndex(v, fi.index))
	}
}

// key checks that a mapping key is a plain scalar (not a merge key or a complex key).
func (d *decoder) key(k *yaml.Node, path *field.Path) bool {
	if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
		d.errorf(k, path, "merge keys (<<) are not supported")
		return false
	}
	if k.Kind != yaml.ScalarNode {
		d.errorf(k, path, "mapping keys must be scalars")
		return false
	}
	return true
}

// suggest returns ` (did you mean "x"?)` naming the field closest to name, when one is
// close enough to be a likely typo.
func suggest(name string, fields map[string]fieldInfo) string {
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	if c := Closest(name, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func (d *decoder) mapValue(n *yaml.Node, path *field.Path, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "Invalid value: %s: expected a mapping", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.errorf(n, path, "internal error: map key type %s is not a string", v.Type().Key())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k, path) {
			continue
		}
		p := path.Key(k.Value)
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, p, "Duplicate value: key already set at line %d", first)
			continue
		}
		seen[k.Value] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(val, p, elem)
		v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
}

func (d *decoder) sliceValue(n *yaml.Node, path *field.Path, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "Invalid value: %s: expected a list", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, path.Index(i), s.Index(i))
	}
	v.Set(s)
}

func (d *decoder) scalar(n *yaml.Node, path *field.Path, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "Invalid value: %s: expected %s", describe(n), kindName(v.Kind()))
		return
	}
	tag := n.ShortTag()
	bad := func() { d.errorf(n, path, "Invalid value: %s: expected %s", describe(n), kindName(v.Kind())) }
	switch v.Kind() {
	case reflect.String:
		if tag != "!!str" {
			bad()
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if tag != "!!bool" || n.Decode(&b) != nil {
			bad()
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if tag != "!!int" || n.Decode(&i) != nil {
			bad()
			return
		}
		if v.OverflowInt(i) {
			d.errorf(n, path, "Invalid value: %d: out of range for a %d-bit integer", i, v.Type().Bits())
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var u uint64
		if tag != "!!int" || n.Decode(&u) != nil {
			bad()
			return
		}
		if v.OverflowUint(u) {
			d.errorf(n, path, "Invalid value: %d: out of range for a %d-bit unsigned integer", u, v.Type().Bits())
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		var f float64
		if (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			bad()
			return
		}
		if v.OverflowFloat(f) && !math.IsInf(f, 0) {
			d.errorf(n, path, "Invalid value: %v: out of range", f)
			return
		}
		v.SetFloat(f)
	default:
		d.errorf(n, path, "internal error: cannot decode into %s", v.Type())
	}
}

// kindName names what a Go kind expects, for messages.
func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "a " + k.String()
	}
}

// describe prints a node for an error message: a scalar as its value (strings quoted),
// anything else by its kind.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 60 {
			v = v[:57] + "..."
		}
		if n.ShortTag() == "!!str" {
			return fmt.Sprintf("%q", v)
		}
		return v
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a value"
	}
}

// toGeneric converts a node to the values encoding/json produces (map[string]any, []any,
// string, int64, float64, bool, nil), counting visited nodes against budget.
func toGeneric(n *yaml.Node, budget *int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, fmt.Errorf("document too large or too many aliases (more than %d values)", maxNodes)
	}
	if n.Kind == yaml.AliasNode {
		n = resolveAlias(n)
		if n == nil {
			return nil, fmt.Errorf("alias nested too deeply")
		}
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return nil, fmt.Errorf("line %d: mapping keys must be plain scalars (merge keys are not supported)", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			x, err := toGeneric(n.Content[i+1], budget)
			if err != nil {
				return nil, err
			}
			m[k.Value] = x
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			x, err := toGeneric(c, budget)
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, err
			}
			return b, nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err == nil {
				return i, nil
			}
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, err
			}
			return f, nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, err
			}
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("line %d: %s cannot be represented in JSON", n.Line, n.Value)
			}
			return f, nil
		default:
			return n.Value, nil
		}
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
}

// ToGeneric converts a YAML node to the values encoding/json would produce from the same
// document as JSON (map[string]any, []any, string, int64, float64, bool, nil).
func ToGeneric(n *yaml.Node) (any, error) {
	budget := maxNodes
	return toGeneric(n, &budget)
}
