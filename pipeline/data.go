package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/diffusion"
	"github.com/dcdit/dcdit/diffusion/ddpm"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/recipes"
	"github.com/dcdit/dcdit/sample"
)

// trainingData returns the recipe's training set: read from a file,
// generated procedurally, or sampled from the teacher (cached in the
// output folder, or at data.path, and reused when it was generated with
// the same settings).
func trainingData(r *recipes.Recipe, teacher *base, out string, seed uint64, logf func(string, ...any)) (*datasets.Set, error) {
	d := r.Data
	switch d.Source {
	case recipes.SourceFile:
		return datasets.ReadKeys(r.DataPath(), r.Data.LatentsKey, r.Data.LabelsKey)
	case recipes.SourceShapes:
		size := 0
		switch {
		case teacher != nil:
			size = teacher.rows
		case r.Model != nil:
			size = r.Model.InputSize
		}
		g, err := shapes.New(size, seed)
		if err != nil {
			return nil, fmt.Errorf("pipeline: data: %w", err)
		}
		if d.Captions {
			logf("data: %d procedural shapes samples of %d×%d with captions", d.Samples, size, size)
			return g.CaptionedSet(d.Samples)
		}
		logf("data: %d procedural shapes samples of %d×%d", d.Samples, size, size)
		return g.Set(d.Samples)
	case recipes.SourceTeacher:
		if teacher == nil {
			return nil, fmt.Errorf("pipeline: data source %q needs a [base] teacher", d.Source)
		}
		// The cache lives in the output folder the run uses (--out may
		// differ from save.dir), unless data.path names it.
		path := filepath.Join(out, "data.safetensors")
		if d.Path != "" {
			path = r.DataPath()
		}
		if teacher.teacher.Process() == family.ProcessFlowMatching {
			return captionTeacherData(path, teacher, teacher.identity(), r, seed, logf)
		}
		return teacherData(path, teacher.teacher, teacher.identity(), d, r.Diffusion.Steps, seed, logf)
	}
	return nil, fmt.Errorf("pipeline: unknown data source %q", d.Source)
}

// cachedData returns the samples at path when they were generated as key
// says.
func cachedData(path, key string) (*datasets.Set, bool) {
	if _, err := os.Stat(path); err != nil {
		return nil, false
	}
	s, err := datasets.Read(path)
	if err != nil || s.Metadata["dcdit.generated_by"] != key {
		return nil, false
	}
	return s, true
}

// teacherData samples d.Samples latents from the class-conditional teacher
// (named id) with DDPM over
// its diffusionSteps-step schedule respaced to d.SamplingSteps (labels
// cycling over d.Classes, or all classes), unless path already holds
// samples drawn with the same settings by the same teacher.
func teacherData(path string, teacher family.Teacher, id string, d recipes.Data, diffusionSteps int, seed uint64, logf func(string, ...any)) (*datasets.Set, error) {
	key := fmt.Sprintf("teacher samples=%d steps=%d/%d cfg=%g classes=%v seed=%d teacher=%s",
		d.Samples, d.SamplingSteps, diffusionSteps, d.CFG, d.Classes, seed, id)
	if s, ok := cachedData(path, key); ok {
		logf("data: reusing %d teacher samples from %s", s.N, path)
		return s, nil
	}
	numClasses, C := teacher.Conditioning().Classes, teacher.InChannels()
	side, _ := teacher.Grid()
	classes := d.Classes
	if len(classes) == 0 {
		for k := range numClasses {
			classes = append(classes, k)
		}
	}
	sched, err := ddpm.Respaced(diffusionSteps, strconv.Itoa(d.SamplingSteps))
	if err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	guided, _ := teacher.Guidance(1) // the channel count does not depend on the scale
	proc := &diffusion.DDPM{Schedule: sched, GuidedChannels: guided}
	hw := side * side
	set := &datasets.Set{N: d.Samples, C: C, H: side, W: side, NumClasses: numClasses,
		Metadata: map[string]string{"dcdit.generated_by": key}}
	const batch = 32
	logf("data: sampling %d latents from the teacher (%d DDPM steps, cfg %g)", d.Samples, d.SamplingSteps, d.CFG)
	for lo := 0; lo < d.Samples; lo += batch {
		n := min(batch, d.Samples-lo)
		ys := make([]int, n)
		for i := range ys {
			ys[i] = classes[(lo+i)%len(classes)]
		}
		model := sample.Teacher(teacher, sample.Conditions{Labels: ys, Null: numClasses}, side, side)
		x, err := proc.Sample(model, diffusion.Shape{B: n, C: C, HW: hw}, diffusion.SampleOptions{
			Guidance: d.CFG,
			Seed:     seed ^ uint64(lo)*0x9e3779b97f4a7c15,
		})
		if err != nil {
			return nil, fmt.Errorf("pipeline: data: %w", err)
		}
		set.Latents = append(set.Latents, x...)
		set.Labels = append(set.Labels, ys...)
		logf("data: %d/%d teacher samples", lo+n, d.Samples)
	}
	if err := datasets.Write(path, set); err != nil {
		return nil, fmt.Errorf("pipeline: data: %w", err)
	}
	return set, nil
}
