package vae

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Naming is a VAE checkpoint's tensor naming.
type Naming int

// The namings a VAE is stored in.
const (
	// Diffusers is AutoencoderKL's state dict: encoder.down_blocks.0.resnets.0.conv1.weight,
	// mid_block.attentions.0.to_q.weight as a Linear weight [C, C], …
	Diffusers Naming = iota + 1
	// LDM is the original latent-diffusion naming of Stable Diffusion
	// single-file checkpoints (under LDMPrefix) and FLUX.1's ae.safetensors
	// (no prefix): encoder.down.0.block.0.conv1.weight, mid.attn_1.q.weight
	// as a 1×1 conv weight [C, C, 1, 1], decoder.up.N in reverse order, …
	LDM
)

// LDMPrefix prefixes the VAE's tensors inside a Stable Diffusion
// single-file checkpoint, beside the UNet's and the text encoder's.
const LDMPrefix = "first_stage_model."

// String returns "diffusers" or "ldm".
func (n Naming) String() string {
	switch n {
	case Diffusers:
		return "diffusers"
	case LDM:
		return "ldm"
	}
	return fmt.Sprintf("Naming(%d)", int(n))
}

// The leaf names that differ between the namings: a resnet's 1×1 shortcut
// and the mid attention's norm and projections. Each table lists diffusers'
// name, then LDM's.
var (
	resnetLeafNames = [][2]string{{"norm1", "norm1"}, {"conv1", "conv1"}, {"norm2", "norm2"}, {"conv2", "conv2"}, {"conv_shortcut", "nin_shortcut"}}
	attnLeafNames   = [][2]string{{"group_norm", "norm"}, {"to_q", "q"}, {"to_k", "k"}, {"to_v", "v"}, {"to_out.0", "proj_out"}}
	// The attention names of diffusers checkpoints before 0.14, then the
	// current ones.
	deprecatedAttnNames = [][2]string{{"query", "to_q"}, {"key", "to_k"}, {"value", "to_v"}, {"proj_attn", "to_out.0"}}
)

// lookup finds name in column from of table and returns the other column.
func lookup(table [][2]string, name string, from int) (string, bool) {
	for _, row := range table {
		if row[from] == name {
			return row[1-from], true
		}
	}
	return "", false
}

// index parses a block or layer index as the state dicts write it: a
// decimal without sign or leading zeros.
func index(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// splitParam cuts ".weight" or ".bias" off name.
func splitParam(name string) (module, param string, ok bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", "", false
	}
	module, param = name[:i], name[i+1:]
	return module, param, param == "weight" || param == "bias"
}

// DiffusersToLDM maps a diffusers AutoencoderKL tensor name to its LDM
// name (without LDMPrefix), for a VAE of numBlocks down (and up) blocks:
// diffusers numbers the decoder's up_blocks from the latent side, LDM's
// decoder.up from the image side, so up_blocks.i is up.(numBlocks−1−i).
// The pre-0.14 attention names (query, key, value, proj_attn) are
// accepted too. It reports false for a name that is not a VAE tensor.
// The tensor's values carry over unchanged; only the mid attention's
// projection weights change shape (AttentionProjection).
func DiffusersToLDM(name string, numBlocks int) (string, bool) {
	return mapName(name, numBlocks, diffusersModuleToLDM)
}

// mapName maps a VAE tensor name through module, which renames the
// module path under encoder or decoder; the quant convolutions keep their
// names in both namings.
func mapName(name string, numBlocks int, module func(part, m string, numBlocks int) (string, bool)) (string, bool) {
	mod, param, ok := splitParam(name)
	if !ok {
		return "", false
	}
	if mod == "quant_conv" || mod == "post_quant_conv" {
		return name, true
	}
	part, rest, _ := strings.Cut(mod, ".")
	if part != "encoder" && part != "decoder" {
		return "", false
	}
	m, ok := module(part, rest, numBlocks)
	if !ok {
		return "", false
	}
	return part + "." + m + "." + param, true
}

func diffusersModuleToLDM(part, m string, numBlocks int) (string, bool) {
	switch m {
	case "conv_in", "conv_out":
		return m, true
	case "conv_norm_out":
		return "norm_out", true
	}
	s := strings.Split(m, ".")
	switch {
	case len(s) == 4 && s[0] == "mid_block" && s[1] == "resnets" && (s[2] == "0" || s[2] == "1"):
		leaf, ok := lookup(resnetLeafNames, s[3], 0)
		if !ok {
			return "", false
		}
		return "mid.block_" + map[string]string{"0": "1", "1": "2"}[s[2]] + "." + leaf, true
	case len(s) >= 4 && s[0] == "mid_block" && s[1] == "attentions" && s[2] == "0":
		a := strings.Join(s[3:], ".")
		if d, ok := lookup(deprecatedAttnNames, a, 0); ok {
			a = d
		}
		leaf, ok := lookup(attnLeafNames, a, 0)
		if !ok {
			return "", false
		}
		return "mid.attn_1." + leaf, true
	}
	blocks, sampler := "down_blocks", "downsamplers"
	if part == "decoder" {
		blocks, sampler = "up_blocks", "upsamplers"
	}
	if len(s) < 4 || s[0] != blocks {
		return "", false
	}
	i, ok := index(s[1])
	if !ok || i >= numBlocks {
		return "", false
	}
	b := i
	if part == "decoder" {
		b = numBlocks - 1 - i
	}
	ldmBlock := fmt.Sprintf("%s.%d.", map[string]string{"encoder": "down", "decoder": "up"}[part], b)
	switch {
	case len(s) == 5 && s[2] == "resnets":
		j, ok := index(s[3])
		leaf, ok2 := lookup(resnetLeafNames, s[4], 0)
		if !ok || !ok2 {
			return "", false
		}
		return ldmBlock + "block." + strconv.Itoa(j) + "." + leaf, true
	case len(s) == 5 && s[2] == sampler && s[3] == "0" && s[4] == "conv":
		return ldmBlock + map[string]string{"encoder": "downsample", "decoder": "upsample"}[part] + ".conv", true
	}
	return "", false
}

// LDMToDiffusers maps an LDM VAE tensor name (without LDMPrefix) to its
// diffusers name, for a VAE of numBlocks blocks (see DiffusersToLDM). It
// reports false for a name that is not a VAE tensor.
func LDMToDiffusers(name string, numBlocks int) (string, bool) {
	return mapName(name, numBlocks, ldmModuleToDiffusers)
}

func ldmModuleToDiffusers(part, m string, numBlocks int) (string, bool) {
	switch m {
	case "conv_in", "conv_out":
		return m, true
	case "norm_out":
		return "conv_norm_out", true
	}
	s := strings.Split(m, ".")
	switch {
	case len(s) == 3 && s[0] == "mid" && (s[1] == "block_1" || s[1] == "block_2"):
		leaf, ok := lookup(resnetLeafNames, s[2], 1)
		if !ok {
			return "", false
		}
		return "mid_block.resnets." + map[string]string{"block_1": "0", "block_2": "1"}[s[1]] + "." + leaf, true
	case len(s) == 3 && s[0] == "mid" && s[1] == "attn_1":
		leaf, ok := lookup(attnLeafNames, s[2], 1)
		if !ok {
			return "", false
		}
		return "mid_block.attentions.0." + leaf, true
	}
	blocks, sampler, ldmBlocks, ldmSampler := "down_blocks", "downsamplers", "down", "downsample"
	if part == "decoder" {
		blocks, sampler, ldmBlocks, ldmSampler = "up_blocks", "upsamplers", "up", "upsample"
	}
	if len(s) < 4 || s[0] != ldmBlocks {
		return "", false
	}
	b, ok := index(s[1])
	if !ok || b >= numBlocks {
		return "", false
	}
	i := b
	if part == "decoder" {
		i = numBlocks - 1 - b
	}
	block := fmt.Sprintf("%s.%d.", blocks, i)
	switch {
	case len(s) == 4 && s[2] == ldmSampler && s[3] == "conv":
		return block + sampler + ".0.conv", true
	case len(s) == 5 && s[2] == "block":
		j, ok := index(s[3])
		leaf, ok2 := lookup(resnetLeafNames, s[4], 1)
		if !ok || !ok2 {
			return "", false
		}
		return block + "resnets." + strconv.Itoa(j) + "." + leaf, true
	}
	return "", false
}

// AttentionProjection reports whether the diffusers-named tensor is one of
// the mid attention's projection weights, a Linear weight [C, C] in the
// diffusers naming and a 1×1 conv weight [C, C, 1, 1] in the LDM naming
// (same values, same order).
func AttentionProjection(diffusersName string) bool {
	for _, p := range []string{"encoder.", "decoder."} {
		rest, ok := strings.CutPrefix(diffusersName, p+"mid_block.attentions.0.")
		if !ok {
			continue
		}
		leaf, ok := strings.CutSuffix(rest, ".weight")
		if !ok {
			return false
		}
		if d, ok := lookup(deprecatedAttnNames, leaf, 0); ok {
			leaf = d
		}
		return leaf == "to_q" || leaf == "to_k" || leaf == "to_v" || leaf == "to_out.0"
	}
	return false
}

// TensorSpec names a tensor and its shape.
type TensorSpec struct {
	Name  string
	Shape []int64
}

// Rename is one tensor of a conversion between namings: its name and
// shape in the source, and in the target. Its values are the same bytes.
type Rename struct {
	From, To           string
	FromShape, ToShape []int64
}

// Source is what DetectNaming finds in a tensor list: the naming of its
// VAE tensors, their prefix (LDMPrefix inside a full Stable Diffusion
// checkpoint, else empty), the number of down/up blocks, and the VAE
// tensors with their diffusers names (sorted by that name; the tensors of
// other models under other prefixes are left out).
type Source struct {
	Naming    Naming
	Prefix    string
	NumBlocks int
	// Tensors lists each VAE tensor: From its name and shape in the file,
	// To its diffusers name and shape.
	Tensors []Rename
}

// DetectNaming tells which naming tensors use and maps every VAE tensor
// to its diffusers name. A tensor list holding LDMPrefix names is read as
// a full Stable Diffusion checkpoint: only those names are the VAE's.
// Otherwise every tensor must be a VAE tensor of one naming; an unknown
// name, two names for one diffusers tensor or a list without VAE tensors
// is an error.
func DetectNaming(tensors []TensorSpec) (*Source, error) {
	prefix := ""
	for _, t := range tensors {
		if strings.HasPrefix(t.Name, LDMPrefix) {
			prefix = LDMPrefix
			break
		}
	}
	var names []string
	shapes := map[string][]int64{}
	for _, t := range tensors {
		if n, ok := strings.CutPrefix(t.Name, prefix); ok {
			names = append(names, n)
			shapes[n] = t.Shape
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no tensors")
	}
	best, bestHits := Naming(0), 0
	for _, cand := range []Naming{Diffusers, LDM} {
		n := countBlocks(names, cand)
		hits := 0
		for _, name := range names {
			if _, ok := toDiffusers(name, cand, n); ok && differs(name) {
				hits++
			}
		}
		if hits > bestHits {
			best, bestHits = cand, hits
		}
	}
	if best == 0 {
		if prefix != "" {
			best = LDM
		} else {
			best = Diffusers
		}
	}
	src := &Source{Naming: best, Prefix: prefix, NumBlocks: countBlocks(names, best)}
	var unknown []string
	seen := map[string]string{}
	for _, name := range names {
		d, ok := toDiffusers(name, best, src.NumBlocks)
		if !ok {
			unknown = append(unknown, strconv.Quote(prefix+name))
			continue
		}
		if prev, dup := seen[d]; dup {
			return nil, fmt.Errorf("tensors %q and %q are both %s", prefix+prev, prefix+name, d)
		}
		seen[d] = name
		to := slices.Clone(shapes[name])
		if AttentionProjection(d) && len(to) == 4 && to[2] == 1 && to[3] == 1 {
			to = to[:2]
		}
		src.Tensors = append(src.Tensors, Rename{From: prefix + name, To: d, FromShape: shapes[name], ToShape: to})
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("not AutoencoderKL tensors in the %s naming: %s", best, capped(unknown, ", ", 8))
	}
	if len(src.Tensors) == 0 {
		return nil, fmt.Errorf("no AutoencoderKL tensors")
	}
	sort.Slice(src.Tensors, func(i, j int) bool { return src.Tensors[i].To < src.Tensors[j].To })
	return src, nil
}

// toDiffusers maps a name in naming n to its canonical diffusers name
// (deprecated attention names included).
func toDiffusers(name string, n Naming, numBlocks int) (string, bool) {
	if n == LDM {
		return LDMToDiffusers(name, numBlocks)
	}
	ldm, ok := DiffusersToLDM(name, numBlocks)
	if !ok {
		return "", false
	}
	return LDMToDiffusers(ldm, numBlocks)
}

// differs reports whether name is one that the namings spell differently:
// only such names tell them apart.
func differs(name string) bool {
	module, _, _ := splitParam(name)
	switch module {
	case "quant_conv", "post_quant_conv", "encoder.conv_in", "encoder.conv_out", "decoder.conv_in", "decoder.conv_out":
		return false
	}
	return true
}

// countBlocks is the number of down (or up) blocks names imply in naming
// n: one more than the largest block index.
func countBlocks(names []string, n Naming) int {
	heads := []string{"encoder.down_blocks.", "decoder.up_blocks."}
	if n == LDM {
		heads = []string{"encoder.down.", "decoder.up."}
	}
	count := 0
	for _, name := range names {
		for _, h := range heads {
			rest, ok := strings.CutPrefix(name, h)
			if !ok {
				continue
			}
			s, _, _ := strings.Cut(rest, ".")
			if i, ok := index(s); ok && i < maxBlocks {
				count = max(count, i+1)
			}
		}
	}
	return count
}

// maxBlocks bounds the block indices read from names, so that a corrupt
// name cannot size anything.
const maxBlocks = 64

// ConvertNames maps every VAE tensor of tensors (in either naming, see
// DetectNaming) to naming to, the LDM names under ldmPrefix (LDMPrefix for
// a Stable Diffusion single-file checkpoint, "" for FLUX's ae.safetensors).
// The mid attention's projection weights change shape ([C, C] ↔
// [C, C, 1, 1]); every other tensor keeps its shape, and every tensor its
// values. Tensors of other models (a full checkpoint's UNet) are dropped.
// The result is sorted by target name.
func ConvertNames(tensors []TensorSpec, to Naming, ldmPrefix string) ([]Rename, error) {
	src, err := DetectNaming(tensors)
	if err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	out := make([]Rename, 0, len(src.Tensors))
	for _, t := range src.Tensors {
		r := Rename{From: t.From, FromShape: t.FromShape, To: t.To, ToShape: slices.Clone(t.ToShape)}
		switch to {
		case Diffusers:
		case LDM:
			ldm, ok := DiffusersToLDM(t.To, src.NumBlocks)
			if !ok {
				return nil, fmt.Errorf("vae: tensor %q has no LDM name", t.From)
			}
			r.To = ldmPrefix + ldm
			if AttentionProjection(t.To) && len(r.ToShape) == 2 {
				r.ToShape = append(r.ToShape, 1, 1)
			}
		default:
			return nil, fmt.Errorf("vae: unknown target naming %v", to)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].To < out[j].To })
	return out, nil
}

// capped joins items with sep, listing at most n and counting the rest.
func capped(items []string, sep string, n int) string {
	if len(items) <= n {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s%sand %d more", strings.Join(items[:n], sep), sep, len(items)-n)
}
