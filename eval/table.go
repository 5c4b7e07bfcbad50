package eval

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report as a text table: one line per ρ, then the
// teacher, the Lite-CFG pair and the edge density ratio.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	prompts := r.Teacher.PromptFollowing != nil
	prompt := func(q Quality) string {
		if !prompts {
			return ""
		}
		return optional(q.PromptFollowing, "%.3f") + "\t"
	}
	randoms, spreads := r.HasRandomRouter(), r.HasSpreadRandom()
	random := func(q RandomRouter) string {
		if !randoms {
			return ""
		}
		s := optional(q.FDRandomRouter, "%.2f") + "\t" + optional(q.AccuracyRandomRouter, "%.3f") + "\t"
		if prompts {
			s += optional(q.PromptFollowingRandomRouter, "%.3f") + "\t"
		}
		if spreads {
			s += optional(q.FDSpreadRandom, "%.2f") + "\t" + optional(q.AccuracySpreadRandom, "%.3f") + "\t"
			if prompts {
				s += optional(q.PromptFollowingSpreadRandom, "%.3f") + "\t"
			}
		}
		return s
	}
	fids := r.Teacher.FID != nil
	fid := func(q Quality) string {
		if !fids {
			return ""
		}
		return optional(q.FID, "%.2f") + "\t" + optional(q.IS, "%.2f") + "\t"
	}
	head := "ρ\tkept tokens\tGFLOPs/img\tms/img\tε rel MSE\tsample PSNR dB\t"
	if fids {
		head += "FID\tIS\t"
	}
	head += "FD\tclass acc\t"
	if prompts {
		head += "prompt\t"
	}
	if randoms {
		head += "random FD\trandom acc\t"
		if prompts {
			head += "random prompt\t"
		}
		if spreads {
			head += "apart FD\tapart acc\t"
			if prompts {
				head += "apart prompt\t"
			}
		}
	}
	fmt.Fprintf(tw, "%sRMS\t\n", head)
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%g\t%.1f / %d\t%.4g\t%.3g\t%.4g\t%.2f\t%s%s\t%s\t%s%s%s\t\n", row.Rho, row.KeptTokens, r.Tokens, row.GFLOPsPerImage, row.MsPerImage, row.EpsRelMSE, row.SamplePSNR,
			fid(row.Quality), optional(row.FD, "%.2f"), optional(row.ClassAccuracy, "%.3f"), prompt(row.Quality), random(row.RandomRouter), optional(row.RMS, "%.3f"))
	}
	fmt.Fprintf(tw, "teacher\t%d / %d\t%.4g\t%.3g\t\t\t%s%s\t%s\t%s%s%s\t\n", r.Teacher.Tokens, r.Tokens, r.Teacher.GFLOPsPerImage, r.Teacher.MsPerImage,
		fid(r.Teacher.Quality), optional(r.Teacher.FD, "%.2f"), optional(r.Teacher.ClassAccuracy, "%.3f"), prompt(r.Teacher.Quality), random(RandomRouter{}), optional(r.Teacher.RMS, "%.3f"))
	if err := tw.Flush(); err != nil {
		return err
	}
	if l := r.LiteCFG; l != nil {
		fmt.Fprintf(w, "Lite-CFG (scale %g, ρ cond %g / uncond %g): kept %.1f / %.1f tokens, %.4g GFLOPs/img (teacher with CFG %.4g), %.3g ms/img, ε rel MSE %.4g, sample PSNR %.2f dB",
			l.Scale, l.RhoCond, l.RhoUncond, l.KeptTokensCond, l.KeptTokensUncond, l.GFLOPsPerImage, l.TeacherGFLOPsPerImage, l.MsPerImage, l.EpsRelMSE, l.SamplePSNR)
		if l.FD != nil {
			fmt.Fprintf(w, ", FD %.2f (teacher %s), class accuracy %s (teacher %s)", *l.FD, optional(l.TeacherQuality.FD, "%.2f"),
				optional(l.ClassAccuracy, "%.3f"), optional(l.TeacherQuality.ClassAccuracy, "%.3f"))
		}
		if l.FID != nil {
			fmt.Fprintf(w, ", FID %.2f (teacher %s)", *l.FID, optional(l.TeacherQuality.FID, "%.2f"))
		}
		if l.PromptFollowing != nil {
			fmt.Fprintf(w, ", prompt following %.3f (teacher %s)", *l.PromptFollowing, optional(l.TeacherQuality.PromptFollowing, "%.3f"))
		}
		if l.FDRandomRouter != nil {
			fmt.Fprintf(w, "; random router: FD %.2f, class accuracy %s", *l.FDRandomRouter, optional(l.AccuracyRandomRouter, "%.3f"))
			if l.PromptFollowingRandomRouter != nil {
				fmt.Fprintf(w, ", prompt following %.3f", *l.PromptFollowingRandomRouter)
			}
		}
		if l.FDSpreadRandom != nil {
			fmt.Fprintf(w, "; kept apart: FD %.2f, class accuracy %s", *l.FDSpreadRandom, optional(l.AccuracySpreadRandom, "%.3f"))
			if l.PromptFollowingSpreadRandom != nil {
				fmt.Fprintf(w, ", prompt following %.3f", *l.PromptFollowingSpreadRandom)
			}
		}
		fmt.Fprintln(w)
	}
	if err := r.writeTeaCache(w, prompt); err != nil {
		return err
	}
	if f := r.FeatureNet; f != nil {
		fmt.Fprintf(w, "feature network: accuracy %.4f on %d data samples, %d features; data FD floor %s (two sets of %d); data RMS %.3f\n",
			f.Accuracy, f.Samples+f.FloorSamples, f.Dim, optional(r.DataFDFloor, "%.2f"), f.FloorSamples, f.DataRMS)
	}
	if len(r.Rows) > 0 && len(r.Rows[0].KeptPerStep) > 0 {
		fmt.Fprintf(w, "kept tokens per sampling step at ρ = %g (t = %d → %d): %s\n", r.Rows[0].Rho, r.SamplingTimesteps[0],
			r.SamplingTimesteps[len(r.SamplingTimesteps)-1], formatSeries(r.Rows[0].KeptPerStep))
	}
	switch e := r.Edges; {
	case e == nil:
	case r.EdgeDensityRatio == nil:
		fmt.Fprintf(w, "edge density ratio: n/a (edge cells kept %.1f%%, flat cells kept %.1f%%)\n", 100*e.EdgeKeptFraction, 100*e.FlatKeptFraction)
	default:
		ts := make([]string, len(e.Timesteps))
		for i, t := range e.Timesteps {
			ts[i] = strconv.Itoa(t)
		}
		src := ""
		if e.Derived {
			src = fmt.Sprintf("; edges derived from the latents, threshold %.3g", e.Threshold)
		}
		fmt.Fprintf(w, "edge density ratio: %.2f (ρ = 0; edge cells kept %.1f%%, flat cells kept %.1f%%; t = %s%s)\n",
			*r.EdgeDensityRatio, 100*e.EdgeKeptFraction, 100*e.FlatKeptFraction, strings.Join(ts, ", "), src)
	}
	if err := r.writeTimesteps(w); err != nil {
		return err
	}
	process := "DDPM"
	if r.Process == ProcessFlowMatching {
		process = "flow-matching Euler"
	}
	if r.Drop == "spread" {
		fmt.Fprintln(w, "drop: spread (ρ keeps as many boundaries as the tail drop, spread over the grid)")
	}
	if r.CoarseFrom > 0 {
		fmt.Fprintf(w, "coarse: the steps at t ≥ %g drop at least ρ = %g of their boundaries in every row with ρ > 0\n", r.CoarseFrom, r.CoarseRho)
	}
	if r.DenseTeacher {
		fmt.Fprintln(w, "dense teacher: the steps that keep every cell run the backbone and the wide head alone, as the teacher")
	}
	switch {
	case r.Lookback && r.LookbackSpacing > 0:
		fmt.Fprintf(w, "lookback: from the second sampling step each row with ρ > 0 keeps as many cells as the router, covering the previous step's clean estimate at spacing %g\n", r.LookbackSpacing)
	case r.Lookback:
		fmt.Fprintln(w, "lookback: from the second sampling step each row with ρ > 0 keeps as many cells as the router, ranked where the previous step's clean estimate changes most, kept apart")
	}
	if randoms {
		fmt.Fprintln(w, "random: the same samples' noise with the kept cells drawn uniformly at random, as many per sample and step as the router kept")
	}
	_, err := fmt.Fprintf(w, "%d held-out inputs over t ∈ [0, 1000); %d samples per row, %d %s steps, seed %d\n", r.NumInputs, r.NumSamples, r.Steps, process, r.Seed)
	return err
}

// writeTeaCache prints the step-cache sweep: one line per threshold and
// model, its cost also against the uncached teacher's.
func (r *Report) writeTeaCache(w io.Writer, prompt func(Quality) string) error {
	if len(r.TeaCache) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "TeaCache\tmodel\tGFLOPs/img\t× teacher\tsample PSNR dB\tFD\tclass acc\t"
	if r.Teacher.PromptFollowing != nil {
		head += "prompt\t"
	}
	fmt.Fprintln(tw, head+"skipped\t")
	for _, run := range r.TeaCache {
		for _, row := range append([]CachedRow{run.Teacher}, run.Rows...) {
			model := "teacher"
			if row.Rho != nil {
				model = fmt.Sprintf("ρ %g", *row.Rho)
			}
			fmt.Fprintf(tw, "%g\t%s\t%.4g\t%.3f\t%.2f\t%s\t%s\t%s%d / %d\t\n", run.Threshold, model, row.GFLOPsPerImage, row.GFLOPsPerImage/r.Teacher.GFLOPsPerImage,
				row.SamplePSNR, optional(row.FD, "%.2f"), optional(row.ClassAccuracy, "%.3f"), prompt(row.Quality), row.TeaCache.SkippedSteps, row.TeaCache.BranchSteps)
		}
	}
	return tw.Flush()
}

// HasRandomRouter says whether the rows carry the random-router baseline.
func (r *Report) HasRandomRouter() bool {
	return len(r.Rows) > 0 && r.Rows[0].FDRandomRouter != nil
}

// HasSpreadRandom says whether the rows carry the random router kept
// apart (Options.SpreadRandom).
func (r *Report) HasSpreadRandom() bool {
	return len(r.Rows) > 0 && r.Rows[0].FDSpreadRandom != nil
}

// WriteMarkdown writes the report's rows as a Markdown table (a model
// card's): ρ, kept tokens, GFLOPs per image and against the teacher, FD
// and class accuracy (and prompt following for a caption-conditioned
// teacher, and the random router's FD, kept apart too, when measured),
// for each ρ, the Lite-CFG pair and the teacher.
func (r *Report) WriteMarkdown(w io.Writer) {
	prompts := r.Teacher.PromptFollowing != nil
	fids := r.Teacher.FID != nil
	extra := func(q Quality) string {
		s := ""
		if fids {
			s += " " + optional(q.FID, "%.2f") + " |"
		}
		if prompts {
			s += " " + optional(q.PromptFollowing, "%.2f") + " |"
		}
		return s
	}
	randoms, spreads := r.HasRandomRouter(), r.HasSpreadRandom()
	random := func(q RandomRouter) string {
		if !randoms {
			return ""
		}
		if spreads {
			return " " + optional(q.FDRandomRouter, "%.2f") + " | " + optional(q.FDSpreadRandom, "%.2f") + " |"
		}
		return " " + optional(q.FDRandomRouter, "%.2f") + " |"
	}
	head, rule := "| model | ρ | kept tokens | GFLOPs/img | × teacher | FD | class accuracy |", "|---|---|---|---|---|---|---|"
	if fids {
		head, rule = head+" FID |", rule+"---|"
	}
	if prompts {
		head, rule = head+" prompt following |", rule+"---|"
	}
	if randoms {
		head, rule = head+" FD, random router |", rule+"---|"
		if spreads {
			head, rule = head+" FD, random kept apart |", rule+"---|"
		}
	}
	fmt.Fprintf(w, "%s\n%s\n", head, rule)
	t := r.Teacher.GFLOPsPerImage
	ratio := func(g float64) string {
		if t > 0 {
			return fmt.Sprintf("%.2f", g/t)
		}
		return "-"
	}
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| DC | %g | %.1f / %d | %.4g | %s | %s | %s |%s%s\n", row.Rho, row.KeptTokens, r.Tokens, row.GFLOPsPerImage, ratio(row.GFLOPsPerImage), optional(row.FD, "%.2f"), optional(row.ClassAccuracy, "%.2f"), extra(row.Quality), random(row.RandomRouter))
	}
	if l := r.LiteCFG; l != nil {
		fmt.Fprintf(w, "| DC, Lite-CFG | %g / %g | %.1f | %.4g | %s | %s | %s |%s%s\n", l.RhoCond, l.RhoUncond, l.KeptTokens, l.GFLOPsPerImage, ratio(l.GFLOPsPerImage), optional(l.FD, "%.2f"), optional(l.ClassAccuracy, "%.2f"), extra(l.Quality), random(l.RandomRouter))
	}
	fmt.Fprintf(w, "| teacher | | %d | %.4g | 1 | %s | %s |%s%s\n", r.Teacher.Tokens, t, optional(r.Teacher.FD, "%.2f"), optional(r.Teacher.ClassAccuracy, "%.2f"), extra(r.Teacher.Quality), random(RandomRouter{}))
}

// optional formats a measured value, or "-" when it was not measured.
func optional(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// formatSeries prints a series of values with one decimal.
func formatSeries(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(parts, " ")
}
