// leap's verdict as the policy reads it: the one wording of what happened to a candidate and what
// to do next, for the LM policy's later turns, `leap sft --refine`, `leap agent` and the service's
// `feedback_text`. No other module words a verdict.
#pragma once
#include <string>

#include "common/outcome.h"

namespace leap::prompt {

// The outcome as the next user message of a multi-turn rollout: what happened, the judge's
// feedback, and what to do next.
std::string feedback_text(const EvalOutcome& o);

// The user's turn after an answer (ChatML, up to the assistant's opening): leap's verdict on it
// and the request for an improved kernel. `closed`: the answer already ends with <|im_end|>.
std::string verdict_turn(Status status, const std::string& feedback, bool closed);

}  // namespace leap::prompt
