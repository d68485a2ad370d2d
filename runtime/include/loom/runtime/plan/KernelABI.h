/*===- KernelABI.h - The kernel table of a compiled executable ----*- C -*-===*/
/*                                                                            */
/* C-compatible: loomc's generated glue object defines these symbols and the  */
/* runtime (C++) reads them. See docs/plan-format.md, "Kernel ABI".           */
/*                                                                            */
/*===----------------------------------------------------------------------===*/

#ifndef LOOM_RUNTIME_PLAN_KERNELABI_H
#define LOOM_RUNTIME_PLAN_KERNELABI_H

#ifdef __cplusplus
extern "C" {
#endif

/// One compiled kernel. `call` unpacks `args` (one pointer per buffer, in the
/// order of the plan's `step` record) and calls the kernel
/// `void NAME(void *arg0, void *arg1, ...)`.
struct LoomKernel {
  const char *name;
  unsigned numArgs;
  void (*call)(void **args);
};

/// The executable's kernels; the table ends with {0, 0, 0}.
extern const struct LoomKernel loom_kernels[];
/// The plan text (docs/plan-format.md), NUL-terminated: the unpartitioned
/// program, run on one rank.
extern const char loom_plan[];
/// The partitioned (SPMD) plan, run on every rank of its mesh, or "" when
/// the model is not partitioned. NUL-terminated; loomc's glue always
/// defines it (the runtime's main() still accepts a glue object without it,
/// as "").
extern const char loom_spmd_plan[];
/// The GPU image the plan's `gpu-image` record describes (a cubin or PTX),
/// loom_gpu_image_size bytes; size 0 in an executable without GPU kernels.
/// loomc's glue always defines both (and a NUL after the image).
extern const unsigned char loom_gpu_image[];
extern const unsigned long loom_gpu_image_size;
/// The CPU the kernels were compiled for, "CPU f32=PATH bf16=PATH
/// needs=FEATURE,..." (exec/CpuTarget.h); weak in main(): a glue object
/// from an older loomc does not define it.
extern const char loom_cpu_target[];
/// The build's identity (16 hex digits, a hash of the plans, the device
/// image and the kernels' object code; "" if loomc could not read them),
/// which the ranks of a run compare; weak in main(), as loom_cpu_target.
extern const char loom_build_id[];

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_RUNTIME_PLAN_KERNELABI_H */
