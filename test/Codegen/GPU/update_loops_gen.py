#!/usr/bin/env python3
"""Writes an update kernel of N independent 1-D elementwise loops, each
reading 3 buffers and writing 1 (4 parameters a loop), of 8 and 16
elements in turn (so that no two neighbours fuse):

  update_loops_gen.py N
"""
import sys

n = int(sys.argv[1])
size = [8 if i % 2 == 0 else 16 for i in range(n)]
args = ", ".join(", ".join(f"%{x}{i}: memref<{size[i]}xf32>" for x in "abco")
                 for i in range(n))
print(f"func.func @many({args}) attributes {{loom.update_kernel}} {{")
print("  %zero = arith.constant 0 : index")
print("  %one = arith.constant 1 : index")
print("  %eight = arith.constant 8 : index")
print("  %sixteen = arith.constant 16 : index")
for i in range(n):
    t = f"memref<{size[i]}xf32>"
    bound = "%eight" if size[i] == 8 else "%sixteen"
    print(f"  scf.parallel (%i{i}) = (%zero) to ({bound}) step (%one) {{")
    print(f"    %x{i} = memref.load %a{i}[%i{i}] : {t}")
    print(f"    %y{i} = memref.load %b{i}[%i{i}] : {t}")
    print(f"    %z{i} = memref.load %c{i}[%i{i}] : {t}")
    print(f"    %s{i} = arith.addf %x{i}, %y{i} : f32")
    print(f"    %t{i} = arith.mulf %s{i}, %z{i} : f32")
    print(f"    memref.store %t{i}, %o{i}[%i{i}] : {t}")
    print("    scf.reduce")
    print("  }")
print("  return")
print("}")
