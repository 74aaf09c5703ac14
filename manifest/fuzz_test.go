package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzParse checks that Parse never panics, and that whatever it accepts is valid
// (defaulting again changes nothing and validation passes) and survives a round trip
// through JSON (which is YAML) unchanged.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"nginx-nodeport.yaml", "inference.yaml"} {
		data, err := os.ReadFile(filepath.Join(examples, p))
		require.NoError(f, err)
		f.Add(data)
	}
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(svc("  type: LoadBalancer", "  sessionAffinity: ClientIP", "  externalIPs: [1.2.3.4]", "  ports: [{name: a, port: 80, targetPort: http}, {name: b, port: 53, protocol: UDP}]")))
	f.Add([]byte(slice("addressType: IPv4", "ports: [{port: 80, name: http}]", "endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}, nodeName: n1}]")))
	f.Add([]byte("a: &a [1, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parser{}.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, o := range objs {
			before, err := json.Marshal(o.Object)
			require.NoError(t, err)
			again := o.Object.DeepCopyObject().(KubeObject)
			SetDefaults(again)
			after, err := json.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(before), string(after), "SetDefaults is not idempotent")
			require.Empty(t, Parser{}.Validate(again), "accepted object does not re-validate")

			rt, err := Parser{}.Parse("roundtrip.json", before)
			require.NoError(t, err, "accepted object does not parse back from %s", before)
			require.Len(t, rt, 1)
			require.Equal(t, o.Key(), rt[0].Key())
			require.True(t, equalObjects(o.Object, rt[0].Object), "round trip changed the object:\n%s", before)
		}
	})
}

func equalObjects(a, b runtime.Object) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
