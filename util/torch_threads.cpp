#include <torch/torch.h>

#include "luong/util/large_block_cache.h"
#include "luong/util/threads.h"

namespace luong {

int configure_threads(int threads) {
  const int count = threads > 0 ? threads : available_cores();
  set_blas_threads_to_one();
  configure_allocator();
  install_large_block_cache();
  torch::set_num_threads(count);
  static bool interop_set = false;
  if (!interop_set) {
    interop_set = true;
    try {
      torch::set_num_interop_threads(1);
    } catch (const c10::Error&) {
      // Only settable before the first inter-op task; later calls keep the earlier setting.
    }
  }
  return count;
}

}  // namespace luong
