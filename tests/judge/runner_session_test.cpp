// A runner session's parts that need no runner: the candidate's deadline as the judge's own work
// moves it, and the verdict on a runner that did not answer.
#include <gtest/gtest.h>

#include "judge/pool/runner_session.h"

namespace leap {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(CandidateDeadline, TheCandidatesBudgetStartsWithItsLoadAndTheJudgesOwnWorkMovesItAtMostEightSeconds) {
  const Clock::time_point t0{};
  CandidateDeadline d(4, t0);
  d.prepare(t0);
  EXPECT_EQ(d.at(), t0 + seconds(20));  // leap's own preparation has a budget of its own
  const auto t1 = t0 + seconds(3);
  d.start(t1);
  EXPECT_EQ(d.at(), t1 + seconds(4));
  // The judge works 2 s before the first request (inputs, references): the deadline moves by as much.
  EXPECT_EQ(d.next_request(t1 + seconds(2)), t1 + seconds(6));
  // The candidate's own time does not move it: the request came back 1 s later, the next is sent at once.
  d.judge_resumes(t1 + seconds(3));
  EXPECT_EQ(d.next_request(t1 + seconds(3)), t1 + seconds(6));
  // The judge's own work moves it by at most 8 s in all.
  EXPECT_EQ(d.next_request(t1 + seconds(20)), t1 + seconds(4 + 8));
  EXPECT_DOUBLE_EQ(d.judge_own_s(), 8);
  d.judge_resumes(t1 + seconds(21));
  EXPECT_EQ(d.next_request(t1 + seconds(30)), t1 + seconds(12));
}

TEST(CandidateDeadline, WorkBetweenRequestsAddsUpToTheCap) {
  const Clock::time_point t0{};
  CandidateDeadline d(30, t0);
  d.start(t0);
  auto now = t0;
  for (int i = 0; i < 100; ++i) {
    now += milliseconds(100);  // the judge's work before the request
    d.next_request(now);
    now += milliseconds(10);  // the call
    d.judge_resumes(now);
  }
  EXPECT_EQ(d.at(), t0 + seconds(38));  // 100 x 0.1 s of the judge's work, capped at 8 s
}

TEST(RunnerSession, ARunnerThatDidNotAnswerIsATimeoutAForgedReplyOrARuntimeErrorWithHowItEnded) {
  Verdict v = unanswered(Runner::Wait::deadline, "during call 3", 4, "", "");
  EXPECT_EQ(v.status, Status::timeout);
  EXPECT_EQ(v.check, Check::none);
  EXPECT_EQ(v.feedback,
            "the candidate's load and calls exceeded the evaluation's 4 s deadline during call 3; the candidate's "
            "runner was killed");
  v = unanswered(Runner::Wait::malformed, "while the candidate was loaded", 4, "", "");
  EXPECT_EQ(v.status, Status::cheat_detected);
  EXPECT_EQ(v.check, Check::forged_reply);
  v = unanswered(Runner::Wait::eof, "during call 1", 4, "killed by SIGSEGV (Segmentation fault)", "boom");
  EXPECT_EQ(v.status, Status::runtime_error);
  EXPECT_EQ(v.feedback,
            "the candidate's process ended during call 1, killed by SIGSEGV (Segmentation fault); its last output:\nboom");
  EXPECT_EQ(unanswered(Runner::Wait::eof, "during call 1", 4, "", "").feedback,
            "the candidate's process ended during call 1");
}

}  // namespace
}  // namespace leap
