package yamlpos

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sync"

	"gopkg.in/yaml.v3"
)

// The parallel parse. yaml.v3 parses about 14 MB/s here, one core: a 1 MB scenario of
// 12k steps takes 74 ms to parse alone, most of issue 21's 100 ms for a whole load. Such
// a file is a short head and one long block sequence (its steps, or a manifest list)
// that runs to the end of the file. The items of a block sequence are separate YAML
// texts whenever nothing joins them (an anchor and its alias, a %TAG directive), so
// parseParallel parses the head and runs of items on separate goroutines, moves each
// run's lines to where the run starts, and joins the trees. The result is the tree
// yaml.v3 gives for the whole file, positions and styles included, without comments
// (Split drops them on both paths: yaml.v3 hangs a comment on a node by what surrounds
// it up to the end of the file, so a run parsed alone hangs some elsewhere, and nothing
// reads them). FuzzParallelMatchesSerial holds the two parses against each other. A file
// it cannot cut safely (anchors, directives, a key after the sequence), and one with a
// run that does not parse on its own (a flow collection or quoted scalar cut in two, a
// syntax error), is left to the serial parse, which also gives every syntax error its
// position.

// minParallelBytes is the size below which the serial parse is as fast: the goroutines
// and the join are not free, and a small file parses in a few ms.
const minParallelBytes = 128 << 10

// maxParallelRuns bounds the goroutines of one parse.
const maxParallelRuns = 8

// headKeyRE matches a top-level key whose value starts on the next line: plain, at
// column 0, with nothing after the colon. Anything fancier leaves the file to the serial
// parse.
var headKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*:[ ]*\r?$`)

// line is one line of the file: its bytes without the line break, and its kind.
type line struct {
	start, end int // data[start:end] is the line, without "\n"
	indent     int // leading spaces
	blank      bool
	comment    bool // first non-space byte is '#'
	item       bool // "- " or a lone "-" after the indentation
}

func splitLines(data []byte) []line {
	var lines []line
	for start := 0; start < len(data); {
		end := bytes.IndexByte(data[start:], '\n')
		next := start + end + 1
		if end < 0 {
			end, next = len(data)-start, len(data)
		}
		end += start
		l := line{start: start, end: end}
		text := bytes.TrimSuffix(data[start:end], []byte("\r"))
		for l.indent < len(text) && text[l.indent] == ' ' {
			l.indent++
		}
		rest := text[l.indent:]
		l.blank = len(rest) == 0
		l.comment = len(rest) > 0 && rest[0] == '#'
		l.item = bytes.Equal(rest, []byte("-")) || bytes.HasPrefix(rest, []byte("- "))
		lines = append(lines, l)
		start = next
	}
	return lines
}

// joinsItems reports whether data holds something that can tie the items of a sequence
// to each other or to the head, or that breaks lines where splitLines does not: anchors
// and aliases ('&', '*', anywhere, even quoted: being conservative costs only speed),
// directives, a byte-order mark or NUL (another encoding), a carriage return not
// followed by a line feed, and the Unicode line breaks yaml.v3 honours (NEL, LS, PS).
func joinsItems(data []byte) bool {
	if bytes.ContainsAny(data, "&*\x00") || bytes.HasPrefix(data, []byte("%")) || bytes.Contains(data, []byte("\n%")) ||
		bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) || bytes.Contains(data, []byte("\xc2\x85")) ||
		bytes.Contains(data, []byte("\xe2\x80\xa8")) || bytes.Contains(data, []byte("\xe2\x80\xa9")) {
		return true
	}
	return bytes.Count(data, []byte("\r")) != bytes.Count(data, []byte("\r\n"))
}

// cutPlan is where parseParallel cuts a file: the head is data[:lines[first].start], the
// sequence the value of the head's last key, its items at column indent+1, and each run
// starts at one of starts (indices into lines; starts[0] == first).
type cutPlan struct {
	lines  []line
	first  int
	indent int
	starts []int
}

// planCuts finds the long block sequence that ends the file and where to cut it into at
// most runs runs of about equal size; ok is false when the file is not of that shape.
func planCuts(data []byte, runs int) (cutPlan, bool) {
	lines := splitLines(data)
	// The key: the last top-level line that is not an item, blank or comment (all after
	// it belongs to its value or is outside any value).
	key := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if l := lines[i]; l.indent == 0 && !l.blank && !l.comment && !l.item {
			key = i
			break
		}
	}
	if key < 0 || !headKeyRE.Match(data[lines[key].start:lines[key].end]) {
		return cutPlan{}, false
	}
	first := key + 1 // blank and comment lines before the first item go with the head
	for first < len(lines) && (lines[first].blank || lines[first].comment) {
		first++
	}
	if first == len(lines) || !lines[first].item {
		return cutPlan{}, false
	}
	p := cutPlan{lines: lines, first: first, indent: lines[first].indent}
	// Every line of the sequence is an item at its indentation, or indented more, or
	// blank, or a comment: anything else ends the sequence before the end of the file.
	for _, l := range lines[first:] {
		if !(l.item && l.indent == p.indent) && !l.blank && !l.comment && l.indent <= p.indent {
			return cutPlan{}, false
		}
	}
	// Cut before items about every size/runs bytes.
	size := len(data) - lines[first].start
	p.starts = []int{first}
	next := lines[first].start + size/runs
	for i := first + 1; i < len(lines) && len(p.starts) < runs; i++ {
		if l := lines[i]; l.start >= next && l.item && l.indent == p.indent {
			p.starts = append(p.starts, i)
			next = l.start + size/runs
		}
	}
	return p, len(p.starts) > 1
}

// parseParallel parses data as yaml.v3 parses it into one document, with up to workers
// goroutines, and returns the document's value. ok is false when data is small, is not
// one document whose last key holds a long block sequence, or cannot be cut safely: the
// caller then parses it serially.
func parseParallel(data []byte, workers, minBytes int) (root *yaml.Node, ok bool) {
	if workers < 2 || len(data) < minBytes || joinsItems(data) {
		return nil, false
	}
	plan, ok := planCuts(data, min(workers, maxParallelRuns))
	if !ok {
		return nil, false
	}
	head := data[:plan.lines[plan.first].start]
	runs := make([]*yaml.Node, len(plan.starts))
	var headDoc *yaml.Node
	errs := make([]error, len(plan.starts)+1)
	var wg sync.WaitGroup
	wg.Go(func() { headDoc, errs[0] = parseOne(head) })
	for i, startLine := range plan.starts {
		end := len(data)
		if i+1 < len(plan.starts) {
			end = plan.lines[plan.starts[i+1]].start
		}
		wg.Go(func() { runs[i], errs[i+1] = parseOne(data[plan.lines[startLine].start:end]) })
	}
	wg.Wait()
	if errors.Join(errs...) != nil {
		return nil, false
	}

	// The head must end in the key with no value (null), the runs be block sequences at
	// the items' column.
	if headDoc.Kind != yaml.MappingNode || len(headDoc.Content) < 2 {
		return nil, false
	}
	value := headDoc.Content[len(headDoc.Content)-1]
	if value.Kind != yaml.ScalarNode || value.Tag != "!!null" || value.Value != "" || value.Style != 0 {
		return nil, false
	}
	for i, run := range runs {
		if run.Kind != yaml.SequenceNode || run.Style != 0 || run.Line != 1 || run.Column != plan.indent+1 {
			return nil, false
		}
		shiftLines(run, plan.starts[i]) // line 1 of the run is line starts[i]+1 of the file
	}
	seq := runs[0]
	for _, run := range runs[1:] {
		seq.Content = append(seq.Content, run.Content...)
	}
	headDoc.Content[len(headDoc.Content)-1] = seq
	return headDoc, true
}

// parseOne parses data as exactly one YAML document and returns its value, without
// comments; an error for anything else, a syntax error, or a panic of yaml.v3's (on a
// goroutine of its own, one would end the program).
func parseOne(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, errors.New("yaml.v3 panicked")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("not one value")
	}
	dropComments(doc.Content[0])
	return doc.Content[0], nil
}

// shiftLines adds by to the line of n and of every node under it. The trees have no
// aliases (joinsItems), so every node is visited once.
func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
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
