//===- RuntimeKernels.h - GPU kernels of the runtime's own steps -*- C++ -*-===//
//
// The plan's runtime steps that touch device memory (a training step's
// `accumulate`: the mean of a gradient over the microbatches) run as these
// kernels, PTX the CUDA executor loads next to the plan's image, which the
// driver JIT-compiles for whatever GPU it runs on (sm_50 PTX). They follow
// the CPU executor bit for bit (Executor::accumulate): the first
// microbatch copies, the others add, the last then divides, each in f32
// with round-to-nearest and denormals kept. test/Runtime/runtime-kernels.test
// assembles this text with ptxas.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_RUNTIMEKERNELS_H
#define LOOM_RUNTIME_EXEC_RUNTIMEKERNELS_H

namespace loom::runtime {

/// loom_accumulate(f32 *sum, const f32 *in, u64 n, u32 mode): for i < n
/// (a grid-stride loop), sum[i] = in[i] (mode bit 0: the first
/// microbatch) or sum[i] + in[i], then divided by mode >> 2 (the number of
/// microbatches) where mode bit 1 says it is the last.
inline constexpr char kRuntimeKernelsPtx[] = R"PTX(// Loom runtime kernels
.version 7.0
.target sm_50
.address_size 64

.visible .entry loom_accumulate(
	.param .u64 loom_accumulate_sum,
	.param .u64 loom_accumulate_in,
	.param .u64 loom_accumulate_n,
	.param .u32 loom_accumulate_mode)
{
	.reg .pred 	%p<5>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<12>;
	.reg .f32 	%f<4>;

	ld.param.u64 	%rd1, [loom_accumulate_sum];
	ld.param.u64 	%rd2, [loom_accumulate_in];
	ld.param.u64 	%rd3, [loom_accumulate_n];
	ld.param.u32 	%r1, [loom_accumulate_mode];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	and.b32 	%r2, %r1, 1;
	setp.ne.u32 	%p1, %r2, 0;
	and.b32 	%r3, %r1, 2;
	setp.ne.u32 	%p2, %r3, 0;
	shr.u32 	%r4, %r1, 2;
	cvt.rn.f32.u32 	%f1, %r4;
	mov.u32 	%r5, %ctaid.x;
	mov.u32 	%r6, %ntid.x;
	mov.u32 	%r7, %tid.x;
	mul.wide.u32 	%rd4, %r5, %r6;
	cvt.u64.u32 	%rd5, %r7;
	add.u64 	%rd4, %rd4, %rd5;
	mov.u32 	%r8, %nctaid.x;
	mul.wide.u32 	%rd6, %r8, %r6;
$L_loop:
	setp.ge.u64 	%p3, %rd4, %rd3;
	@%p3 bra 	$L_done;
	shl.b64 	%rd7, %rd4, 2;
	add.u64 	%rd8, %rd1, %rd7;
	add.u64 	%rd9, %rd2, %rd7;
	ld.global.f32 	%f2, [%rd9];
	@%p1 bra 	$L_store;
	ld.global.f32 	%f3, [%rd8];
	add.rn.f32 	%f2, %f3, %f2;
$L_store:
	@%p2 div.rn.f32 	%f2, %f2, %f1;
	st.global.f32 	[%rd8], %f2;
	add.u64 	%rd4, %rd4, %rd6;
	bra.uni 	$L_loop;
$L_done:
	ret;
}
)PTX";

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_RUNTIMEKERNELS_H
