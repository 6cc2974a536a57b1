// checkpoint/state.json: the JSON parser and TrainerState's schema on arbitrary bytes. A state that
// passes must be one the trainer can use as it is.
#include <string>

#include "fuzz_target.h"
#include "luong/training/trainer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  luong::fuzz::expect_clean([&] {
    const luong::Json json = luong::parse_json(text, "state.json");
    const luong::training::TrainerState state = luong::training::TrainerState::from_json(json, "state.json", 20);
    LUONG_FUZZ_CHECK(state.epoch >= 0 && state.epoch <= 20);
    LUONG_FUZZ_CHECK(static_cast<std::int64_t>(state.history.size()) == state.epoch);
    LUONG_FUZZ_CHECK(state.bad_epochs >= 0 && state.bad_epochs <= state.epoch);
    LUONG_FUZZ_CHECK(state.batches_done >= 0 && state.partial_tokens >= 0);
    for (std::size_t i = 0; i < state.history.size(); ++i) {
      LUONG_FUZZ_CHECK(state.history[i].epoch == static_cast<std::int64_t>(i) + 1);
    }
    state.check_batches(8, "state.json");
    // What the trainer writes back it reads again, unchanged.
    const auto again = luong::training::TrainerState::from_json(state.to_json(), "again", 20);
    LUONG_FUZZ_CHECK(luong::dump_json(again.to_json()) == luong::dump_json(state.to_json()));
  });
  return 0;
}
