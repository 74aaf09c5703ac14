// Package yamlpos decodes YAML strictly and remembers where every value came from, so
// that an error can name the file, the line and the field: `svc.yaml:14:
// spec.ports[0].nodePort: Invalid value: 80: must be in range 30000-32767`.
//
// It works on gopkg.in/yaml.v3 nodes. Split cuts a file into documents; Decode fills a Go
// value from a document following the value's `json` tags (the field names Kubernetes
// uses), reporting unknown fields, duplicate keys and wrong types with their position;
// Doc.Line maps a field path as k8s.io/apimachinery's field.Path prints it back to a line,
// so that validation written against the decoded value can still point into the file.
package yamlpos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Error is one problem found in a YAML file, with its position.
type Error struct {
	// File is the path of the file as the caller named it.
	File string
	// Line is the 1-based line of the offending value (0 when unknown).
	Line int
	// Field is the path of the offending field, e.g. "spec.ports[0].nodePort" ("" when the
	// problem is not about one field, e.g. a syntax error).
	Field string
	// Msg says what is wrong and, where it can, what is allowed.
	Msg string
}

// Error formats the error as one line: `FILE:LINE: FIELD: message`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is a list of positioned errors; it is itself an error, one line per entry.
type Errors []*Error

// Error joins the entries with newlines.
func (l Errors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the entries, so errors.As finds each *Error.
func (l Errors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns nil for an empty list and the list otherwise (a nil Errors stored in an
// error interface would not compare equal to nil).
func (l Errors) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// AsErrors returns the positioned errors inside err: err itself when it is an Errors or
// an *Error, the positioned errors of a joined error, or nil when there are none.
func AsErrors(err error) Errors {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out Errors
		for _, inner := range j.Unwrap() {
			out = append(out, AsErrors(inner)...)
		}
		return out
	}
	var l Errors
	if errors.As(err, &l) {
		return l
	}
	var e *Error
	if errors.As(err, &e) {
		return Errors{e}
	}
	return nil
}

// Doc is one YAML document (or one object nested in a document) and where it lives.
type Doc struct {
	// File is the file name used in errors.
	File string
	// Node is the document's top-level value (usually a mapping). Never a DocumentNode.
	Node *yaml.Node
	// Base is the path of Node inside its file, for an object nested in a larger document
	// (e.g. an inline manifest at "manifests[2].inline"); nil for a whole document. Errors
	// name fields as Base + the path inside Node.
	Base *field.Path
}

// Line returns the first line of the document's value.
func (d *Doc) Line() int {
	if d.Node == nil {
		return 0
	}
	return d.Node.Line
}

// maxNodes bounds the work of one decode or conversion, so that aliases referring to
// aliases (a "billion laughs" document) cannot make it explode.
const maxNodes = 1 << 20

// Split parses data and returns its non-empty documents in order. A document whose only
// content is null (an empty document, `---` alone, or comments only) is skipped. A syntax
// error is returned as an *Error with the line yaml.v3 reported. Comments are dropped:
// nothing reads them.
func Split(file string, data []byte) (docs []*Doc, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input in past releases; never let a file crash
		// the caller.
		if r := recover(); r != nil {
			docs, err = nil, &Error{File: file, Msg: fmt.Sprintf("invalid YAML: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, syntaxError(file, err)
		}
		if n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
			continue
		}
		root := n.Content[0]
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue
		}
		dropComments(root)
		docs = append(docs, &Doc{File: file, Node: root})
	}
}

var lineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserContextError reports whether a yaml.v3 message comes from its parser (not its
// scanner) with a context mark, whose line yaml.v3 prints 0-based.
func parserContextError(msg string) bool {
	for _, m := range []string{
		"did not find expected <document start>",
		"did not find expected key",
		"did not find expected '-' indicator",
		"did not find expected node content",
		"did not find expected ',' or ']'",
		"did not find expected ',' or '}'",
	} {
		if msg == m {
			return true
		}
	}
	return false
}

// syntaxError turns a yaml.v3 parse error into a positioned error.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		text := m[2]
		if parserContextError(text) {
			// yaml.v3 reports these parser errors at the 0-based line of the collection
			// or document being parsed; point at that collection's first line instead.
			line++
			text += " (in the block starting on this line)"
		}
		return &Error{File: file, Line: line, Msg: "invalid YAML: " + text}
	}
	return &Error{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// FieldString returns the path p (relative to the document) as errors print it: Base
// followed by p.
func (d *Doc) FieldString(p string) string {
	if d.Base == nil {
		return p
	}
	base := d.Base.String()
	switch {
	case p == "":
		return base
	case strings.HasPrefix(p, "["):
		return base + p
	default:
		return base + "." + p
	}
}

// Errorf returns an error about the field at path p (relative to the document, as
// field.Path prints it), positioned at the line Line(p) finds.
func (d *Doc) Errorf(p string, format string, args ...any) *Error {
	return &Error{File: d.File, Line: d.FieldLine(p), Field: d.FieldString(p), Msg: fmt.Sprintf(format, args...)}
}

// FromField converts a validation error whose Field is relative to the document.
func (d *Doc) FromField(fe *field.Error) *Error {
	return &Error{File: d.File, Line: d.FieldLine(fe.Field), Field: d.FieldString(fe.Field), Msg: fe.ErrorBody()}
}

// FromFieldList converts a validation error list (nil for an empty list).
func (d *Doc) FromFieldList(list field.ErrorList) Errors {
	var out Errors
	for _, fe := range list {
		out = append(out, d.FromField(fe))
	}
	return out
}

// FieldLine returns the line of the field at path p ("spec.ports[0].nodePort",
// "metadata.labels[app.kubernetes.io/name]"), relative to the document. For a mapping
// entry it is the line of the key. When the path does not exist in the file (a field
// that was omitted, or set by defaulting) it returns the line of the deepest part that
// does, so the error still points near the problem.
func (d *Doc) FieldLine(p string) int {
	if d.Node == nil {
		return 0
	}
	n := d.Node
	line := n.Line
	budget := maxNodes
	for _, seg := range splitPath(p) {
		n = resolveAlias(n)
		if n == nil {
			return line
		}
		found := false
		switch {
		case seg.index >= 0 && n.Kind == yaml.SequenceNode:
			if seg.index < len(n.Content) {
				n = n.Content[seg.index]
				line = n.Line
				found = true
			}
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				budget--
				if budget < 0 {
					return line
				}
				if n.Content[i].Value == seg.name {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// pathSeg is one step of a field path: a field or map key (name) or a list index.
type pathSeg struct {
	name  string
	index int // -1 for a name
}

// splitPath parses a path as field.Path prints it: names separated by dots, list indexes
// and map keys in brackets. A key in brackets may contain dots.
func splitPath(p string) []pathSeg {
	var segs []pathSeg
	for i := 0; i < len(p); {
		switch p[i] {
		case '.':
			i++
		case '[':
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return segs
			}
			inner := p[i+1 : i+end]
			if n, err := strconv.Atoi(inner); err == nil && n >= 0 {
				segs = append(segs, pathSeg{name: inner, index: n})
			} else {
				segs = append(segs, pathSeg{name: inner, index: -1})
			}
			i += end + 1
		default:
			end := strings.IndexAny(p[i:], ".[")
			if end < 0 {
				end = len(p) - i
			}
			segs = append(segs, pathSeg{name: p[i : i+end], index: -1})
			i += end
		}
	}
	return segs
}

// resolveAlias follows alias nodes (bounded: yaml.v3 refuses cycles at parse time, the
// bound only protects against surprises).
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// dropComments clears the comments of n and of every node under it. An alias's target is
// cleared where it stands in the tree; aliases are not followed (a chain of them would
// visit the same nodes again and again).
func dropComments(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	if n.Kind == yaml.AliasNode {
		return
	}
	for _, c := range n.Content {
		dropComments(c)
	}
}
