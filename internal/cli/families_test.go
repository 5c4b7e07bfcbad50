package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// dcdit families lists the built-in families, as a table and as JSON,
// and takes no argument.
func TestFamilies(t *testing.T) {
	code, out, errOut := run(t, "families")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, kind := range []string{"dit", "hnet", "zimage"} {
		if !strings.Contains(out, kind+" ") {
			t.Errorf("families does not list %s:\n%s", kind, out)
		}
	}
	code, out, errOut = run(t, "families", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 3 || got["zimage"] == "" {
		t.Errorf("--json: %v, %v; want the three built-in kinds with their descriptions", got, err)
	}
	if code, _, errOut := run(t, "families", "extra"); code != 2 || !strings.Contains(errOut, "families") {
		t.Errorf("an argument: exit %d, %q; want a usage error", code, errOut)
	}
}
