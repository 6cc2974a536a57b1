#pragma once
// Errors that reach the user as one line and a non-zero exit status.
#include <stdexcept>
#include <string>

namespace luong {

/// Bad input from the user: a missing file, a malformed line, a bad option. The CLI prints
/// `luong: <what>` and exits with status 2.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A problem with a corpus, vocabulary or tokenizer file; the message names file and line.
class DataError : public Error {
 public:
  using Error::Error;
};

/// A corrupt, truncated or mismatched checkpoint.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

}  // namespace luong
