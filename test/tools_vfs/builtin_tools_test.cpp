// The built-in tools' dispatch (tools_vfs/builtin_tools.h) on a temporary ROOT: each tool's
// result, and every bad argument or refused path answered with {error: ...}, never a throw.
#include "tools_vfs/builtin_tools.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "test/tools_vfs/temp_tree.h"

namespace infer::tools {
namespace {

using json = nlohmann::json;
using test::TempTree;

class BuiltinToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BuiltinOptions o;
    o.reader.max_chunk_bytes = 8;  // small chunks: the continuation shows
    o.subshell.landlock = LandlockMode::kOff;
    // One token a byte: the reader's token cap stays out of the way.
    auto t = BuiltinTools::open(tree_.base(), [](std::string_view s) { return s.size(); }, o);
    ASSERT_TRUE(t.ok()) << t.error().message;
    tools_ = std::move(t).value();
  }
  json run(std::string_view name, const json& args) { return tools_->run(name, args); }
  // The error of a result that must be one.
  std::string error(const json& r) {
    EXPECT_TRUE(r.is_object() && r.contains("error")) << r.dump();
    return r.value("error", "");
  }

  TempTree tree_;
  std::unique_ptr<BuiltinTools> tools_;
};

TEST(BuiltinToolSpecs, EveryToolHasADescriptionAndAnObjectSchema) {
  ASSERT_EQ(BuiltinTools::specs().size(), 8u);
  for (const ToolSpec& s : BuiltinTools::specs()) {
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_EQ(s.parameters.at("type"), "object") << s.name;
    EXPECT_TRUE(s.parameters.at("properties").is_object()) << s.name;
    EXPECT_TRUE(BuiltinTools::has(s.name));
  }
  EXPECT_FALSE(BuiltinTools::has("rm_rf"));
}

TEST(BuiltinToolsOpen, AMissingRootIsAnError) {
  TempTree tree;
  auto t = BuiltinTools::open(tree.at("missing"), [](std::string_view s) { return s.size(); });
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
}

TEST_F(BuiltinToolsTest, ReadFileGoesInChunksAndSaysWhatIsLeft) {
  tree_.file("notes.txt", "line one\nline two\n");
  json r = run("read_file", {{"path", "notes.txt"}});
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_EQ(r.at("offset"), 0);
  EXPECT_EQ(r.at("file_size"), 18);
  EXPECT_FALSE(r.at("eof").get<bool>());
  const uint64_t next = r.at("next_offset");
  EXPECT_GT(next, 0u);
  EXPECT_EQ(r.at("bytes_left"), 18 - next);
  EXPECT_NE(r.at("text").get<std::string>().find("continue at offset " + std::to_string(next)),
            std::string::npos)
      << r.at("text");
  std::string all;
  uint64_t offset = 0;
  for (int i = 0; i < 10 && offset < 18; ++i) {
    r = run("read_file", {{"path", "notes.txt"}, {"offset", offset}});
    ASSERT_FALSE(r.contains("error")) << r.dump();
    offset = r.at("next_offset");
  }
  EXPECT_EQ(offset, 18u);
  EXPECT_TRUE(r.at("eof").get<bool>());
}

TEST_F(BuiltinToolsTest, BinaryFilesAreDescribedNotShown) {
  tree_.file("blob.bin", std::string("\x89PNG\r\n\x1a\n\0\0", 10));
  const json r = run("read_file", {{"path", "blob.bin"}});
  EXPECT_TRUE(r.value("binary", false)) << r.dump();
  EXPECT_NE(r.at("text").get<std::string>().find("PNG"), std::string::npos);
}

TEST_F(BuiltinToolsTest, WriteMakeDirListStatSearchAndRemove) {
  EXPECT_EQ(run("make_dir", {{"path", "src"}}).value("created", false), true);
  const json w = run("write_file", {{"path", "src/a.txt"}, {"content", "hello\nworld\n"}});
  EXPECT_EQ(w.at("bytes_written"), 12) << w.dump();
  EXPECT_EQ(tree_.read("src/a.txt"), "hello\nworld\n");
  const json l = run("list_dir", {{"path", "src"}});
  ASSERT_EQ(l.at("entries").size(), 1u) << l.dump();
  EXPECT_EQ(l.at("entries")[0].at("name"), "a.txt");
  EXPECT_EQ(l.at("entries")[0].at("type"), "file");
  EXPECT_EQ(run("list_dir", json::object()).at("entries").size(), 1u);  // the root
  const json s = run("stat", {{"path", "src/a.txt"}});
  EXPECT_EQ(s.at("size"), 12);
  const json by_name = run("search_files", {{"dir", ""}, {"name", "a.t"}});
  ASSERT_EQ(by_name.at("hits").size(), 1u) << by_name.dump();
  EXPECT_EQ(by_name.at("hits")[0].at("path"), "src/a.txt");
  const json by_content = run("search_files", {{"content", "world"}});
  ASSERT_EQ(by_content.at("hits").size(), 1u) << by_content.dump();
  EXPECT_EQ(by_content.at("hits")[0].at("line"), 2);
  EXPECT_EQ(run("remove", {{"path", "src/a.txt"}}).value("removed", false), true);
  EXPECT_FALSE(tree_.exists("src/a.txt"));
}

TEST_F(BuiltinToolsTest, BadArgumentsAreErrorsThatNameTheProblem) {
  EXPECT_NE(error(run("nope", json::object())).find("no tool named 'nope'"), std::string::npos);
  EXPECT_NE(error(run("stat", json::array())).find("must be an object"), std::string::npos);
  EXPECT_NE(error(run("stat", json::object())).find("'path' is missing"), std::string::npos);
  EXPECT_NE(error(run("stat", {{"path", "a"}, {"follow", true}})).find("unknown argument 'follow'"),
            std::string::npos);
  EXPECT_NE(error(run("stat", {{"path", 3}})).find("must be a string"), std::string::npos);
  EXPECT_NE(error(run("read_file", {{"path", "x"}, {"offset", -1}})).find("integer 0 or more"),
            std::string::npos);
  EXPECT_NE(error(run("search_files", {{"name", "a"}, {"content", "b"}})).find("exactly one"),
            std::string::npos);
  EXPECT_NE(error(run("search_files", {{"name", ""}})).find("empty"), std::string::npos);
  EXPECT_NE(error(run("run_command", json::object())).find("exactly one way"), std::string::npos);
  EXPECT_NE(error(run("run_command", {{"argv", json::array({1})}})).find("not a string"),
            std::string::npos);
  EXPECT_NE(error(run("run_command", {{"shell", "zsh"}, {"script", "x"}})).find("sh or bash"),
            std::string::npos);
  EXPECT_NE(error(run("run_command", {{"argv", {"true"}}, {"timeout_s", 0}})).find("above 0"),
            std::string::npos);
  EXPECT_NE(error(run("read_file", {{"path", "missing.txt"}})).find("missing.txt"),
            std::string::npos);
}

TEST_F(BuiltinToolsTest, PathsOutsideRootAreRefused) {
  tree_.link("/etc", "out");
  for (const char* path : {"../x", "/etc/passwd", "out/passwd"}) {
    const std::string e = error(run("read_file", {{"path", path}}));
    EXPECT_FALSE(e.empty()) << path;
  }
  error(run("write_file", {{"path", "../escaped.txt"}, {"content", "x"}}));
  error(run("run_command", {{"argv", {"true"}}, {"cwd", ".."}}));
}

TEST_F(BuiltinToolsTest, RunCommandByArgvAndByShell) {
  tree_.file("f.txt", "x");
  const json a = run("run_command", {{"argv", {"ls"}}});
  EXPECT_EQ(a.value("exit_code", -1), 0) << a.dump();
  EXPECT_NE(a.at("output").get<std::string>().find("f.txt"), std::string::npos) << a.dump();
  const json s = run("run_command", {{"shell", "sh"}, {"script", "echo $((6*7)); exit 3"}});
  EXPECT_EQ(s.value("exit_code", -1), 3) << s.dump();
  EXPECT_NE(s.at("output").get<std::string>().find("42"), std::string::npos);
  EXPECT_NE(error(run("run_command", {{"argv", {"no-such-program-xyz"}}})).find("no-such"),
            std::string::npos);
}

TEST_F(BuiltinToolsTest, RunCommandEndsAtItsTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const json r = run("run_command", {{"argv", {"sleep", "100"}}, {"timeout_s", 0.3}});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.value("ended", ""), "timeout") << r.dump();
  EXPECT_LT(s, 0.3 + 1.0 + 2.5);  // the timeout, the kill grace, the group's bounded wait
}

}  // namespace
}  // namespace infer::tools
