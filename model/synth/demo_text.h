// The built-in English text the demo tokenizer's merges are learned from.
#pragma once

#include <string_view>

namespace infer {

// About 7 KB of plain English prose (ASCII, "\n" line breaks).
std::string_view demo_training_text();

}  // namespace infer
