package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/dctest"
)

// inspectJSON runs `dcdit inspect --json` and decodes the object.
func inspectJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := run(t, append([]string{"inspect", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	return res
}

// A DC checkpoint inspects as dcdit/dcdit with its config, parameters by
// scaffold part and backbone, and FLOPs at each trained ρ.
func TestInspectDCCheckpoint(t *testing.T) {
	path := dctest.Checkpoint(t)
	res := inspectJSON(t, path)
	if res["architecture"] != "dcdit" || res["layout"] != "dcdit" {
		t.Fatalf("architecture %v, layout %v", res["architecture"], res["layout"])
	}
	cfg := res["config"].(map[string]any)
	sc := cfg["scaffold"].(map[string]any)
	bb := cfg["backbone"].(map[string]any)
	if bb["kind"] != "hnet" || bb["config"].(map[string]any)["heads"] == nil || sc["target_n"] == nil || cfg["format_version"] != 1.0 {
		t.Errorf("config %v", cfg)
	}
	groups := res["parameters_by_group"].(map[string]any)
	var sum float64
	for _, g := range []string{"embedders", "encoder", "router", "decoder", "final_layer", "backbone"} {
		n, ok := groups[g].(float64)
		if !ok || !(n > 0) {
			t.Errorf("group %s = %v", g, groups[g])
		}
		sum += n
	}
	if sum != res["parameters"].(float64) || len(groups) != 6 {
		t.Errorf("groups %v do not add up to %v", groups, res["parameters"])
	}
	for _, k := range []string{"missing", "unexpected", "mismatched", "warnings"} {
		if l, _ := res[k].([]any); len(l) != 0 {
			t.Errorf("%s = %v, want none", k, l)
		}
	}
	rows := res["flops_per_rho"].([]any)
	rhos := cfg["trained_rhos"].([]any)
	if len(rows) != len(rhos) || len(rows) < 2 {
		t.Fatalf("flops_per_rho %v for trained ρ %v", rows, rhos)
	}
	L := int(sc["grid_rows"].(float64) * sc["grid_cols"].(float64))
	var last float64
	for i, r := range rows {
		row := r.(map[string]any)
		rho, kept, g := row["rho"].(float64), int(row["kept_tokens"].(float64)), row["gflops"].(float64)
		if rho != rhos[i].(float64) || kept != dc.AssumedKept(L, sc["target_n"].(float64), rho) {
			t.Errorf("row %v: want ρ %v keeping %d", row, rhos[i], dc.AssumedKept(L, sc["target_n"].(float64), rho))
		}
		if i > 0 && !(g < last) {
			t.Errorf("ρ %v: %v GFLOP, not below the previous %v", rho, g, last)
		}
		last = g
	}
	code, out, _ := run(t, "inspect", path)
	for _, want := range []string{"architecture   dcdit (dcdit naming)", "scaffold ", "backbone ", "hnet: ", "heads=", "trained ρ", "flops per ρ", "  ρ 0.3 ", "tokens kept", "  router ", "  backbone "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// Inspect reads headers only: a checkpoint whose tensor bytes are corrupted
// (loading it fails its checksum) inspects the same.
func TestInspectDCReadsHeadersOnly(t *testing.T) {
	path := dctest.Checkpoint(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-5] ^= 0xff
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := inspectJSON(t, path), inspectJSON(t, bad)
	delete(a, "path")
	delete(b, "path")
	delete(a, "shards")
	delete(b, "shards")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("inspect differs on corrupted data:\n%s\n%s", ja, jb)
	}
}

// A reference DC-DiT state_dict (official names, no metadata) is
// recognised; its sizes are inferred, the head count is said to be
// unknown, and --num-heads adds FLOPs per ρ at the paper's N.
func TestInspectDCReference(t *testing.T) {
	ref := filepath.Join(dctest.Cases(t)[0].Dir, "weights.safetensors")
	res := inspectJSON(t, ref)
	if res["architecture"] != "dcdit" || res["layout"] != "original" {
		t.Fatalf("architecture %v, layout %v", res["architecture"], res["layout"])
	}
	cfg := res["config"].(map[string]any)
	bb := cfg["backbone"].(map[string]any)["config"].(map[string]any)
	if _, ok := bb["heads"]; ok || bb["depth"] == nil || cfg["scaffold"].(map[string]any)["enc_dec_dim"] == nil {
		t.Errorf("config %v: want sizes and no heads", cfg)
	}
	warnings, _ := json.Marshal(res["warnings"])
	for _, want := range []string{"without dcdit metadata", "heads unknown", "--num-heads"} {
		if !strings.Contains(string(warnings), want) {
			t.Errorf("warnings %s lack %q", warnings, want)
		}
	}
	if _, ok := res["flops_per_rho"]; ok {
		t.Error("FLOPs per ρ without a head count")
	}
	for _, k := range []string{"missing", "unexpected", "mismatched"} {
		if l, _ := res[k].([]any); len(l) != 0 {
			t.Errorf("%s = %v, want none (pos_embed is expected here)", k, l)
		}
	}
	groups := res["parameters_by_group"].(map[string]any)
	if groups["router"] == nil || groups["backbone"] == nil || groups["other"] != nil {
		t.Errorf("groups %v", groups)
	}
	withHeads := inspectJSON(t, ref, "--num-heads", "4")
	rows, _ := withHeads["flops_per_rho"].([]any)
	if len(rows) != 3 || !strings.Contains(withHeads["flops_assumption"].(string), "assumed") {
		t.Errorf("flops_per_rho %v (%v)", rows, withHeads["flops_assumption"])
	}
	heads := withHeads["config"].(map[string]any)["backbone"].(map[string]any)["config"].(map[string]any)["heads"]
	if heads != 4.0 {
		t.Errorf("heads %v, want 4 from --num-heads", heads)
	}
	// Heads that do not divide the width are reported, not fatal.
	bad := inspectJSON(t, ref, "--num-heads", "7")
	if w, _ := json.Marshal(bad["warnings"]); !strings.Contains(string(w), "7 heads") {
		t.Errorf("warnings %s", w)
	}
	if bad["architecture"] != "dcdit" {
		t.Errorf("architecture %v", bad["architecture"])
	}

	// Exported with its YAML config beside it, the state dict states its
	// head count and trained ρ: its FLOPs per ρ are the DC checkpoint's.
	ckpt := dctest.Checkpoint(t)
	pt := filepath.Join(t.TempDir(), "dc-dit.pt")
	if code, _, stderr := run(t, "convert", ckpt, pt, "--layout", "official", "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	pair, dcRows := inspectJSON(t, pt), inspectJSON(t, ckpt)["flops_per_rho"]
	got, _ := json.Marshal(pair["flops_per_rho"])
	want, _ := json.Marshal(dcRows)
	if w, _ := json.Marshal(pair["warnings"]); string(got) != string(want) || strings.Contains(string(w), "heads unknown") {
		t.Errorf("official files: flops_per_rho %s, want the DC checkpoint's %s; warnings %s", got, want, w)
	}
}
