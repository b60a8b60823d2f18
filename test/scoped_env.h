// Sets (or unsets, with nullptr) an environment variable for one scope and puts the old value
// back: the ops and the demo model read their knobs from the environment when they are made.
#ifndef INFER_TEST_SCOPED_ENV_H_
#define INFER_TEST_SCOPED_ENV_H_

#include <cstdlib>
#include <optional>
#include <string>

namespace infer::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace infer::test

#endif  // INFER_TEST_SCOPED_ENV_H_
