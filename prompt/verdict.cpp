#include "prompt/verdict.h"

#include <cstdio>

namespace leap::prompt {

std::string feedback_text(const EvalOutcome& o) {
  const std::string details = o.feedback.empty() ? "" : "\n\n" + o.feedback;
  char buf[320];
  switch (o.status) {
    case Status::ok:
      std::snprintf(buf, sizeof buf,
                    "Your kernel for '%s' is correct and ran at %.3fx the reference's speed (%.1f us against %.1f us). "
                    "Make it faster while keeping it correct.",
                    o.task.c_str(), o.speedup, o.candidate_timing.median_us, o.reference_timing.median_us);
      return buf + details;  // a correct kernel's feedback: its profile ([eval] profile), if any
    case Status::compile_error:
      return "Your kernel for '" + o.task + "' did not compile. Fix these errors:" + details;
    case Status::wrong_answer:
      return "Your kernel for '" + o.task + "' ran but its output was wrong:" + details +
             "\n\nFind the mistake and return a corrected kernel.";
    case Status::runtime_error:
      return "Your kernel for '" + o.task + "' failed while running:" + details +
             "\n\nFix the fault (out-of-bounds access, bad launch configuration, error code) and try again.";
    case Status::timeout:
      return "Your kernel for '" + o.task + "' took too long:" + details +
             "\n\nMake sure every call finishes, and do far less work per call.";
    case Status::cheat_detected:
      return "The judge rejected your kernel for '" + o.task + "' (" + (o.check == Check::none ? "cheat_detected" : to_string(o.check)) +
             "):" + details +
             "\n\nCompute every output from the given inputs within each call, on the given stream, without "
             "touching anything else.";
    case Status::infra_error:
      return "The evaluation of your kernel for '" + o.task +
             "' failed for a reason of the evaluator's own, not your kernel's; it does not count. Submit it again.";
  }
  return o.feedback;
}

std::string verdict_turn(Status status, const std::string& feedback, bool closed) {
  return (closed ? "" : "<|im_end|>") + std::string("\n<|im_start|>user\nleap's verdict: ") + to_string(status) +
         (feedback.empty() ? "" : "\n" + feedback) +
         "\n\nReply with an improved complete kernel in one code block.<|im_end|>\n<|im_start|>assistant\n";
}

}  // namespace leap::prompt
