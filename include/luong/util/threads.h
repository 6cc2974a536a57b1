#pragma once
// Deliberate thread-pool settings: LibTorch's intra-op pool gets the cores, BLAS gets one thread.

namespace luong {

/// Sets LibTorch's intra-op threads to `threads` (0 = the cores this process may run on), its
/// inter-op pool to 1, and OpenBLAS/MKL's own pools to 1 whichever of them is loaded: left alone
/// they oversubscribe a small machine and run several times slower. Also calls configure_allocator() and
/// install_large_block_cache() (luong/util/large_block_cache.h).
/// Returns the intra-op thread count.
int configure_threads(int threads);

/// Cores available to this process (its CPU affinity mask), at least 1.
int available_cores();

/// Keeps large freed blocks in glibc's heap instead of returning them to the kernel (see threads.cpp).
void configure_allocator();

/// Sets OpenBLAS's (or BLIS's, MKL's) own pool to one thread, if such a library is loaded, whether
/// in the global scope or inside a module loaded with RTLD_LOCAL; returns how many setters it called.
int set_blas_threads_to_one();

}  // namespace luong
