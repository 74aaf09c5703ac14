package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/manifest"
)

// Load reads a scenario file and checks all of it before anything runs: strict decoding,
// defaults, the referenced manifest and proxy configuration files (relative to the
// scenario file's directory) and validation. Errors are yamlpos.Errors, one line each:
// `FILE:LINE: FIELD: message`, where FILE may be a referenced file.
//
// Load reads the steps with DefaultRegistry; Registry.Load with another.
func Load(path string) (*Scenario, error) { return DefaultRegistry().Load(path) }

// ParseScenario is Load for data already in memory: file names it in errors and baseDir
// is where relative references are resolved.
func ParseScenario(file string, data []byte, baseDir string) (*Scenario, error) {
	return DefaultRegistry().Parse(file, data, baseDir)
}

// Load is the package's Load with this registry's step kinds and measurements.
func (r *Registry) Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return r.Parse(path, data, filepath.Dir(path))
}

// ParseScenarioDocs is ParseScenario for a file already split into documents (by
// yamlpos.Split), e.g. by a caller that read its kind first: the file is not parsed
// again.
func ParseScenarioDocs(file string, docs []*yamlpos.Doc, baseDir string) (*Scenario, error) {
	return DefaultRegistry().ParseDocs(file, docs, baseDir)
}

// Parse is ParseScenario with this registry's step kinds and measurements.
func (r *Registry) Parse(file string, data []byte, baseDir string) (*Scenario, error) {
	docs, err := yamlpos.Split(file, data)
	if err != nil {
		return nil, err
	}
	return r.ParseDocs(file, docs, baseDir)
}

// ParseDocs is ParseScenarioDocs with this registry's step kinds and measurements. The
// documents' nodes become the scenario's (positions of its errors, inline manifests):
// they must not be changed afterwards.
func (r *Registry) ParseDocs(file string, docs []*yamlpos.Doc, baseDir string) (*Scenario, error) {
	switch {
	case len(docs) == 0:
		return nil, &yamlpos.Error{File: file, Line: 1, Msg: "empty file (no YAML document, or only comments): expected a Scenario (apiVersion: " + APIVersion + ", kind: " + Kind + ")"}
	case len(docs) > 1:
		return nil, &yamlpos.Error{File: file, Line: docs[1].Line(), Msg: "a scenario file holds one document; put Kubernetes objects in manifest files"}
	}
	doc := docs[0]
	s := &Scenario{File: file, BaseDir: baseDir, doc: doc, registry: r}
	// One budget and one cache for every decode of the file: its steps, their params and
	// its inline manifests.
	shared := yamlpos.NewSharedFor(doc)
	if err := (yamlpos.Decoder{Shared: shared}).Decode(doc, s); err != nil {
		return nil, err
	}
	if errs := s.decodeSteps(shared); len(errs) > 0 {
		return nil, errs
	}
	s.Default()

	// Everything the validation of references needs: manifests (parsed with the
	// topology's node port range) and the proxy configuration file.
	var errs yamlpos.Errors
	parser := manifest.Parser{Shared: shared}
	if r, err := manifest.ParsePortRange(s.Topology.NodePortRange); err == nil {
		parser.NodePortRange = r
	}
	files := map[string]parsedFile{} // a file named by several references is read once
	resolve := func(refs []ManifestRef, p *field.Path) {
		for i := range refs {
			if len(errs) >= maxErrors {
				return // hopeless: Validate is not reached either
			}
			errs = append(errs, s.resolveManifest(parser, files, doc, &refs[i], p.Index(i))...)
		}
	}
	resolve(s.Manifests, field.NewPath("manifests"))
	for i := range s.Steps {
		if m, ok := s.Steps[i].Action.(manifestReferrer); ok {
			resolve(m.ManifestRefs(), field.NewPath("steps").Index(i).Child(s.Steps[i].Kind, "manifests"))
		}
	}
	if s.Proxy != nil && s.Proxy.ProxyConfigFile != "" {
		c, warnings, err := LoadProxyConfig(s.resolvePath(s.Proxy.ProxyConfigFile))
		s.Warnings = append(s.Warnings, warnings...)
		if err != nil {
			if l := yamlpos.AsErrors(err); l != nil {
				errs = append(errs, referencedFileErrors(doc, "proxy.proxyConfigFile", l)...)
			} else {
				errs = append(errs, doc.Errorf("proxy.proxyConfigFile", "%v", err))
			}
		} else {
			s.ProxyConfig = c
			setDefault(&s.ProxyConfig.ClusterCIDR, s.Topology.PodCIDR)
		}
	}
	if len(errs) >= maxErrors {
		return nil, append(errs, &yamlpos.Error{File: file, Msg: fmt.Sprintf("too many errors (more than %d), giving up", maxErrors)})
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, yamlpos.AsErrors(err)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// referencedFileErrors places the errors of a file the scenario references: an error
// about a field stays in that file (file:line:field there), an error about the whole
// file (empty, not a mapping: perhaps not a file of ours at all) is reported at the
// scenario's field that names the file (path), with the file's own position in the
// message.
func referencedFileErrors(doc *yamlpos.Doc, path string, errs yamlpos.Errors) yamlpos.Errors {
	out := make(yamlpos.Errors, 0, len(errs))
	for _, e := range errs {
		if e.Field != "" || e.File == doc.File {
			out = append(out, e)
			continue
		}
		out = append(out, doc.Errorf(path, "%s", e.Error()))
	}
	return out
}

// manifestReferrer is an action that names manifests (apply, delete): Load reads and
// checks them before validation.
type manifestReferrer interface {
	// ManifestRefs returns the action's manifest references; Load sets their Objects in
	// place.
	ManifestRefs() []ManifestRef
}

// decodeSteps decodes every step's action through the registry: exactly one registered
// kind's key per step, its value decoded strictly by that kind.
func (s *Scenario) decodeSteps(shared *yamlpos.Shared) yamlpos.Errors {
	var errs yamlpos.Errors
	kinds := s.registry.StepNames()
	at := func(line int, p *field.Path, format string, args ...any) {
		errs = append(errs, &yamlpos.Error{File: s.doc.File, Line: line, Field: p.String(), Msg: fmt.Sprintf(format, args...)})
	}
	for i := range s.Steps {
		if len(errs) >= maxErrors {
			return append(errs, &yamlpos.Error{File: s.doc.File, Msg: fmt.Sprintf("too many errors (more than %d), giving up", maxErrors)})
		}
		st := &s.Steps[i]
		var found []yamlpos.Entry
		for j, e := range st.Rest {
			if _, ok := s.registry.Step(e.Key.Value); ok {
				// The first is a view of Rest (capacity 1: a second one copies), so that
				// the common step, with one action, allocates nothing here.
				if found == nil {
					found = st.Rest[j : j+1 : j+1]
				} else {
					found = append(found, e)
				}
				continue
			}
			hint := ""
			if c := yamlpos.Closest(e.Key.Value, append(kinds, "name", "continueOnFailure", "knownFailure")); c != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", c)
			}
			at(e.Key.Line, e.Path, "unknown field%s: a step is one of %s", hint, strings.Join(kinds, ", "))
		}
		// The step's path and line, for the errors about the step as a whole.
		stepAt := func(format string, args ...any) {
			p := field.NewPath("steps").Index(i)
			at(s.doc.FieldLine(p.String()), p, format, args...)
		}
		switch {
		case len(found) == 0 && len(st.Rest) == 0:
			stepAt("Required value: one action: %s", strings.Join(kinds, ", "))
			continue
		case len(found) == 0:
			continue
		case len(found) > 1:
			var names []string
			for _, e := range found {
				names = append(names, e.Key.Value)
			}
			stepAt("Forbidden: a step has exactly one action, found %s", strings.Join(names, ", "))
			continue
		}
		e := found[0]
		kind, _ := s.registry.Step(e.Key.Value)
		a, err := kind.Decode(Input{Doc: &yamlpos.Doc{File: s.doc.File, Node: e.Value, Base: e.Path}, Registry: s.registry, Shared: shared})
		if err != nil {
			errs = append(errs, yamlpos.AsErrors(err)...)
			if yamlpos.AsErrors(err) == nil {
				at(e.Key.Line, e.Path, "%v", err)
			}
			continue
		}
		st.Kind, st.Action = kind.Name(), a
	}
	return errs
}

// resolvePath returns p relative to the scenario's BaseDir (absolute paths unchanged).
func (s *Scenario) resolvePath(p string) string {
	if filepath.IsAbs(p) || s.BaseDir == "" {
		return p
	}
	return filepath.Join(s.BaseDir, p)
}

// parsedFile is a manifest file read for a scenario: its objects, or why it could not be
// read (readErr) or parsed (errs).
type parsedFile struct {
	objs    []manifest.Object
	readErr error
	errs    yamlpos.Errors
}

// resolveManifest fills ref.Objects from its file (read once per parse: files holds what
// was read) or inline object.
func (s *Scenario) resolveManifest(parser manifest.Parser, files map[string]parsedFile, doc *yamlpos.Doc, ref *ManifestRef, p *field.Path) yamlpos.Errors {
	switch {
	case ref.File != "" && ref.Inline == nil:
		path := s.resolvePath(ref.File)
		f, seen := files[path]
		if !seen {
			data, err := os.ReadFile(path)
			f.readErr = err
			if err == nil {
				objs, err := manifest.Parser{NodePortRange: parser.NodePortRange}.Parse(path, data)
				f.objs, f.errs = objs, yamlpos.AsErrors(err)
			}
			files[path] = f
		}
		switch {
		case f.readErr != nil:
			return yamlpos.Errors{doc.Errorf(p.Child("file").String(), "cannot read manifest: %v", f.readErr)}
		case seen && f.errs != nil:
			return nil // reported at the first reference
		case f.errs != nil:
			return referencedFileErrors(doc, p.Child("file").String(), f.errs)
		case len(f.objs) == 0:
			return yamlpos.Errors{doc.Errorf(p.Child("file").String(), "%s holds no objects", ref.File)}
		}
		ref.Objects = f.objs
	case ref.Inline != nil && ref.File == "":
		inline := &yamlpos.Doc{File: doc.File, Node: ref.Inline, Base: p.Child("inline")}
		objs, err := parser.ParseObjects(inline)
		if err != nil {
			return yamlpos.AsErrors(err)
		}
		ref.Objects = objs
	}
	return nil
}
