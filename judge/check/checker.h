// The judge's view of one candidate's tensors: the arena slots a runner calls the candidate
// on, the judge-private pristine copy of every input, outputs poisoned before every call, and
// the checks after a call (unwritten outputs, input mutation, replayed outputs, tolerance
// comparison against the LibTorch reference). Never runs candidate code.
#pragma once
#include <ATen/ATen.h>

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/outcome.h"
#include "judge/device/device.h"
#include "judge/device/workspace.h"
#include "judge/runner/protocol.h"
#include "proto/leap.capnp.h"
#include "tasks/module_reference.h"
#include "tasks/references.h"
#include "tasks/task.h"

namespace leap {

struct Slots {
  struct Slot {
    std::vector<at::Tensor> inputs, outputs;  // views of the arena (the runner sees these)
    std::vector<at::Tensor> pristine;         // judge-private: what the inputs must be
  };
  std::vector<Slot> slots;
  std::vector<uint64_t> offsets;  // per tensor (inputs, then outputs) within a slot
  uint64_t slot_bytes = 0;
  std::vector<std::vector<at::Tensor>> kept;  // judge-private output copies: the reservoir, + 1
  size_t size() const { return slots.size(); }
  Slot& operator[](size_t i) { return slots[i]; }
};

// How many slots and kept output sets an evaluation gets. KernelBench's GPU sizes reach 6-9 GB
// per tensor: with 4 slots and 8 kept sets such a task needs more than an H200 has. Half of the
// free device memory (`free`; `own`, this judge's reused workspace, counts as free) goes to the
// workspace (`bytes(n, k)` plus a quarter of growth), the rest to the reference's and the
// candidate's own memory. Slots go down to 2, then the kept sets (the last timed call is
// verified in place whatever happens), then to one slot; `free` 0: no bound (the CPU).
std::pair<size_t, size_t> fit_slots(size_t slots, size_t kept, size_t free, size_t own,
                                    const std::function<uint64_t(size_t, size_t)>& bytes);

class Checker {
 public:
  Checker(proto::TaskRef::Reader task, Device& dev, EvalOutcome& o);

  // `n` slots in the workspace's arena (returned through `arena`), with private pristine
  // buffers and `keep_capacity` + 1 kept output sets in its private memory.
  Slots make_slots(size_t n, Workspace& ws, std::shared_ptr<Arena>& arena, size_t keep_capacity);
  // Device bytes an evaluation with `n` slots and `keep_capacity` kept sets holds: the arena,
  // the private memory and the replay history.
  uint64_t bytes_for(size_t n, size_t keep_capacity) const;
  runner::Command load_command(const Slots& s) const;
  // Fresh inputs from `seed` into the pristine copy and the arena; outputs poisoned.
  void fill(Slots::Slot& s, uint64_t seed);
  std::vector<at::Tensor> reference(const Slots::Slot& s);
  // Every output element written. `first`: the first call (partial writes are named so).
  bool all_written(Slots::Slot& s, bool first);
  // Inputs untouched and outputs within tolerance of the reference. A mismatch is a
  // wrong_answer in the correctness trials, else `wrong_check` (cheat_detected).
  bool verify(Slots::Slot& s, bool trial, Check wrong_check);
  // The trials were cut (a candidate clearly slower than its reference): the verified timed calls
  // carry the rest of the correctness check, so a wrong one is a wrong_answer, not a sign that the
  // candidate behaves only while checked (too few checked calls to tell those apart).
  void timed_calls_carry_trials(bool carry) { timed_calls_carry_trials_ = carry; }

  // Timed calls are verified later, from copies: every timed call's outputs are copied (the
  // same work after every call, so the cadence tells the candidate nothing) into a reservoir
  // that ends up holding a uniform random `capacity` of them (allocated by make_slots).
  void keep(Slots& all, const Slots::Slot& s, uint64_t seed, uint32_t call, std::mt19937_64& rng);
  // keep()'s copy without keeping: a warm-up call's outputs, so that it looks like a timed one.
  void copy_out(Slots& all, const Slots::Slot& s);
  // Compares the kept outputs with the reference of their regenerated inputs (slot 0's
  // pristine buffers are overwritten). Runs after the candidate's runner is gone.
  bool verify_kept(Slots& all);
  size_t kept() const { return filled_; }

 private:
  bool fail(Status s, Check check, const std::string& feedback);
  Tolerance tolerance_for(proto::DType d) const;
  bool outputs_correct(const Slots::Slot& s, const std::vector<at::Tensor>& outputs, std::string* report);
  bool wrong(const std::vector<at::Tensor>& outputs, bool trial, Check wrong_check, uint32_t call,
             const std::string& report);

  proto::TaskRef::Reader task_;
  Device& dev_;
  EvalOutcome& o_;
  ReferenceFn ref_ = nullptr;
  std::shared_ptr<ModuleReference> module_;  // an imported task's reference (ref_ is null then)
  std::vector<at::Tensor> module_params_;    // per input: the module's tensor it is, or undefined
  Params params_;
  std::deque<std::vector<at::Tensor>> previous_;  // outputs of the last verified calls
  size_t replay_history_ = 4;
  bool timed_calls_carry_trials_ = false;
  struct KeptCall {
    uint64_t seed = 0;
    uint32_t call = 0;
  };
  std::vector<KeptCall> kept_;  // beside Slots::kept; the last is where the newest call goes
  size_t filled_ = 0, seen_ = 0;
};

}  // namespace leap
