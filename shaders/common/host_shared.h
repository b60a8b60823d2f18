// Lets one header declare push constants for both C++ and GLSL (STYLE.md, Shaders): 32-bit
// scalars only, `uint`/`int`/`float`, declared between INFER_PUSH_BEGIN and INFER_PUSH_END.
#ifndef INFER_SHADERS_COMMON_HOST_SHARED_H_
#define INFER_SHADERS_COMMON_HOST_SHARED_H_

#ifdef __cplusplus
#include <cstdint>
namespace infer::shader {
using uint = uint32_t;
}  // namespace infer::shader
#define INFER_PUSH_BEGIN(name) \
  namespace infer::shader {    \
  struct name {
#define INFER_PUSH_END(name) \
  }                          \
  ;                          \
  }
#else
#define INFER_PUSH_BEGIN(name) layout(push_constant) uniform name {
#define INFER_PUSH_END(name) \
  }                          \
  pc;
#endif

#endif  // INFER_SHADERS_COMMON_HOST_SHARED_H_
