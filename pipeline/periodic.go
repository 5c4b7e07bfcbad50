package pipeline

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/distill"
	"github.com/dcdit/dcdit/eval"
)

// EvalLogFile is the run folder's log of the evaluations eval.every asks
// for during training, one JSON object per line.
const EvalLogFile = "eval-log.jsonl"

// EvalLogEntry is one line of EvalLogFile: the evaluation (package eval's
// report, as eval.json holds it) of the stage's EMA weights, or its
// weights without EMA, after Step steps.
type EvalLogEntry struct {
	Stage  string       `json:"stage"`
	Step   int          `json:"step"`
	Report *eval.Report `json:"report"`
}

// periodicEval evaluates the model every so many steps of a stage, from
// the trainer's progress callback. It evaluates the weights the final
// checkpoint would hold (the EMA when the stage keeps one) and puts the
// training weights back bit for bit, so that training goes on exactly as
// without it. A resumed run evaluates again the steps after its last
// checkpoint, so the log can hold a step twice; the later line is the
// run's.
type periodicEval struct {
	every   int
	model   *model
	teacher eval.Teacher
	data    *datasets.Set
	opts    eval.Options
	trainer *distill.Trainer
	path    string
	logf    func(string, ...any)
	onStep  func(distill.Progress)

	saved []float32
	err   error // the first failure, reported when the stage returns
}

func (pe *periodicEval) step(p distill.Progress) {
	if pe.onStep != nil {
		pe.onStep(p)
	}
	// A stage's last step is left out: the final evaluation covers the
	// last stage's, and an earlier stage's weights go on into the next.
	if pe.err != nil || p.Step%pe.every != 0 || p.Step == p.Steps {
		return
	}
	if err := pe.run(p); err != nil {
		pe.err = fmt.Errorf("pipeline: evaluation at stage %s step %d: %w", p.Stage, p.Step, err)
	}
}

func (pe *periodicEval) run(p distill.Progress) (err error) {
	data := pe.model.params.Data
	if ema := pe.trainer.EMAWeights(); ema != nil {
		// On a GPU the weights and their average live there: fetch both,
		// evaluate the average, and put the weights back.
		if err := pe.trainer.Pull(); err != nil {
			return err
		}
		pe.saved = append(pe.saved[:0], data...)
		copy(data, ema)
		if err := pe.trainer.Push(); err != nil {
			return err
		}
		defer func() {
			copy(data, pe.saved)
			if perr := pe.trainer.Push(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	rep, err := eval.Run(pe.model.dc, pe.teacher, pe.data, pe.opts)
	if err != nil {
		return err
	}
	line, err := json.Marshal(EvalLogEntry{Stage: p.Stage, Step: p.Step, Report: rep})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(pe.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if len(rep.Rows) > 0 {
		edge := "n/a"
		if rep.EdgeDensityRatio != nil {
			edge = fmt.Sprintf("%.2f", *rep.EdgeDensityRatio)
		}
		r0 := rep.Rows[0]
		pe.logf("eval at %s step %d: ρ %g: kept %.1f tokens, ε rel MSE %.4g, sample PSNR %.2f dB; edge density ratio %s",
			p.Stage, p.Step, r0.Rho, r0.KeptTokens, r0.EpsRelMSE, r0.SamplePSNR, edge)
	}
	return nil
}
