// Subshell: runs one command for the agent (DESIGN.md §8, docs/TOOLS.md "The subshell"): argv
// exec without a shell (a shell runs only when argv names one), a working directory beneath
// ROOT opened through the VFS resolver, a scrubbed environment, stdin on /dev/null, its own
// session and process group, a wall-clock and a no-output timeout (SIGTERM to the group, then
// SIGKILL after a grace), output capped to its head and tail, Landlock where the kernel has it.
// When it returns, no process of the command's group is left and the child is reaped.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "tools_vfs/head_tail_buffer.h"
#include "tools_vfs/landlock.h"
#include "tools_vfs/resolver.h"

namespace infer::tools {

enum class LandlockMode {
  kAuto,  // confine the child where the kernel has Landlock; say on stderr where it cannot
  kOff,   // never confine (said on stderr too)
};

struct SubshellOptions {
  std::chrono::milliseconds wall_timeout{30'000};
  std::chrono::milliseconds idle_timeout{10'000};   // no output for this long; 0: never
  std::chrono::milliseconds kill_grace{1'000};      // SIGTERM → SIGKILL
  std::chrono::milliseconds drain_after_exit{250};  // reading on after the command exits,
                                                    // while a background child holds its pipe
  size_t head_bytes = size_t(16) << 10;             // kept per stream
  size_t tail_bytes = size_t(16) << 10;
  uint64_t max_output_bytes = uint64_t(64) << 20;  // read from the child, both streams:
                                                   // past it the command is ended
  bool merge_stderr = false;  // one pipe for both (order kept) instead of two captures
  std::string path = "/usr/local/bin:/usr/bin:/bin";  // PATH, also where argv[0] is looked up
  std::string lang = "C.UTF-8";
  std::vector<std::string> extra_env;  // "NAME=value" set by the caller, after the defaults
  LandlockMode landlock = LandlockMode::kAuto;
  LandlockPolicy landlock_policy = {
      .read_paths = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
                     "/proc", "/sys", "/dev", "/run"},
      .write_paths = {"/dev/null"},
  };
  rlim_t max_processes = 0;  // RLIMIT_NPROC for the child (per user, not per group); 0: unset
};

struct SubshellRequest {
  std::vector<std::string> argv;  // argv[0]: a name looked up in PATH, or a path
  std::string cwd;                // relative to ROOT; "" is ROOT
  // This command's wall-clock limit; 0: the options' wall_timeout (a tool call's own timeout).
  std::chrono::milliseconds wall_timeout{0};
};

enum class EndReason {
  kExited,       // it exited by itself: exit_code
  kKilled,       // a signal we did not send ended it: term_signal
  kTimeout,      // wall_timeout passed; we ended it
  kIdle,         // no output for idle_timeout; we ended it
  kOutputLimit,  // it wrote more than max_output_bytes; we ended it
};
const char* end_reason_name(EndReason reason);

struct SubshellResult {
  EndReason reason = EndReason::kExited;
  int exit_code = -1;   // the status it passed to exit(), -1 when a signal ended it
  int term_signal = 0;  // the signal that ended it, 0 when it exited
  pid_t pgid = 0;       // its pid, session and process group id
  double elapsed_s = 0;
  HeadTailBuffer out;  // stdout (and stderr when merged)
  HeadTailBuffer err;  // stderr, empty when merged
  bool merged = false;
  bool confined = false;         // Landlock was applied to the child
  bool group_survivors = false;  // part of its group outlived the final SIGKILL's bounded wait
};

// What the model reads: how it ended, then each stream with its size and what was dropped.
std::string render_result(const SubshellResult& result);

class Subshell {
 public:
  // Opens ROOT and builds the Landlock ruleset once; prints its status on stderr when the
  // children will not be confined. Needs pidfd (Linux >= 5.4): kUnsupported without.
  static Result<Subshell> open(const std::string& root, SubshellOptions options = {});

  // Runs the command and waits for it, within wall_timeout + kill_grace + a few bounded waits.
  // An Error when it could not start (unknown command, cwd outside ROOT, bad argv).
  Result<SubshellResult> run(const SubshellRequest& request) const;

  const LandlockRuleset& landlock() const { return landlock_; }
  const SubshellOptions& options() const { return options_; }

 private:
  Subshell(BeneathResolver resolver, std::string root_path, SubshellOptions options,
           LandlockRuleset landlock)
      : resolver_(std::move(resolver)),
        root_path_(std::move(root_path)),
        options_(std::move(options)),
        landlock_(std::move(landlock)) {}
  Result<std::string> find_program(const std::string& name) const;
  std::vector<std::string> environment() const;

  BeneathResolver resolver_;
  std::string root_path_;  // ROOT as the kernel names it, for HOME only
  SubshellOptions options_;
  LandlockRuleset landlock_;
};

}  // namespace infer::tools
