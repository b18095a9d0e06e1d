// The language-model policy ([policy] kind = "lm"): kernels written as text (docs/lm.md).
#pragma once
#include <memory>

#include "policy/policy.h"

namespace leap {

std::unique_ptr<Policy> make_lm_policy(const PolicyConfig& cfg);

}  // namespace leap
