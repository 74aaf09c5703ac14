package yamlpos

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
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
// Kubernetes API server does). A type that implements encoding.TextUnmarshaler receives a
// string value as its text, with no JSON round trip (a duration). Otherwise a type that
// implements json.Unmarshaler (such as intstr.IntOrString or resource.Quantity) receives
// its value converted to JSON. A field of type *yaml.Node receives the node itself, for
// callers that decode it later. A null value leaves the field untouched. Merge keys
// (`<<`) are not supported.
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
	budget budget
	// types caches what the decoder needs to know of each Go type, looked up once per
	// value (reflect's Implements walks the method set, and was 15% of loading a
	// manifest-heavy scenario).
	types map[reflect.Type]*typeInfo
	// segs is the path stack of the last decode, reused by the next.
	segs []segment
}

// NewShared returns the shared state of one file's decodes, with the full budget.
func NewShared() *Shared {
	return &Shared{budget: budget{left: maxNodes}, types: map[reflect.Type]*typeInfo{}}
}

// NewSharedFor returns the shared state of the decodes of docs (one file): the budget
// is what the documents hold as written, four times over (aliases may repeat a value,
// not multiply the work of a file), plus room for small files, at most the full budget.
func NewSharedFor(docs ...*Doc) *Shared {
	sh := NewShared()
	sh.budget.docs = docs
	return sh
}

// budget bounds the values the decodes of one file visit. Without aliases every decode
// visits each value once, so the bound that counts is the one on aliases: the budget is
// sized from the documents (see NewSharedFor) only when a decode meets the first alias.
// Counting the values of every file up front was 5% of loading a 1 MB scenario.
type budget struct {
	left int
	// docs are the documents to size the budget from at the first alias; nil once
	// sized, or for a budget of maxNodes.
	docs []*Doc
}

// spend counts one value visited and reports whether the budget allows it.
func (b *budget) spend() bool {
	b.left--
	return b.left >= 0
}

// alias is called at every alias: the first sizes the budget from the documents.
func (b *budget) alias() {
	if b.docs == nil {
		return
	}
	written := 0
	for _, d := range b.docs {
		written += countNodes(d.Node, maxNodes-written)
	}
	spent := maxNodes - b.left
	b.left = min(maxNodes, 4*written+aliasAllowance) - spent
	b.docs = nil
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

// typeInfo is what the decoder knows of one Go type.
type typeInfo struct {
	// text and json say whether *T implements encoding.TextUnmarshaler and
	// json.Unmarshaler.
	text, json bool
	// fields are a struct's fields by JSON name; rest is the index of its Rest field
	// (nil: none).
	fields map[string]fieldInfo
	rest   []int
}

// info returns what the decoder knows of t (cached).
func (sh *Shared) info(t reflect.Type) *typeInfo {
	ti, ok := sh.types[t]
	if !ok {
		pt := reflect.PointerTo(t)
		ti = &typeInfo{text: pt.Implements(textUnmarshalerType), json: pt.Implements(jsonUnmarshalerType)}
		if t.Kind() == reflect.Struct {
			ti.fields, ti.rest = structFields(t), restField(t)
		}
		sh.types[t] = ti
	}
	return ti
}

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
	// The path stack is reused from the previous decode of the file (taken, so that a
	// decode nested in this one would get its own).
	d := &decoder{doc: doc, unknown: dc.OnUnknownField, sh: sh, segs: sh.segs[:0]}
	sh.segs = nil
	d.value(doc.Node, rv.Elem())
	sh.segs = d.segs[:0]
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
	// segs is the path of the value being decoded (see segment).
	segs []segment
}

// maxErrors bounds the errors one decode reports; past it a document is hopeless.
const maxErrors = 100

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
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
	p := ""
	if fp := d.path(); fp != nil { // the document itself has no field name
		p = fp.String()
	}
	d.errs = append(d.errs, &Error{File: d.doc.File, Line: line, Field: d.doc.FieldString(p), Msg: fmt.Sprintf(format, args...)})
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
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
func (d *decoder) value(n *yaml.Node, v reflect.Value) {
	if !d.sh.budget.spend() {
		if !d.overBudget { // once per decode: every decode past the budget fails
			d.overBudget = true
			d.errorf(n, "document too large or too many aliases (more than %d values)", maxNodes)
		}
		return
	}
	if v.Type() == yamlNodePtrType {
		v.Set(reflect.ValueOf(n))
		return
	}
	if n.Kind == yaml.AliasNode {
		d.sh.budget.alias()
		target := resolveAlias(n)
		if target == nil {
			d.errorf(n, "alias nested too deeply")
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
		d.value(n, v.Elem())
		return
	}
	ti := d.sh.info(v.Type())
	if ti.text && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.errorf(n, "Invalid value: %s: %v", describe(n), err)
		}
		return
	}
	if ti.json {
		d.unmarshalJSON(n, v.Addr().Interface().(json.Unmarshaler))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structValue(n, v, ti)
	case reflect.Map:
		d.mapValue(n, v)
	case reflect.Slice:
		d.sliceValue(n, v)
	case reflect.Interface:
		x, err := toGeneric(n, &d.sh.budget)
		if err != nil {
			d.errorf(n, "%v", err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		d.scalar(n, v)
	}
}

func (d *decoder) unmarshalJSON(n *yaml.Node, u json.Unmarshaler) {
	var x any = n.Value
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		// A string (a duration, a quantity) is its own generic value; anything else
		// is converted (and counted against the budget).
		var err error
		if x, err = toGeneric(n, &d.sh.budget); err != nil {
			d.errorf(n, "%v", err)
			return
		}
	}
	raw, err := json.Marshal(x)
	if err != nil {
		d.errorf(n, "cannot convert to JSON: %v", err)
		return
	}
	if err := u.UnmarshalJSON(raw); err != nil {
		d.errorf(n, "Invalid value: %s: %v", describe(n), err)
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

func (d *decoder) structValue(n *yaml.Node, v reflect.Value, ti *typeInfo) {
	if n.Kind != yaml.MappingNode {
		if len(d.segs) == 0 {
			// The whole document: perhaps a file that is not ours (a passwd file reads as
			// one long string); say what it is, without echoing its content.
			d.errorf(n, "the document is %s, not a mapping (an object with fields)", kindOf(n))
			return
		}
		d.errorf(n, "Invalid value: %s: expected a mapping (an object with fields)", describe(n))
		return
	}
	fields, rest := ti.fields, ti.rest
	seen := newKeySet(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k) {
			continue
		}
		d.push(segment{name: k.Value, kind: childSeg})
		fi, ok := fields[k.Value]
		switch first, dup := seen.add(n, i); {
		case dup:
			d.errorf(k, "Duplicate value: field already set at line %d", first)
		case ok:
			d.value(val, fieldByIndex(v, fi.index))
		case rest != nil:
			r := v.FieldByIndex(rest).Addr().Interface().(*Rest)
			*r = append(*r, Entry{Key: k, Value: val, Path: d.path()})
		case d.unknown != nil:
			d.unknown(d.path(), k, val)
		default:
			d.errorf(k, "unknown field%s", suggest(k.Value, fields))
		}
		d.pop()
	}
}

// key checks that a mapping key is a plain scalar (not a merge key or a complex key).
func (d *decoder) key(k *yaml.Node) bool {
	if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
		d.errorf(k, "merge keys (<<) are not supported")
		return false
	}
	if k.Kind != yaml.ScalarNode {
		d.errorf(k, "mapping keys must be scalars")
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

func (d *decoder) mapValue(n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "Invalid value: %s: expected a mapping", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.errorf(n, "internal error: map key type %s is not a string", v.Type().Key())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	seen := newKeySet(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k) {
			continue
		}
		d.push(segment{name: k.Value, kind: keySeg})
		if first, dup := seen.add(n, i); dup {
			d.errorf(k, "Duplicate value: key already set at line %d", first)
			d.pop()
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(val, elem)
		d.pop()
		v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
	}
}

func (d *decoder) sliceValue(n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "Invalid value: %s: expected a list", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.push(segment{index: i, kind: indexSeg})
		d.value(item, s.Index(i))
		d.pop()
	}
	v.Set(s)
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, "Invalid value: %s: expected %s", describe(n), kindName(v.Kind()))
		return
	}
	tag := n.ShortTag()
	bad := func() { d.errorf(n, "Invalid value: %s: expected %s", describe(n), kindName(v.Kind())) }
	switch v.Kind() {
	case reflect.String:
		if tag != "!!str" {
			bad()
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, ok := canonicalBool(n.Value)
		if tag != "!!bool" || !ok && n.Decode(&b) != nil {
			bad()
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := plainDecimal(n.Value)
		if tag != "!!int" || !ok && n.Decode(&i) != nil {
			bad()
			return
		}
		if v.OverflowInt(i) {
			d.errorf(n, "Invalid value: %d: out of range for a %d-bit integer", i, v.Type().Bits())
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var u uint64
		if i, ok := plainDecimal(n.Value); tag == "!!int" && ok && i >= 0 {
			u = uint64(i)
		} else if tag != "!!int" || n.Decode(&u) != nil {
			bad()
			return
		}
		if v.OverflowUint(u) {
			d.errorf(n, "Invalid value: %d: out of range for a %d-bit unsigned integer", u, v.Type().Bits())
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
			d.errorf(n, "Invalid value: %v: out of range", f)
			return
		}
		v.SetFloat(f)
	default:
		d.errorf(n, "internal error: cannot decode into %s", v.Type())
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

// kindOf names a node's kind without its value ("a string", "a list").
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!null":
			return "null"
		}
		return "a scalar"
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
func toGeneric(n *yaml.Node, b *budget) (any, error) {
	if !b.spend() {
		return nil, fmt.Errorf("document too large or too many aliases (more than %d values)", maxNodes)
	}
	if n.Kind == yaml.AliasNode {
		b.alias()
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
			x, err := toGeneric(n.Content[i+1], b)
			if err != nil {
				return nil, err
			}
			m[k.Value] = x
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			x, err := toGeneric(c, b)
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

// segment is one step of the path of the value being decoded. The decoder keeps the
// path as a stack of segments and makes a *field.Path of it only for an error or a Rest
// entry: making one per value was a sixth of the allocations of loading a large
// scenario.
type segment struct {
	name  string // field name (childSeg) or map key (keySeg)
	index int    // list index (indexSeg)
	kind  segKind
}

// segKind says what one segment is.
type segKind uint8

const (
	childSeg segKind = iota // a struct field: .name
	keySeg                  // a map key: [name]
	indexSeg                // a list item: [index]
)

// push enters a value below the current one; pop leaves it.
func (d *decoder) push(s segment) { d.segs = append(d.segs, s) }

func (d *decoder) pop() { d.segs = d.segs[:len(d.segs)-1] }

// path returns the path of the current value, relative to the document (nil for the
// document itself).
func (d *decoder) path() *field.Path {
	var p *field.Path
	for _, s := range d.segs {
		switch s.kind {
		case childSeg:
			p = p.Child(s.name)
		case keySeg:
			p = p.Key(s.name)
		default:
			p = p.Index(s.index)
		}
	}
	return p
}

// smallMapping is the number of keys up to which a mapping's duplicate keys are found by
// comparing with the keys before (no allocation); a larger mapping uses a map.
const smallMapping = 16

// keySet finds duplicate keys in one mapping.
type keySet struct {
	lines map[string]int // nil for a small mapping
}

func newKeySet(n *yaml.Node) keySet {
	if len(n.Content)/2 <= smallMapping {
		return keySet{}
	}
	return keySet{lines: make(map[string]int, len(n.Content)/2)}
}

// add records the key n.Content[i] (a scalar) and reports whether an earlier key of n
// has the same value, with that key's line.
func (s keySet) add(n *yaml.Node, i int) (first int, dup bool) {
	k := n.Content[i]
	if s.lines != nil {
		if first, dup := s.lines[k.Value]; dup {
			return first, true
		}
		s.lines[k.Value] = k.Line
		return 0, false
	}
	for j := 0; j < i; j += 2 {
		if prev := n.Content[j]; prev.Kind == yaml.ScalarNode && prev.ShortTag() != "!!merge" && prev.Value == k.Value {
			return prev.Line, true
		}
	}
	return 0, false
}

// canonicalBool reads the six spellings yaml.v3 resolves to !!bool without asking it:
// (*yaml.Node).Decode builds a decoder per call, two allocations per boolean of a file.
// ok is false for anything else (an explicitly tagged "!!bool yes"), left to yaml.v3.
func canonicalBool(s string) (b, ok bool) {
	switch s {
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	}
	return false, false
}

// plainDecimal reads an integer written in plain decimal ("0", "42", "-7"; no sign "+",
// no leading zero, which yaml.v3 reads as octal, no "_", not too long to overflow) without
// asking yaml.v3; ok is false for every other form, left to it.
func plainDecimal(s string) (int64, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 18 || digits[0] == '0' && len(digits) > 1 {
		return 0, false
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.ParseInt(s, 10, 64)
	return i, err == nil
}
