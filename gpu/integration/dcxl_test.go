package integration

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/dit"
	"github.com/dcdit/dcdit/gpu/cuda"
	"github.com/dcdit/dcdit/gpu/device"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// onDevice opens a device at prec, binds set's parameters to an arena on
// it for run, and then frees both, so that the next model starts from a
// GPU whose memory is free again (the device's pool included). It returns
// the device memory free at the end of run, in MiB.
func onDevice(t testing.TB, rt *cuda.Runtime, prec cuda.Precision, set *params.Set, run func(*device.Device)) uint64 {
	t.Helper()
	d := openDevice(t, rt, prec)
	ar, err := device.NewArena(d, set)
	if err != nil {
		t.Fatal(err)
	}
	run(d)
	free, _, _ := rt.MemInfo()
	if err := ar.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return free >> 20
}

// meanTime runs pass rounds+1 times, each waited for, and returns the mean
// time of all but the first (a warm-up that fills the device's pool). The
// pass keeps its graph (a training forward), released after each round.
// Each round starts with a collection, outside the timed region: the
// pass's uploads (the latents, host constants met on the device) have no
// graph to release, and only the collector hands them back to the pool.
func meanTime(t testing.TB, d *device.Device, rounds int, pass func() mat.Tensor) time.Duration {
	t.Helper()
	var total time.Duration
	for round := range rounds + 1 {
		runtime.GC()
		start := time.Now()
		y := pass()
		if err := d.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if round > 0 {
			total += time.Since(start)
		}
		ops.Release(y)
	}
	return total / time.Duration(rounds)
}

// TestDCDiTXLForwardTiming times DC-DiT-XL's forward pass at ρ = 0 and
// ρ = 0.4 against DiT-XL/2's, in one run on one GPU: the goal is
// DC-DiT-XL at ρ = 0.4 within 0.75× DiT-XL/2's forward time, and only
// figures from the same run and device compare. Both models have random
// weights and see the same batch of 32 256 px latents (32×32×4) and
// conditioning. DC-DiT-XL is the paper's preset (dc.LookupPreset: its
// scaffold at patch size 1 on the 32×32 grid, its hnet main network), its
// router calibrated as in TestDCModel so that about 1/N of the cells are
// natural boundaries, as the ratio loss trains it to, with ρ's tail drop
// on top. Each figure is the mean of 5 rounds after a warm-up, each waited
// for, at FP32 and TF32 GEMMs, in two modes: "infer", with no parameter
// tracking gradients (a sampler's forward: no graph is kept), and "train",
// the forward of a training step, which keeps its graph. Nothing is
// asserted on time. Each line of the logged table comes as soon as it is
// measured: TFLOP/s by dit.ForwardFLOPs and dc.Model.ForwardFLOPs (the
// passes' actual kept counts), and the time and FLOP ratios to DiT-XL/2 in
// the same mode and precision.
func TestDCDiTXLForwardTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	rt := gpu(t)
	const B, rounds = 32, 5
	ditM, in := ditXL(t, B)
	preset, ok := dc.LookupPreset("DC-DiT-XL")
	if !ok {
		t.Fatalf("no DC-DiT-XL preset among %s", dc.PresetNames())
	}
	dcM, joint := randomDC(t, preset.Config(ditM.Config.InputSize), hnet.PresetConfig(preset))
	cfg := dcM.Config
	// DiT's NCHW latents in the scaffold's cell-major layout.
	dcIn := &dcInputs{x: dc.ToTokens(in.x, B, cfg.InChannels, cfg.GridRows, cfg.GridCols, cfg.Patch()),
		in: cond.Input{T: in.t, Labels: in.y}}
	// On the device: a CPU forward of this size takes long. The arenas
	// made afterwards upload the moved bias.
	onDevice(t, rt, cuda.FP32, joint, func(d *device.Device) { calibrate(t, dcM, dcIn, 1/cfg.TargetN, d) })

	t.Logf("batch %d, %d×%d×%d latents; mean of %d rounds after a warm-up; FLOPs 2 per multiply-add; ×DiT: to DiT-XL/2 in the same mode and precision",
		B, cfg.GridRows, cfg.GridCols, cfg.InChannels, rounds)
	t.Logf("%-16s %-5s %-4s %6s %5s %8s %8s %7s %7s %9s", "model", "mode", "GEMM", "TFLOP", "kept", "ms", "TFLOP/s", "time×", "FLOP×", "free MiB")
	ditFlop := float64(B) * dit.ForwardFLOPs(ditM.Config, ditM.Config.NumTokens()).Total()
	sets := []*params.Set{ditM.Params, joint}
	for _, prec := range []cuda.Precision{cuda.FP32, cuda.TF32} {
		for _, train := range []bool{false, true} {
			mode := "infer"
			if train {
				mode = "train"
			}
			for _, s := range sets {
				s.SetRequiresGrad(train)
			}
			var ditTime time.Duration
			// row logs one measurement; kept is the fraction of cells the
			// backbone saw (0: DiT, which sees every patch).
			row := func(model string, flop, kept float64, el time.Duration, freeMiB uint64) {
				keptCol := "—"
				if kept > 0 {
					keptCol = fmt.Sprintf("%.3f", kept)
				}
				t.Logf("%-16s %-5s %-4v %6.2f %5s %8.1f %8.1f %7.3f %7.3f %9d", model, mode, prec, flop/1e12, keptCol,
					float64(el.Microseconds())/1e3, flop/el.Seconds()/1e12, el.Seconds()/ditTime.Seconds(), flop/ditFlop, freeMiB)
			}
			free := onDevice(t, rt, prec, ditM.Params, func(d *device.Device) {
				ditTime = meanTime(t, d, rounds, func() mat.Tensor { return ditM.ForwardLatents(in.x, in.t, in.y) })
			})
			row("DiT-XL/2", ditFlop, 0, ditTime, free)
			onDevice(t, rt, prec, joint, func(d *device.Device) {
				for _, rho := range []float32{0, 0.4} {
					var numKept []int
					el := meanTime(t, d, rounds, func() mat.Tensor {
						c, err := dcM.Backbone.Condition(dcIn.in)
						if err != nil {
							t.Fatal(err)
						}
						res, err := dcM.Forward(dcLatents(t, cfg, dcIn.x, d), c, []float32{rho})
						if err != nil {
							t.Fatal(err)
						}
						numKept = res.Chunks.NumKept
						return res.Out
					})
					f := dcM.ForwardFLOPs(numKept)
					free, _, _ := rt.MemInfo()
					row(fmt.Sprintf("DC-DiT-XL ρ=%g", rho), f.Total(), f.KeptRatio, el, free>>20)
				}
			})
		}
	}
}
