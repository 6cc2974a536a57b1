#pragma once
// LUONG_X86_CLONES: compile a function for AVX-512, AVX2 + FMA and baseline x86-64, chosen when the
// program loads (GCC's target_clones). On other architectures the function is compiled once, for
// the target the compiler was given.
//
// Under AddressSanitizer the function is compiled once, for baseline x86-64: the clones run the same
// memory accesses, and instrumenting three flattened copies made cloze_kernels.cpp alone a
// 40-minute compile in the sanitized build.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define LUONG_X86_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define LUONG_X86_FLATTEN_CLONES __attribute__((flatten, target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LUONG_X86_CLONES
#define LUONG_X86_FLATTEN_CLONES __attribute__((flatten))
#endif
