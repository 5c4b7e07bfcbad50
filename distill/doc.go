// Package distill trains DC models: grafting-style distillation against a
// frozen teacher, finetuning with multi-budget training, and training from
// scratch.
package distill
