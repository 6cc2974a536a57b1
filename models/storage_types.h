#pragma once
// The torch.<Name>Storage globals of torch.save, for the state_dict reader and writer alike.
#include <torch/torch.h>

namespace luong::models {

struct StorageType {
  torch::ScalarType dtype;
  const char* name;
};
inline constexpr StorageType kStorageTypes[] = {
    {torch::kFloat, "FloatStorage"}, {torch::kDouble, "DoubleStorage"},     {torch::kHalf, "HalfStorage"},
    {torch::kBFloat16, "BFloat16Storage"}, {torch::kLong, "LongStorage"}, {torch::kInt, "IntStorage"},
    {torch::kShort, "ShortStorage"}, {torch::kChar, "CharStorage"},       {torch::kByte, "ByteStorage"},
    {torch::kBool, "BoolStorage"}};

}  // namespace luong::models
