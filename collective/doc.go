// Package collective holds the operations with which the ranks of a
// data-parallel run combine their buffers: all-reduce, reduce-scatter,
// all-gather and broadcast over []float32, behind the Comm interface so that
// the data-parallel and ZeRO-1 logic is the same over any transport.
//
// NewLocal runs the ranks of a group as goroutines of one process, which
// lets that logic be tested on the CPU. It sums over ranks in rank order,
// so every rank, and every run, gets the same bits.
package collective
