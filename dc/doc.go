// Package dc is the DC-DiT scaffold, generic over a backbone: encoder, router,
// elastic chunking and tail dropping, de-chunking, decoder, ratio loss and
// FLOPs accounting.
package dc
