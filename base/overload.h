// Overload: a visitor for std::visit made of lambdas, one per alternative.
#pragma once

namespace infer {

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

}  // namespace infer
