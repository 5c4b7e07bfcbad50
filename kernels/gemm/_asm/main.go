// Command _asm writes the SGEMM micro-kernels of package gemm as Go
// assembly. The kernels are fully unrolled over the register tile, which is
// tedious and error-prone by hand, so they are printed from one template:
//
//	cd kernels/gemm/_asm && go run . -dir ..
//
// Every kernel computes, for a packed A sliver (mr values per k step) and a
// packed B panel (nr values per k step),
//
//	acc[i][j] = Σ_p a[p*mr+i] · b[p*nr+j]
//	c[i*ldc+j] = alpha·acc[i][j] + beta·c[i*ldc+j]   (beta = 0: c is not read)
//
// keeping the mr×nr accumulator tile in vector registers: B is loaded as
// vectors along j, A is broadcast along i, so each k step costs nr/lanes
// vector loads, mr broadcasts and mr·nr/lanes FMAs. Tail kernels compute
// only the first rows of a sliver packed for a taller one.
//
// Choices, measured on Zen 4 (where a 512-bit FMA issues at one per cycle,
// so AVX-512 and AVX2 have the same peak): 12×32 (24 ZMM accumulators) ran
// within noise of 6×64, 8×48 and 14×32, at about 95% of peak with operands
// in L1; FMAs with embedded broadcasts, unrolling k by 8 instead of 4 and
// prefetching B (-pf) did not help. 12×32 was kept because 32 divides the
// widths in use and 12 rows make 4- and 8-row tails. For AVX2, 6×16 (12
// YMM accumulators) beat 4×24.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

// isa describes the register file of one instruction set.
type isa struct {
	name  string // suffix of the function name
	reg   string // register prefix: "Z" or "Y"
	lanes int    // float32 lanes per register
	nregs int    // architectural vector registers
	zero  string // how to clear a register (VPXORD needs only AVX512F)
}

var (
	avx512 = isa{name: "AVX512", reg: "Z", lanes: 16, nregs: 32, zero: "VPXORD"}
	avx2   = isa{name: "AVX2", reg: "Y", lanes: 8, nregs: 16, zero: "VXORPS"}
)

// kernel is one micro-kernel: an mr×(nv·lanes) tile, k unrolled by unroll,
// with software prefetch of B pfDist bytes ahead (0: none).
type kernel struct {
	isa    isa
	mr, nv int
	unroll int
	pfDist int
	// astride is the row count of the packed A sliver when the kernel
	// computes only its first mr rows (a tail kernel); 0 means mr.
	astride int
}

func (k kernel) aStride() int {
	if k.astride == 0 {
		return k.mr
	}
	return k.astride
}

func (k kernel) nr() int     { return k.nv * k.isa.lanes }
func (k kernel) vbytes() int { return k.isa.lanes * 4 }
func (k kernel) fname() string {
	if k.astride != 0 {
		return fmt.Sprintf("sgemmKernel%dof%dx%d%s", k.mr, k.astride, k.nr(), k.isa.name)
	}
	return fmt.Sprintf("sgemmKernel%dx%d%s", k.mr, k.nr(), k.isa.name)
}

func (k kernel) acc(i, v int) string { return fmt.Sprintf("%s%d", k.isa.reg, i*k.nv+v) }
func (k kernel) breg(v int) string   { return fmt.Sprintf("%s%d", k.isa.reg, k.mr*k.nv+v) }

// bcast returns the i-th broadcast register; the registers left after the
// accumulators and B vectors rotate so that consecutive broadcasts do not
// wait on one another (renaming would cope, but this keeps dependencies
// visibly short).
func (k kernel) bcast(i int) string {
	first := k.mr*k.nv + k.nv
	n := k.isa.nregs - first
	if n < 1 {
		log.Fatalf("%s: no register left for broadcasts", k.fname())
	}
	return fmt.Sprintf("%s%d", k.isa.reg, first+i%n)
}

func (k kernel) emit(w *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, "\t"+format+"\n", args...) }
	mrB, nrB := k.aStride()*4, k.nr()*4
	fmt.Fprintf(w, "// func %s(kc int, a, b, c []float32, ldc int, alpha, beta float32)\n", k.fname())
	fmt.Fprintf(w, "TEXT ·%s(SB), NOSPLIT, $0-96\n", k.fname())
	p("MOVQ kc+0(FP), CX")
	p("MOVQ a_base+8(FP), AX")
	p("MOVQ b_base+32(FP), BX")
	p("MOVQ c_base+56(FP), DI")
	p("MOVQ ldc+80(FP), SI")
	p("SHLQ $2, SI")
	for i := 0; i < k.mr; i++ {
		for v := 0; v < k.nv; v++ {
			r := k.acc(i, v)
			p("%s %s, %s, %s", k.isa.zero, r, r, r)
		}
	}
	// The C tile is read only after the k loop; asking for it now hides
	// the miss behind thousands of FMAs.
	p("MOVQ DI, R8")
	for i := 0; i < k.mr; i++ {
		for off := 0; off < nrB; off += 64 {
			p("PREFETCHT0 %d(R8)", off)
		}
		p("ADDQ SI, R8")
	}
	p("MOVQ CX, DX")
	p("ANDQ $%d, CX", k.unroll-1)
	p("SHRQ $%d, DX", log2(k.unroll))
	p("JZ tail")
	fmt.Fprintf(w, "loop:\n")
	for u := 0; u < k.unroll; u++ {
		k.step(p, u*mrB, u*nrB)
	}
	p("ADDQ $%d, AX", k.unroll*mrB)
	p("ADDQ $%d, BX", k.unroll*nrB)
	p("DECQ DX")
	p("JNZ loop")
	fmt.Fprintf(w, "tail:\n")
	p("TESTQ CX, CX")
	p("JZ store")
	fmt.Fprintf(w, "tailloop:\n")
	k.step(p, 0, 0)
	p("ADDQ $%d, AX", mrB)
	p("ADDQ $%d, BX", nrB)
	p("DECQ CX")
	p("JNZ tailloop")

	// Epilogue: the B and broadcast registers are free again.
	alpha, beta, tmp := k.breg(0), k.bcast(0), k.bcast(1)
	if k.nv > 1 {
		beta = k.breg(1)
	}
	fmt.Fprintf(w, "store:\n")
	p("VBROADCASTSS alpha+88(FP), %s", alpha)
	// beta == 0 must not read C (it may hold NaN); shifting out the sign
	// bit treats -0 like +0, as the Go comparison does.
	p("MOVL beta+92(FP), DX")
	p("SHLL $1, DX")
	p("JZ overwrite")
	p("VBROADCASTSS beta+92(FP), %s", beta)
	for i := 0; i < k.mr; i++ {
		for v := 0; v < k.nv; v++ {
			p("VMULPS %d(DI), %s, %s", v*k.vbytes(), beta, tmp)
			p("VFMADD231PS %s, %s, %s", alpha, k.acc(i, v), tmp)
			p("VMOVUPS %s, %d(DI)", tmp, v*k.vbytes())
		}
		if i < k.mr-1 {
			p("ADDQ SI, DI")
		}
	}
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintf(w, "overwrite:\n")
	for i := 0; i < k.mr; i++ {
		for v := 0; v < k.nv; v++ {
			p("VMULPS %s, %s, %s", alpha, k.acc(i, v), k.acc(i, v))
			p("VMOVUPS %s, %d(DI)", k.acc(i, v), v*k.vbytes())
		}
		if i < k.mr-1 {
			p("ADDQ SI, DI")
		}
	}
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintln(w)
}

// step emits one k step reading A at aOff(AX) and B at bOff(BX).
func (k kernel) step(p func(string, ...any), aOff, bOff int) {
	if k.pfDist > 0 {
		for off := 0; off < k.nr()*4; off += 64 {
			p("PREFETCHT0 %d(BX)", k.pfDist+bOff+off)
		}
	}
	for v := 0; v < k.nv; v++ {
		p("VMOVUPS %d(BX), %s", bOff+v*k.vbytes(), k.breg(v))
	}
	for i := 0; i < k.mr; i++ {
		bc := k.bcast(i)
		p("VBROADCASTSS %d(AX), %s", aOff+4*i, bc)
		for v := 0; v < k.nv; v++ {
			p("VFMADD231PS %s, %s, %s", k.breg(v), bc, k.acc(i, v))
		}
	}
}

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	if 1<<l != n {
		log.Fatalf("unroll %d is not a power of two", n)
	}
	return l
}

const header = `// Code generated by kernels/gemm/_asm; DO NOT EDIT.

//go:build amd64 && gc && !purego

#include "textflag.h"

`

func write(path string, ks ...kernel) {
	var w bytes.Buffer
	w.WriteString(header)
	for _, k := range ks {
		k.emit(&w)
	}
	if err := os.WriteFile(path, w.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

func main() {
	dir := flag.String("dir", "..", "package directory to write the .s files into")
	mr512 := flag.Int("mr512", 12, "AVX-512 kernel rows")
	nv512 := flag.Int("nv512", 2, "AVX-512 kernel width in ZMM registers")
	mr2 := flag.Int("mr2", 6, "AVX2 kernel rows")
	nv2 := flag.Int("nv2", 2, "AVX2 kernel width in YMM registers")
	unroll := flag.Int("unroll", 4, "k unroll factor (power of two)")
	pf := flag.Int("pf", 0, "B prefetch distance in bytes (0: none, measured best)")
	flag.Parse()
	// Each full kernel comes with tail kernels for the last sliver of A,
	// which packing pads to mr rows: they compute only its first rows, so
	// m = 256 with mr = 12 wastes no FMAs on the 8 padding rows.
	family := func(is isa, mr, nv int) []kernel {
		ks := []kernel{{isa: is, mr: mr, nv: nv, unroll: *unroll, pfDist: *pf}}
		for _, r := range []int{mr / 3, 2 * mr / 3} {
			ks = append(ks, kernel{isa: is, mr: r, nv: nv, unroll: *unroll, pfDist: *pf, astride: mr})
		}
		return ks
	}
	write(filepath.Join(*dir, "sgemm_avx512_amd64.s"), family(avx512, *mr512, *nv512)...)
	write(filepath.Join(*dir, "sgemm_avx2_amd64.s"), family(avx2, *mr2, *nv2)...)
}
