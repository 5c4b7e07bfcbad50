module github.com/dcdit/dcdit/kernels/gemm/_asm

go 1.26.0
