package dc

// AssumedKept is the number of tokens a sample keeps under the usual
// planning assumption: the router marks L/N of its L tokens as boundaries
// (N = target_n, the ratio loss's target; floored), and tail dropping at ρ
// then removes floor(n·ρ) of those n, the product taken in float32 and
// truncated as TailDrop (and the reference) does. At least one token
// stays. It is what `dcdit inspect` and FLOPs tables report per ρ when no
// router has run.
func AssumedKept(tokens int, targetN, rho float64) int {
	n := tokens
	if targetN > 1 {
		n = int(float64(tokens) / targetN)
	}
	n = max(n, 1)
	drop := int(float32(n) * float32(rho))
	return max(n-drop, 1)
}
