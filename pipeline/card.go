package pipeline

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/eval"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/textenc"
)

// CardFile is the model card written beside the model.
const CardFile = "README.md"

// writeCard writes the model card: what the model is, what it was made
// from and how, how it scores, what it costs, how to sample it, in the
// layout model hubs show (a YAML front matter, then Markdown).
func writeCard(out string, r *recipes.Recipe, m *model, sum *Summary) error {
	var b strings.Builder
	var base *checkpoint.Base
	licence := ""
	if r.Base != nil {
		var err error
		if base, err = checkpoint.DescribeBase(r.BasePath(), false); err != nil {
			return err
		}
		licence = baseLicence(r.BasePath())
	}
	name := m.name // DiT, Z-Image: the family's; a DC model is DC-<its teacher's>
	if m.dc != nil {
		name = "DC-" + name
	}
	fmt.Fprintf(&b, "---\nlibrary_name: dcdit\ntags:\n- diffusion\n- %s\n", strings.ToLower(strings.ReplaceAll(name, " ", "-")))
	if licence != "" {
		fmt.Fprintf(&b, "license: %s\n", yamlString(licence))
	}
	if base != nil {
		fmt.Fprintf(&b, "base_model: %s\n", yamlString(base.Path))
	}
	b.WriteString("---\n\n")

	fmt.Fprintf(&b, "# %s\n\n", r.Name)
	switch {
	case m.dc != nil && m.captionDim > 0 && base != nil:
		fmt.Fprintf(&b, "A %s upcycled by dcdit from the %s `%s`: a learned encoder, router and decoder replace its fixed patchify on the image tokens (captions stay whole), so one checkpoint runs at any compute budget chosen at sampling time (the tail-drop fraction ρ). %s\n\n", name, m.name, base.Path, captionSource(m))
	case m.dc != nil && base != nil:
		fmt.Fprintf(&b, "A %s upcycled by dcdit from the %s `%s`: a learned encoder, router and decoder replace the teacher's fixed patchify, so one checkpoint runs at any compute budget chosen at sampling time (the tail-drop fraction ρ).\n\n", name, m.name, base.Path)
	case m.dc != nil:
		fmt.Fprintf(&b, "A %s trained from scratch by dcdit: its router chooses the tokens, so one checkpoint runs at any compute budget chosen at sampling time (the tail-drop fraction ρ).\n\n", name)
	case base != nil:
		fmt.Fprintf(&b, "A %s finetuned by dcdit from `%s`.\n\n", name, base.Path)
	case m.captionDim > 0:
		fmt.Fprintf(&b, "A %s (caption-conditioned) trained from scratch by dcdit with %s, its captions read through a fixed embedding table that stands in for the text encoder.\n\n", name, processName(m.fixed.Process()))
	default:
		fmt.Fprintf(&b, "A %s trained from scratch by dcdit with %s.\n\n", name, processName(m.fixed.Process()))
	}

	b.WriteString("## Model\n\n")
	fmt.Fprintf(&b, "- file: `%s` (%d parameters", m.fileName(), len(m.params.Data))
	captions := func() {
		fmt.Fprintf(&b, "- captions: %d-word vocabulary, embedding table of width %d from seed %d (`shapes.EmbeddingTable`; the metadata key `%s` records it)\n",
			len(m.captions.info.Vocabulary), m.captions.info.Dim, m.captions.info.Seed, shapes.CaptionTableKey)
	}
	switch {
	case m.fixed != nil:
		format := "its family's own format"
		if f, ok := m.fixed.(family.FileFormatted); ok {
			format = f.FileFormat()
		}
		fmt.Fprintf(&b, "; %s)\n- %s, %d latent channels\n", format, summary(m.fixed), m.fixed.InChannels())
		if m.captions != nil {
			captions()
		}
	case m.dc != nil:
		c := m.dc.Config
		fmt.Fprintf(&b, "; a DC checkpoint: `dcdit inspect` reads its architecture from the metadata)\n")
		fmt.Fprintf(&b, "- latents: %d channels on a %d×%d grid; scaffold cells of %d×%d latents (%d cells), encoder/decoder width %d, model width %d, %d encoder and %d decoder conv blocks, target compression N = %g\n",
			c.InChannels, c.GridRows, c.GridCols, c.Patch(), c.Patch(), c.Cells(), c.EncDecDim, c.ModelDim, c.EncoderBlocks, c.DecoderBlocks, c.TargetN)
		fmt.Fprintf(&b, "- trained tail-drop fractions ρ: %s\n", floats(trainedRhos(r)))
		switch {
		case m.captions != nil:
			captions()
		case m.prompts != nil:
			fmt.Fprintf(&b, "- captions: text-encoder features of width %d; the checkpoint records no caption table, so `--prompt` needs `--text-encoder`\n", m.captionDim)
		}
	}
	if base != nil {
		fmt.Fprintf(&b, "- base model: `%s` (%s, %s layout", base.Path, base.Architecture, base.Layout)
		if base.SHA256 != "" {
			fmt.Fprintf(&b, ", sha256 %s", base.SHA256)
		} else {
			fmt.Fprintf(&b, ", %d bytes, modified %s", base.Size, base.ModTime)
		}
		b.WriteString(")\n")
		if licence != "" {
			fmt.Fprintf(&b, "- licence of the base model (from its metadata): %s — this model derives from it\n", licence)
		} else {
			b.WriteString("- licence of the base model: not stated in its metadata; check where it came from before sharing this model\n")
		}
	}

	b.WriteString("\n## Training\n\n| stage | steps | seconds | last loss |\n|---|---|---|---|\n")
	for _, s := range sum.Stages {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.4g |\n", s.Stage, s.Steps, s.Seconds, s.Last.Loss)
	}
	b.WriteString("\nThe recipe (`dcdit upcycle` or `dcdit train` with it reproduces this model):\n\n```toml\n")
	b.WriteString(strings.TrimRight(r.Text, "\n"))
	b.WriteString("\n```\n")

	if rep := sum.Eval; rep != nil {
		writeCardEval(&b, rep, sum.Files)
	}

	writeCardSampling(&b, r, m)
	return atomicfile.Write(filepath.Join(out, CardFile), func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// writeCardSampling writes the card's sampling section.
func writeCardSampling(b *strings.Builder, r *recipes.Recipe, m *model) {
	b.WriteString("\n## Sampling\n\n```sh\n")
	switch {
	case m.fixed != nil && m.captionDim > 0:
		L := r.Model.InputSize
		fmt.Fprintf(b, "dcdit sample model --prompt \"a red disc\" --prompt \"a large blue square on left\" --size %dx%d --steps 25 --shift %g --cfg 4 --png samples.png\n", L, L, r.Diffusion.Shift)
		b.WriteString("```\n\n`--prompt` takes words of the vocabulary above, which the recorded table turns into caption features; guidance contrasts each with the empty prompt, as training dropped captions.\n")
		return
	case m.dc != nil:
		rho := 0.0
		if rs := trainedRhos(r); len(rs) > 0 {
			rho = rs[len(rs)/2]
		}
		// The flags sampling as the evaluation did takes, when the model
		// does not record them (save: only an evaluated model does).
		settings := ""
		if r.Base == nil {
			if r.Eval.DenseBelow > 0 {
				settings = fmt.Sprintf(" --dense-below %g", r.Eval.DenseBelow)
			}
			if r.Eval.CoarseFrom > 0 {
				settings += fmt.Sprintf(" --coarse-from %g --coarse-rho %g", r.Eval.CoarseFrom, r.Eval.CoarseRho)
			}
			settings += fmt.Sprintf(" --cfg %g --steps %d", r.Eval.CFG, r.Eval.SamplingSteps)
			if m.prompts != nil || m.captions != nil {
				settings += fmt.Sprintf(" --shift %g", r.Diffusion.Shift)
			}
		}
		if m.prompts != nil {
			// The repository holding the text encoder the prompts ran through.
			te, _, _ := textenc.Locate(r.BasePath())
			fmt.Fprintf(b, "dcdit sample model.safetensors --prompt \"a red disc\" --text-encoder %s --rho %g%s --png samples.png\n", filepath.Dir(te), rho, settings)
			break
		}
		if m.captions != nil {
			fmt.Fprintf(b, "dcdit sample model.safetensors --prompt \"a red disc\" --prompt \"a large blue square on left\" --rho %g%s --png samples.png\n", rho, settings)
			break
		}
		fmt.Fprintf(b, "dcdit sample model.safetensors --class 0 --num 8 --rho %g%s --png samples.png\n", rho, settings)
	default:
		b.WriteString("dcdit sample model.safetensors --class 0 --num 8 --png samples.png\n")
	}
	b.WriteString("```\n")
	if m.dc != nil {
		b.WriteString("\n`--rho` chooses the budget (the share of the router's boundaries dropped)")
		if r.Base != nil {
			fmt.Fprintf(b, "; the model records how the evaluation above sampled (%s), which `dcdit sample` and `dcdit eval` use unless told otherwise (`--steps`, `--cfg`, `--dense-below`)", sampling(r))
		}
		switch {
		case m.prompts != nil:
			b.WriteString("; `--prompt` runs through the base repository's text encoder (`--text-encoder`), and guidance contrasts each with the empty prompt")
		case m.captions != nil:
			b.WriteString("; `--prompt` takes words of the vocabulary above, and guidance contrasts each with the empty prompt")
		}
		b.WriteString(".\n")
	}
}

// writeCardEval writes the evaluation section: one row per ρ, the
// Lite-CFG pair and the teacher, then the pictures.
func writeCardEval(b *strings.Builder, rep *eval.Report, files []string) {
	fmt.Fprintf(b, "\n## Evaluation\n\nAgainst the teacher, %d samples per row from the same noise, %d sampling steps, guidance %g, seed %d", rep.NumSamples, rep.Steps, rep.CFG, rep.Seed)
	if rep.DataFDFloor != nil {
		fmt.Fprintf(b, "; Fréchet distance (FD) on the bundled feature network's features, whose floor between two sets of real data is %.2f", *rep.DataFDFloor)
	}
	if rep.CFG > 1 {
		b.WriteString(". GFLOPs per image count both guidance branches along the whole sampling run.\n\n")
	} else {
		b.WriteString(". GFLOPs per image count the whole sampling run.\n\n")
	}
	rep.WriteMarkdown(b)
	if rep.HasRandomRouter() {
		b.WriteString("\nThe random router draws each row's samples again from the same noise with the kept cells chosen uniformly at random, as many in every sample at every step as the router kept: the gap to it is what the router's choice is worth.\n")
	}
	if rep.EdgeDensityRatio != nil {
		fmt.Fprintf(b, "\nEdge density ratio (how much more densely the router keeps shape edges than flat background at ρ = 0): %.2f.\n", *rep.EdgeDensityRatio)
	}
	var pics []string
	for _, f := range files {
		if strings.HasSuffix(f, ".png") {
			pics = append(pics, filepath.Base(f))
		}
	}
	if len(pics) > 0 {
		b.WriteString("\n")
		for _, p := range pics {
			fmt.Fprintf(b, "![%s](%s)\n", strings.TrimSuffix(p, ".png"), p)
		}
		fmt.Fprintf(b, "\n`%s` has every number above and more.\n", eval.JSONFile)
	}
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%g", x)
	}
	return strings.Join(s, ", ")
}

// yamlString quotes s for a YAML scalar.
func yamlString(s string) string { return fmt.Sprintf("%q", s) }

// baseLicence is the licence the base checkpoint's own files state: a
// "license" (or "licence") entry of its safetensors metadata or
// config.json, or the license: line of a model-hub README.md front matter
// beside it; "" when none says.
func baseLicence(path string) string {
	if ck, err := loaders.Open(path); err == nil {
		defer ck.Close()
		for _, k := range []string{"license", "licence"} {
			if v := strings.TrimSpace(ck.Metadata[k]); v != "" {
				return v
			}
			if v, ok := ck.Config[k].(string); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
	}
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
	}
	f, err := os.Open(filepath.Join(dir, "README.md"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "---" {
		return ""
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			break
		}
		if v, ok := strings.CutPrefix(line, "license:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// captionSource says where a DC-Z-Image's training captions came from.
func captionSource(m *model) string {
	if m.prompts != nil {
		return "It was trained on the base's own samples for a prompt list, the prompts encoded by the base repository's Qwen3 text encoder (`data.prompts`); sample it with `--prompt` and `--text-encoder`."
	}
	return "Captions are read through the base's fixed embedding table, which stands in for the text encoder."
}

// processName names a diffusion process in prose.
func processName(p string) string {
	if p == family.ProcessFlowMatching {
		return "flow matching"
	}
	return strings.ToUpper(p)
}
