// Package convert implements `dcdit convert`: a checkpoint rewritten in
// another key layout, dtype or sharding, streamed tensor by tensor.
package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/convert"
	"github.com/dcdit/dcdit/dc/hnet/official"
	"github.com/dcdit/dcdit/internal/cli/cmdutil"
	"github.com/dcdit/dcdit/internal/cli/iostreams"
	"github.com/dcdit/dcdit/internal/cli/progress"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/loaders/dtype"
)

// Options are the flags and arguments of `dcdit convert`.
type Options struct {
	IO            *iostreams.IO
	In, Out       string
	Layout        string
	DType         string // "" keeps each tensor's dtype
	ShardSize     int64  // bytes; 0 writes one file
	DryRun        bool
	AllowOverflow bool
	ComfyPrefix   bool
	NumHeads      int
	Quiet         bool
	// OfficialConfig is the official DC-DiT YAML config of IN (--layout
	// dcdit); "" reads the config a training checkpoint pickles.
	OfficialConfig string
	// Force exports (--layout official) a model whose settings change the
	// official forward pass but not its tensors.
	Force bool
}

// defaultShardSize is huggingface_hub's default max shard size (5 GB).
const defaultShardSize = "5GB"

// NewCmd returns the convert command. runF replaces the action in tests
// that only check flag parsing; nil converts.
func NewCmd(ios *iostreams.IO, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: ios}
	var shardSize string
	cmd := &cobra.Command{
		Use:   "convert IN OUT --layout original|diffusers|comfy|official|dcdit",
		Short: "Rewrite a checkpoint in another key layout, dtype or sharding (streaming)",
		Long: `Convert rewrites a DiT or Z-Image checkpoint in another key layout, dtype
or sharding. IN is anything 'dcdit inspect' reads (a .safetensors file, a
sharded folder or index, a PyTorch .pt, a diffusers model folder).

Layouts (--layout):
  DiT      original (facebookresearch/DiT state_dict: fused attn.qkv, one
           t_embedder/y_embedder, pos_embed) <-> diffusers
           (DiTTransformer2DModel: to_q/to_k/to_v, the embedders copied into
           every block, no pos_embed). To diffusers, qkv is split, the
           embedders are replicated and pos_embed is dropped (diffusers
           computes it); back, q/k/v are fused, the per-block copies are
           checked to be identical (the first that differs is named) and
           folded into one, and pos_embed is recomputed.
  Z-Image  diffusers (= Tongyi's naming: to_q/to_k/to_v, all_x_embedder.2-1)
           <-> comfy (ComfyUI: fused attention.qkv, x_embedder, q_norm/k_norm;
           --comfy-prefix puts model.diffusion_model. before every name, as
           ComfyUI's full checkpoints do; an input's prefix is stripped).
  DC-DiT   dcdit (a DC checkpoint: one safetensors file whose metadata
           describes the model) <-> official (AMD-AGI/DynamicChunkingDiT: a
           PyTorch state dict its create_dit model loads with strict=True,
           pos_embed included, and beside it OUT's name with .yaml, the
           config its sample.py and train.py read). Export refuses a model
           the official code cannot build (dcdit's patch-grid scaffold, wide
           head, relative residual, latent skip, no encoder RMSNorm, another
           router width), naming each; other GroupNorm group counts only
           change the official forward, and --force writes those anyway,
           with a warning. The sampling settings a DC checkpoint records
           and the spread drop have no place in the official config:
           export leaves them out, with a warning. Blocks upcycled from a
           DiT/p get the table at each latent cell's patch-grid position,
           as dcdit embeds it.
           Import reads a bare state dict or train.py's {"model", "ema",
           "opt", "config"} (taking the EMA) with the YAML given by
           --official-config, or the config such a training checkpoint
           pickles, or, for a bare state dict without one, --num-heads
           (every shape comes from the tensors, the rest from config.py's
           defaults: σ 1, N 4), and checks the config against the tensors.
Converting to the input's own layout copies the tensors: a dtype cast,
resharding, or a PyTorch .pt turned into safetensors.

--dtype casts every tensor to f32, bf16 or f16, rounding to nearest even; a
finite value that f16 (or bf16) cannot hold is an error naming the tensor,
unless --allow-overflow stores it as ±Inf. Without --dtype each tensor keeps
its dtype.

OUT ending in .safetensors is one file (the tensors' config, DiT's head
count included, goes into its metadata). Any other OUT is a model folder:
the weights (diffusion_pytorch_model.safetensors for the diffusers layout,
model.safetensors otherwise), split into shards of at most --shard-size
(base-00001-of-00003.safetensors plus base.safetensors.index.json, the
Hugging Face naming) when larger, and config.json. Nothing is written in
place: the output is built under a temporary name and renamed at the end,
so a failed or interrupted conversion leaves no OUT; an existing OUT is
refused.

Every input tensor must be converted or deliberately dropped (pos_embed
going to diffusers); a tensor that fits neither, such as the VAE of a
ComfyUI full checkpoint, is an error naming it. --dry-run prints the plan,
one line per output tensor (name, shape, dtype, sources, transform), and
writes nothing. Tensors are streamed from the input one at a time, so
memory stays at a few buffers whatever the model's size; a progress line by
bytes goes to stderr unless -q.`,
		Example: `  dcdit convert DiT-XL-2-256x256.pt DiT-XL-2-diffusers --layout diffusers
  dcdit convert DiT-XL-2-diffusers dit-xl-2.safetensors --layout original --dtype bf16
  dcdit convert Z-Image-Turbo/ z_image_turbo_bf16.safetensors --layout comfy --dtype bf16
  dcdit convert z_image_turbo.safetensors Z-Image-Turbo-transformer --layout diffusers --shard-size 10GB
  dcdit convert model.safetensors out.safetensors --layout diffusers --dry-run
  dcdit convert runs/dc/model.safetensors dc-dit.pt --layout official       # also writes dc-dit.yaml
  dcdit convert results/000-DC-DiT/checkpoints/0400000.pt dc.safetensors --layout dcdit --official-config config.yaml`,
		Args: cmdutil.ExactArgs(2, "IN and OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In, opts.Out = args[0], args[1]
			if err := validate(cmd, opts, shardSize); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Layout, "layout", "", "target key layout: original or diffusers (DiT), diffusers or comfy (Z-Image), official or dcdit (DC-DiT)")
	f.BoolVar(&opts.Force, "force", false, "--layout official: write a model whose GroupNorm group counts the official code cannot express (it would compute another model), with a warning")
	f.StringVar(&opts.OfficialConfig, "official-config", "", "--layout dcdit: the official DC-DiT YAML config IN was trained with (default: the one a training checkpoint pickles)")
	f.StringVar(&opts.DType, "dtype", "", "cast every tensor to f32, bf16 or f16 (default: keep each tensor's)")
	f.StringVar(&shardSize, "shard-size", defaultShardSize, "folder output: largest shard, e.g. 5GB, 500MB, 2GiB (0: one file)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the plan (one line per output tensor) and write nothing")
	f.BoolVar(&opts.AllowOverflow, "allow-overflow", false, "store values an f16/bf16 cast cannot hold as ±Inf instead of failing")
	f.BoolVar(&opts.ComfyPrefix, "comfy-prefix", false, "comfy layout: put model.diffusion_model. before every tensor name")
	f.IntVar(&opts.NumHeads, "num-heads", 0, "attention heads, for DiT checkpoints that match no preset (recorded in the output), or for an official DC-DiT state dict imported without its config")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing but errors: no progress, warnings or summary")
	return cmd
}

func validate(cmd *cobra.Command, o *Options, shardSize string) error {
	switch o.Layout {
	case "":
		return cmdutil.Usagef(cmd, "--layout is required: original, diffusers, comfy, official or dcdit")
	case string(arch.Original), string(arch.Diffusers), string(arch.Comfy):
	case string(arch.DCLayout), layoutOfficial:
		// DC-DiT conversions rewrite the model whole, at float32.
		for _, flag := range []string{"dtype", "shard-size", "dry-run", "allow-overflow"} {
			if cmd.Flags().Changed(flag) {
				return cmdutil.Usagef(cmd, "--%s: DC-DiT conversions (--layout %s) write one float32 file", flag, o.Layout)
			}
		}
		if o.Layout == layoutOfficial && o.NumHeads != 0 {
			return cmdutil.Usagef(cmd, "--num-heads: a DC checkpoint records its head count (it goes with --layout dcdit, for an official state dict without a config)")
		}
	default:
		return cmdutil.Usagef(cmd, "--layout %q: want original, diffusers, comfy, official or dcdit", o.Layout)
	}
	if o.Force && o.Layout != layoutOfficial {
		return cmdutil.Usagef(cmd, "--force goes with --layout official")
	}
	if o.OfficialConfig != "" && o.Layout != string(arch.DCLayout) {
		return cmdutil.Usagef(cmd, "--official-config goes with --layout dcdit (reading an official DC-DiT checkpoint)")
	}
	switch strings.ToLower(o.DType) {
	case "", "f32", "bf16", "f16":
	default:
		return cmdutil.Usagef(cmd, "--dtype %q: want f32, bf16 or f16", o.DType)
	}
	n, err := ParseSize(shardSize)
	if err != nil {
		return cmdutil.Usagef(cmd, "--shard-size %q: %v", shardSize, err)
	}
	o.ShardSize = n
	if cmd.Flags().Changed("shard-size") && strings.HasSuffix(o.Out, ".safetensors") && n > 0 {
		return cmdutil.Usagef(cmd, "--shard-size: OUT %s is one .safetensors file; give a folder name to shard", o.Out)
	}
	if o.ComfyPrefix && o.Layout != string(arch.Comfy) {
		return cmdutil.Usagef(cmd, "--comfy-prefix goes with --layout comfy")
	}
	if o.NumHeads < 0 {
		return cmdutil.Usagef(cmd, "--num-heads %d: want a positive head count", o.NumHeads)
	}
	if filepath.Clean(o.In) == filepath.Clean(o.Out) {
		return cmdutil.Usagef(cmd, "OUT is IN (%s); conversions never write over their input", o.In)
	}
	return nil
}

// ParseSize reads a byte count such as "5GB" (decimal units, as Hugging
// Face's max_shard_size), "2GiB" (binary), "500MB" or a plain number.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	upper := strings.ToUpper(t)
	for _, u := range units {
		if strings.HasSuffix(upper, u.suffix) {
			mult, t = u.mult, strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult >= 1<<62 {
		return 0, errors.New("want a size such as 5GB, 500MB or 2GiB")
	}
	return int64(v * mult), nil
}

// layoutOfficial is the official DC-DiT's files (see package official).
const layoutOfficial = "official"

// Run plans the conversion and, unless DryRun, executes it.
func Run(opts *Options) error {
	switch opts.Layout {
	case layoutOfficial, string(arch.DCLayout):
		return runDC(opts)
	}
	ck, err := loaders.Open(opts.In)
	if err != nil {
		return err
	}
	defer ck.Close()
	in := ck.ArchInput(opts.NumHeads)
	dt := dtype.Invalid
	if opts.DType != "" {
		dt, _ = dtype.Parse(strings.ToUpper(opts.DType)) // checked by validate
	}
	plan, err := convert.NewPlan(in, convert.Options{Layout: arch.Layout(opts.Layout), DType: dt, AllowOverflow: opts.AllowOverflow, ComfyPrefix: opts.ComfyPrefix})
	if err != nil {
		return fmt.Errorf("%s: %w", opts.In, err)
	}
	if !opts.Quiet {
		for _, w := range plan.Warnings {
			fmt.Fprintf(opts.IO.Err, "warning: %s\n", w)
		}
	}
	if opts.DryRun {
		return printPlan(opts, plan)
	}
	var bar *progress.Bar
	wo := convert.WriteOptions{ShardSize: opts.ShardSize}
	if !opts.Quiet {
		bar = progress.NewBytes(opts.IO.Err, "converting", plan.TotalBytes())
		wo.Progress = func(done, _ int64) { bar.Set(int(done)) }
	}
	start := time.Now()
	if err := convert.Execute(plan, ck, opts.Out, wo); err != nil {
		return fmt.Errorf("%s → %s: %w", opts.In, opts.Out, err)
	}
	bar.Finish()
	if !opts.Quiet {
		fmt.Fprintf(opts.IO.Err, "wrote %s: %s %s → %s, %d tensors, %s in %s\n", opts.Out, plan.Architecture, plan.From, plan.To,
			len(plan.Outputs), progress.Bytes(plan.TotalBytes()), progress.Duration(time.Since(start)))
	}
	return nil
}

// printPlan writes one line per output tensor, then what is dropped.
func printPlan(opts *Options, p *convert.Plan) error {
	w := opts.IO.Out
	fmt.Fprintf(w, "plan: %s %s → %s, %d tensors, %s\n", p.Architecture, p.From, p.To, len(p.Outputs), progress.Bytes(p.TotalBytes()))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHAPE\tDTYPE\tSOURCES\tTRANSFORM")
	for i := range p.Outputs {
		o := &p.Outputs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, shapeString(o.Shape), o.DType, o.Sources(), o.Transform)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range p.Dropped {
		fmt.Fprintf(w, "drop %s: %s\n", d.Name, d.Reason)
	}
	return nil
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// runDC converts a DC checkpoint to the official DC-DiT's files or back.
func runDC(opts *Options) error {
	if _, err := os.Stat(opts.Out); err == nil {
		return fmt.Errorf("%s exists; conversions never write over a file", opts.Out)
	}
	start := time.Now()
	var err error
	var warnings, unheld []string
	if opts.Layout == layoutOfficial {
		warnings, unheld, err = official.ExportFile(opts.In, opts.Out, opts.Force)
	} else {
		err = official.ImportFile(opts.In, opts.OfficialConfig, opts.Out, opts.NumHeads)
	}
	if err != nil {
		return err
	}
	if !opts.Quiet {
		for _, w := range warnings {
			fmt.Fprintf(opts.IO.Err, "warning: --force: the official model will differ: %s\n", w)
		}
		for _, u := range unheld {
			fmt.Fprintf(opts.IO.Err, "warning: left out of the official files: %s\n", u)
		}
		also := ""
		if opts.Layout == layoutOfficial {
			also = " and its config " + official.ConfigPath(opts.Out)
		}
		fmt.Fprintf(opts.IO.Err, "wrote %s%s (%s) in %s\n", opts.Out, also, opts.Layout, progress.Duration(time.Since(start)))
	}
	return nil
}
