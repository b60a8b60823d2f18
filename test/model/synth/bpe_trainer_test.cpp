// train_bpe: most frequent pair first, fixed tie-breaks, no merge across a word boundary.
#include "model/synth/bpe_trainer.h"

#include <gtest/gtest.h>

namespace infer {
namespace {

using Merge = std::pair<std::string, std::string>;

TEST(SynthBpe, MergesTheMostFrequentPairFirst) {
  // "▁ab" three times, "▁cd" twice: (▁, a) and (a, b) occur 3 times; "a b" sorts before "▁a".
  const BpeTraining t = train_bpe("\u2581ab\u2581ab\u2581ab\u2581cd\u2581cd", 10);
  ASSERT_GE(t.merges.size(), 2u);
  EXPECT_EQ(t.merges[0], (Merge{"a", "b"}));
  EXPECT_EQ(t.merges[1], (Merge{"\u2581", "ab"}));
  EXPECT_EQ(t.alphabet, (std::vector<std::string>{"a", "b", "c", "d", "\u2581"}));
}

TEST(SynthBpe, StopsWhenNoPairOccursTwice) {
  const BpeTraining t = train_bpe("\u2581xy\u2581xy", 100);
  EXPECT_EQ(t.merges, (std::vector<Merge>{{"x", "y"}, {"\u2581", "xy"}}));
}

TEST(SynthBpe, NeverMergesAcrossAWordStartOrANewline) {
  const BpeTraining t = train_bpe("a\u2581a\u2581a\n\n\na\n\na", 100);
  for (const Merge& m : t.merges) {
    EXPECT_EQ((m.first + m.second).find("\u2581", 1), std::string::npos) << m.first << m.second;
    const std::string j = m.first + m.second;
    const bool all_newlines = j.find_first_not_of('\n') == std::string::npos;
    EXPECT_TRUE(all_newlines || j.find('\n') == std::string::npos) << j;
  }
}

TEST(SynthBpe, SplitsUtf8IntoCharacters) {
  EXPECT_EQ(utf8_chars("a\u00e9\u65e5\U0001F642"),
            (std::vector<std::string>{"a", "\u00e9", "\u65e5", "\U0001F642"}));
}

}  // namespace
}  // namespace infer
