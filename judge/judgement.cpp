#include "judge/judgement.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/outcome_proto.h"
#include "common/paths.h"
#include "judge/check/anti_hacking.h"
#include "judge/check/tensors.h"
#include "judge/device/gpu_lock.h"
#include "judge/device/profiler.h"
#include "judge/pool/cpu_wait.h"

namespace leap {
namespace {

using runner::Command;
using runner::Reply;
using runner::ReplyKind;

constexpr unsigned kCalibrationCalls = 9;  // trusted no-op calls before the candidate loads

uint64_t fresh_seed() {
  uint64_t s = 0;
  if (::getrandom(&s, sizeof s, 0) != sizeof s) s = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return s ? s : 1;
}

}  // namespace

JudgeSettings judge_settings(proto::EvalSettings::Reader s) {
  // Only leap's own client (evaluation/evaluator.cpp) builds requests, from a validated [sandbox].
  if (!(s.getDeadlineS() > 0)) throw LeapError("an evaluation request without a deadline");
  return JudgeSettings{from_proto(s), s.getDeadlineS(), s.getMemoryMb()};
}

Judgement::Judgement(proto::EvalRequest::Reader req, Device& dev, RunnerPool& pool, ReferenceTimings& cache,
                     Workspace& workspace, GpuLock& lock, EvalOutcome& o)
    : req_(req), settings_(judge_settings(req.getSettings())), dev_(dev), pool_(pool),
      python_(req.getFormat() == proto::CandidateFormat::KERNELBENCH), cache_(cache), workspace_(workspace),
      lock_(lock), o_(o), checker_(req.getTask(), dev, o), calibration_(settings_.eval, dev.is_gpu(), python_),
      budget_(settings_.eval, settings_.deadline_s) {
  o_.seed = settings_.eval.seed ? settings_.eval.seed : fresh_seed();
  keep_rng_.seed(mix_seed(o_.seed, 0xC0FFEEull));
}

Judgement::~Judgement() {
  if (!session_) return;
  // Diagnostics of the sandbox (what the seccomp filter refused), for whoever debugs a driver.
  if (std::getenv("LEAP_RUNNER_SECCOMP_DEBUG")) o_.feedback += "\n[runner stderr]\n" + session_->runner().stderr_tail();
  retire_runner();
}

void Judgement::run() {
  allocate();
  reference_timing();
  if (!start_runner() || !load()) return;
  try {
    if (!calls()) return;
  } catch (const std::exception& e) {
    blame_after_failure(e);
    return;
  }
  o_.speedup = o_.candidate_timing.median_us > 0 ? o_.reference_timing.median_us / o_.candidate_timing.median_us : 0;
  if (!fast_enough()) return;
  o_.status = Status::ok;
  profile();
}

// [eval] profile: after the verdict, the runner gone, the device the judge's alone (a profiler's
// replays would disturb another judge's timing). Nothing here changes the verdict or the timing.
void Judgement::profile() {
  if (!settings_.eval.profile || !dev_.is_gpu() || python_) return;
  GpuLock::Timing exclusive(lock_);
  ProfileResult r = profile_candidate(req_.getLibraryPath(), req_.getTask(), kProfileBudgetS);
  o_.profile_us = r.wall_us;
  o_.profile_error = r.error;
  o_.kernels = std::move(r.kernels);
  const KernelProfile* longest = longest_kernel(o_.kernels);
  if (!longest) return;
  o_.bottleneck = bottleneck_of(*longest);
  o_.feedback += (o_.feedback.empty() ? "" : "\n") + profile_feedback(o_.kernels);
}

// Views of this task's tensors in the judge's workspace (grown if the task needs more), as
// many slots and kept sets as fit beside the reference's and the candidate's own memory.
void Judgement::allocate() {
  dev_.begin_task(std::string(req_.getTask().getName().cStr()));
  auto [n, k] = fit_slots(dev_.is_gpu() ? 4 : 2, settings_.eval.verified_timed_calls, dev_.free_memory(),
                          workspace_.bytes(), [&](size_t n, size_t k) { return checker_.bytes_for(n, k); });
  slots_ = checker_.make_slots(n, workspace_, arena_, k);
}

void Judgement::reference_timing() {
  std::string key = std::string(req_.getTask().getName().cStr()) + "@" + dev_.name();
  if (req_.getHasReferenceTiming()) {
    o_.reference_timing = from_proto(req_.getReferenceTiming());
  } else if (auto it = cache_.find(key); it != cache_.end()) {
    o_.reference_timing = it->second;
  } else {
    // In the judge, where candidate code never runs, before any runner holds the candidate.
    checker_.fill(slots_[0], mix_seed(o_.seed, 0x7E5Full));
    quiet();
    GpuLock::Timing timing(lock_);
    o_.reference_timing = cache_[key] =
        dev_.time_reference([&](size_t) { checker_.reference(slots_[0]); }, 1, settings_.eval).stats;
  }
  budget_.set_reference(o_.reference_timing.median_us);
  // Warms LibTorch's caching allocator for the reference, so a runner that later takes all
  // device memory cannot starve the judge's comparisons.
  checker_.fill(slots_[0], o_.seed);
  (void)checker_.reference(slots_[0]);
}

// On the CPU, no runner of this judge's is starting while something is timed (the pool starts
// replacements after an evaluation; one still starting is waited for, briefly). On the GPU the
// spares start in the driver's time, too slowly to wait for.
void Judgement::quiet() {
  if (!dev_.is_gpu()) pool_.settle(1);
}

bool Judgement::start_runner() {
  std::string why;
  double waited = 0;
  auto runner = pool_.take(&why, &waited);
  o_.stages.runner_wait_us = waited;
  if (!runner) {
    o_.status = Status::infra_error;
    o_.feedback = why;
    return false;
  }
  o_.stages.runner_start_us = runner->start_us;
  session_ = std::make_unique<RunnerSession>(std::move(runner), dev_.is_gpu(), settings_.deadline_s);
  session_->deadline().prepare(Clock::now());
  {
    quiet();
    GpuLock::Timing timing(lock_);  // the overhead as the timed calls see it: nothing else on the device
    for (unsigned i = 0; i < kCalibrationCalls; ++i) {
      double x = 0, waited = 0;
      std::string why;
      if (!calibrate(session_->runner(), &x, &waited, &why)) {
        o_.status = Status::infra_error;
        o_.feedback = "the candidate runner failed its calibration, before any candidate code was loaded: " + why;
        if (auto tail = session_->runner().stderr_tail(); !tail.empty()) o_.feedback += "; its output: " + tail;
        return false;
      }
      if (i > 0) calibration_.add_before_load(x, waited);  // the first call pays one-time costs
    }
  }
  session_->begin_candidate();
  return true;
}

// One trusted no-op call: what the judge observes beyond what the runner reports (`excess`), and of
// it, on the GPU, the runner's wait for a CPU (`waited`).
bool Judgement::calibrate(Runner& r, double* excess, double* waited, std::string* why) {
  Command c;
  c.op = runner::Op::calibrate;
  c.seq = session_->next_seq();
  Reply reply;
  double wall = 0;
  dev_.before_call();
  const double cpu0 = session_->window_start(r);
  const CpuWait wait(r, dev_.is_gpu());
  auto w = r.request(c, {}, session_->deadline().at(), &reply, &wall);
  if (w != Runner::Wait::reply || reply.seq != c.seq || reply.kind != ReplyKind::called) {
    if (why) {
      const std::string ended = r.how_it_ended(0.2);
      *why = w == Runner::Wait::deadline    ? "no reply within the evaluation's deadline"
             : w == Runner::Wait::eof       ? "it ended" + (ended.empty() ? std::string() : " (" + ended + ")")
             : w == Runner::Wait::malformed ? "a malformed reply"
                                            : "a reply to another request";
    }
    return false;
  }
  *waited = wait.waited_us();
  *excess = session_->observed_us(r, wall, cpu0) - reply.elapsed_us;
  return true;
}

// The overhead again, now, on a spare runner that never held a candidate and shares the
// candidate runner's core: the machine's load at this moment, which the candidate cannot touch.
void Judgement::recalibrate(bool record) {
  Runner* spare = pool_.idle_spare();
  double x = 0, waited = 0;
  if (!spare) return;
  if (!calibrate(*spare, &x, &waited)) pool_.discard_spare(spare);
  else if (record) calibration_.add_live(x, waited);
}

// What the Python runner needs to build and call ModelNew, from the judge (never the candidate):
// its source, the problem's init arguments, which inputs are the forward's and which the
// module's parameters (by state_dict name), and the load_inline extensions the farm built (their
// libraries' descriptors follow the manifest's, in this order). A sealed memfd the runner reads once.
int Judgement::python_manifest(std::vector<int>& extensions) const {
  const nlohmann::json built = nlohmann::json::parse(read_file(req_.getLibraryPath()));  // written by the compile farm
  nlohmann::json m;
  m["source"] = built.at("source");
  m["extensions"] = nlohmann::json::array();
  for (const auto& e : built.at("extensions")) {
    const std::string lib = e.at("library");
    int fd = ::open(lib.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_errno("open " + lib);
    extensions.push_back(fd);
    m["extensions"].push_back(e.at("name"));
  }
  const std::string init = req_.getTask().getInitInputs();
  m["init_inputs"] = init.empty() ? nlohmann::json::array() : nlohmann::json::parse(init);
  size_t forward = 0;
  nlohmann::json params = nlohmann::json::array();
  for (auto spec : req_.getTask().getInputs()) {
    if (spec.getParameter().size() == 0) ++forward;
    else params.push_back(std::string(spec.getParameter()));
  }
  m["forward_inputs"] = forward;
  m["require_custom_kernel"] = settings_.eval.require_custom_kernel;
  m["parameters"] = params;
  // Invalid UTF-8 in the source is replaced: the runner's compile() reports where.
  const std::string out = m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  int fd = ::memfd_create("leap-candidate", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw_errno("memfd_create");
  if (::write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
    ::close(fd);
    throw_errno("write the candidate's manifest");
  }
  ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  ::lseek(fd, 0, SEEK_SET);
  return fd;
}

bool Judgement::load() {
  auto t0 = Clock::now();
  std::string path = req_.getLibraryPath();
  if (!python_ && !imports_allowed(path, o_)) return false;  // before any runner sees it
  std::vector<int> extensions;
  int lib = python_ ? python_manifest(extensions) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (lib < 0) throw_errno("open " + path);
  Command c = checker_.load_command(slots_);
  c.seq = session_->next_seq();
  c.memory_limit_bytes = settings_.memory_mb << 20;
  std::memcpy(c.cuda_ipc_handle, arena_->ipc_handle.data(), sizeof c.cuda_ipc_handle);
  std::vector<int> fds = {lib};
  if (arena_->fd >= 0) fds.push_back(arena_->fd);
  fds.insert(fds.end(), extensions.begin(), extensions.end());
  Reply r;
  double wall = 0;
  auto w = session_->runner().request(c, fds, session_->deadline().next_request(Clock::now()), &r, &wall);
  session_->deadline().judge_resumes(Clock::now());
  ::close(lib);
  for (int fd : extensions) ::close(fd);
  session_->runner().cpu_mark_us = -1;  // loading (the candidate's constructors) is not a call's
  o_.stages.load_us = micros_since(t0);
  if (w != Runner::Wait::reply) return fail(session_->failed(w, "while the candidate was loaded"));
  o_.stages.runner_map_us = r.map_us;
  o_.stages.runner_library_us = r.library_us;
  if (r.kind == ReplyKind::failed) return fail(Status::runtime_error, Check::none, r.message);
  if (r.kind != ReplyKind::loaded || r.seq != c.seq)
    return fail(Status::cheat_detected, Check::forged_reply, "the runner answered out of protocol while loading");
  return threads_unchanged();
}

// A task may require a correct kernel to be fast (KernelBench's fast_p): judged on the
// measured speedup, once the timing is done.
bool Judgement::fast_enough() {
  const double need = req_.getTask().getMinSpeedup();
  if (need <= 0 || o_.speedup >= need) return true;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "correct, but %.3fx the reference's speed (%.1f us against %.1f us; this task needs at least %.3gx): "
                "too slow",
                o_.speedup, o_.candidate_timing.median_us, o_.reference_timing.median_us, need);
  return fail(Status::timeout, Check::too_slow, buf);
}

// Kills the runner; on the GPU, an arena its work may still reach is never handed to the next
// evaluation (Workspace::quarantine).
void Judgement::retire_runner() {
  if (dev_.is_gpu() && !session_->runner().settled) workspace_.quarantine();
  pool_.retire(session_->release(), arena_);
  session_.reset();
}

bool Judgement::threads_unchanged() {
  if (auto v = session_->threads_left()) return fail(*v);
  return true;
}

// A judge-side failure once candidate code has run: the candidate's fault if the judge works
// again as soon as the runner is gone (it held the device's memory, say), else leap's.
void Judgement::blame_after_failure(const std::exception& e) {
  if (session_) retire_runner();
  pool_.wait_idle(0.5);
  std::string err = dev_.synchronize();
  try {
    if (err.empty()) (void)checker_.reference(slots_[0]);
  } catch (const std::exception& again) {
    err = again.what();
  }
  if (!err.empty()) throw LeapError(std::string("the judge failed: ") + e.what());
  fail(Status::runtime_error, Check::resource_exhaustion,
       std::string("the judge's work failed while the candidate's runner was alive (") + e.what() +
           ") and succeeded once it was gone");
}

bool Judgement::fail(Status s, Check check, const std::string& feedback) {
  o_.status = s;
  o_.check = check;
  o_.feedback = feedback;
  return false;
}

}  // namespace leap
