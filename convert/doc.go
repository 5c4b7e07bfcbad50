// Package convert plans and executes streaming conversions of checkpoints
// between layouts, dtypes and shardings.
package convert
