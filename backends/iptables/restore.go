package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Rule is one "-A CHAIN args..." line of restore input, split into arguments.
type Rule struct {
	// Table is "filter", "nat" or "mangle"; Chain the chain appended to.
	Table, Chain string
	// Args are the rule's arguments after the chain, unquoted (a comment with spaces is
	// one argument), ready for exec or go-iptables.
	Args []string
}

// Script is restore input parsed back into its parts, in input order.
type Script struct {
	// Chains lists the chains declared per table (":CHAIN - [0:0]" lines).
	Chains map[string][]string
	// Rules are the appended rules.
	Rules []Rule
	// Deleted lists the chains deleted per table ("-X CHAIN" lines).
	Deleted map[string][]string
}

// ParseRestore parses iptables-restore input as Generate writes it. It understands table
// headers, chain lines, -A and -X lines and COMMIT; anything else is an error.
func ParseRestore(data []byte) (*Script, error) {
	s := &Script{Chains: map[string][]string{}, Deleted: map[string][]string{}}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case line == "COMMIT":
			table = ""
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			s.Chains[table] = append(s.Chains[table], name)
		case strings.HasPrefix(line, "-X "):
			s.Deleted[table] = append(s.Deleted[table], strings.TrimSpace(line[3:]))
		case strings.HasPrefix(line, "-A "):
			args, err := SplitArgs(line)
			if err != nil {
				return nil, fmt.Errorf("restore input line %d: %w", n, err)
			}
			if len(args) < 2 {
				return nil, fmt.Errorf("restore input line %d: -A without chain", n)
			}
			s.Rules = append(s.Rules, Rule{Table: table, Chain: args[1], Args: args[2:]})
		default:
			return nil, fmt.Errorf("restore input line %d: unexpected %q", n, line)
		}
		if table == "" && !strings.HasPrefix(line, "COMMIT") && line != "" {
			return nil, fmt.Errorf("restore input line %d: outside a table", n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("restore input: %w", err)
	}
	return s, nil
}

// SplitArgs splits one restore line into arguments the way iptables-restore does:
// whitespace separates, double quotes group.
func SplitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '"':
			inQuote = !inQuote
			have = true
		case (ch == ' ' || ch == '\t') && !inQuote:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}

// failedLine matches iptables-restore's error: "iptables-restore: line 42 failed" (legacy
// also prints "... line 42 failed" after "Error occurred at line: 42").
var failedLine = regexp.MustCompile(`line:? (\d+)`)

// RestoreError is a failed iptables-restore, with the failing line of the input.
type RestoreError struct {
	// Line is the 1-based input line iptables-restore named (0 when it named none).
	Line int
	// Context is the failing line with up to 2 neighbours each side, each prefixed with
	// its line number ("> " marks the failing one).
	Context string
	// Err is the exec error, carrying the tool's stderr.
	Err error
}

// Error implements error: "restore line N: <stderr>\n<context>".
func (e *RestoreError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("restore: %v", e.Err)
	}
	return fmt.Sprintf("restore line %d: %v\n%s", e.Line, e.Err, e.Context)
}

// Unwrap returns the exec error.
func (e *RestoreError) Unwrap() error { return e.Err }

// newRestoreError finds the failing line number in stderr and cuts the context out of input.
func newRestoreError(err error, stderr, input []byte) *RestoreError {
	re := &RestoreError{Err: err}
	m := failedLine.FindSubmatch(stderr)
	if m == nil {
		m = failedLine.FindSubmatch([]byte(err.Error()))
	}
	if m == nil {
		return re
	}
	n, convErr := strconv.Atoi(string(m[1]))
	if convErr != nil || n <= 0 {
		return re
	}
	re.Line = n
	re.Context = contextLines(input, n, 2)
	return re
}

// contextLines returns line n (1-based) of data with k neighbours each side, numbered.
func contextLines(data []byte, n, k int) string {
	var b strings.Builder
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		var cur []byte
		if i < 0 {
			cur, data = data, nil
		} else {
			cur, data = data[:i], data[i+1:]
		}
		if line < n-k {
			continue
		}
		if line > n+k {
			break
		}
		mark := "  "
		if line == n {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%d: %s\n", mark, line, cur)
	}
	return strings.TrimRight(b.String(), "\n")
}
