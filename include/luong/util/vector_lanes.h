#pragma once
// 32 bytes of T as one GCC vector (one ymm with AVX2, half a zmm, two xmm with SSE2), for loops that
// keep one partial result per lane (a maximum, a sum, a comparison), which GCC will not do for a
// plain float loop without -ffast-math.
#include <cstdint>

namespace luong {

template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float type __attribute__((vector_size(32)));
  typedef std::int32_t lane_index;
  typedef lane_index index __attribute__((vector_size(32)));  // what a comparison of `type` gives
};
template <>
struct Lanes<double> {
  typedef double type __attribute__((vector_size(32)));
  typedef std::int64_t lane_index;
  typedef lane_index index __attribute__((vector_size(32)));
};

}  // namespace luong
