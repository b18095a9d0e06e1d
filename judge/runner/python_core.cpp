// The Python runner's native part (libleap-pyrunner.so), loaded with ctypes by pyrunner.py: the
// same channel, trusted start, confinement and call timing as leap-runner (runner_core), behind a
// C interface the interpreter can call without Python's headers. Tensors go to the interpreter as
// DLPack capsules over the judge's own buffers (no copies).
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "judge/runner/runner_core.h"

using namespace leap::runner;

namespace {

struct State {
  Options opts;
  std::unique_ptr<Backend> backend;
  Command layout;
  bool loaded = false;
  bool audit = false;  // the command being served is a correctness call
  char* arena = nullptr;
  double t_main = 0, lock_wait_us = 0;
  Reply pending;  // the reply of the command being served
};

State& state() {
  static State s;
  return s;
}

// A DLManagedTensor owning its shape: freed by its consumer (torch) through the deleter.
struct Managed {
  DLManagedTensor m{};
  std::vector<int64_t> shape;
};

}  // namespace

extern "C" {

// The trusted start: the runner's options, the GPU lock, the backend. Returns 0.
int leap_pyr_start(int argc, char** argv) {
  State& s = state();
  s.t_main = now_us();
  start_process();
  s.opts = parse(argc, argv);
  s.opts.blocking_stream = true;
  s.lock_wait_us = start_confined(s.opts);
  s.backend = std::make_unique<Backend>(s.opts.cuda, s.opts.device, s.opts.blocking_stream);
  return 0;
}

// Once the interpreter has imported what candidates use: the ready reply, with its start.
void leap_pyr_ready() {
  State& s = state();
  release_gpu_lock(s.opts);
  Reply ready;
  ready.elapsed_us = now_us() - s.t_main;
  ready.lock_wait_us = s.lock_wait_us;
  send_reply(ready);
}

// The next command: its op (0 at the channel's end), sequence number and slot; descriptors (load
// only) into fds.
int leap_pyr_receive(uint64_t* seq, uint32_t* slot, int* fds, int max_fds, int* nfds) {
  State& s = state();
  Command c;
  std::vector<int> got;
  *nfds = 0;
  if (s.loaded ? !receive_plain(c) : !receive(c, got, max_fds)) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (static_cast<int>(i) < max_fds) fds[(*nfds)++] = got[i];
    else ::close(got[i]);
  }
  *seq = c.seq;
  *slot = c.slot;
  s.audit = c.op == Op::call && c.audit != 0;
  s.pending = Reply{};
  s.pending.seq = c.seq;
  s.pending.kind = ReplyKind::called;
  if (c.op == Op::load) {
    if (s.loaded || c.n_in + c.n_out > static_cast<uint32_t>(kMaxTensors)) die("malformed load");
    s.layout = c;
  } else if (c.op == Op::call && (!s.loaded || c.slot >= s.layout.slots)) {
    die("command out of order");
  } else if (c.op == Op::calibrate && s.loaded) {
    die("command out of order");
  }
  return static_cast<int>(c.op);
}

void leap_pyr_calibrate() {
  State& s = state();
  s.backend->calibrate(s.pending);
  send_reply(s.pending);
}

// `load`, trusted part: the judge's buffers mapped, then this process confined (the candidate's
// source runs after this returns). Returns the mapping's time in microseconds.
double leap_pyr_map_and_confine(int arena_fd) {
  State& s = state();
  const double t0 = now_us();
  s.arena = s.backend->map_arena(s.layout, arena_fd);
  confine(s.layout, s.opts.cuda, s.opts);
  s.loaded = true;
  return now_us() - t0;
}

void leap_pyr_layout(int* n_in, int* n_out) {
  *n_in = static_cast<int>(state().layout.n_in);
  *n_out = static_cast<int>(state().layout.n_out);
}

// Tensor i of `slot` as a DLManagedTensor for DLPack's capsule (its consumer frees it).
void* leap_pyr_view(uint32_t slot, int i) {
  State& s = state();
  std::vector<std::vector<int64_t>> dims;
  std::vector<DLTensor> views = slot_views(s.layout, s.arena, slot, s.opts.cuda, dims);
  auto* t = new Managed;
  t->shape = dims.at(static_cast<size_t>(i));
  t->m.dl_tensor = views[static_cast<size_t>(i)];
  t->m.dl_tensor.shape = t->shape.data();
  t->m.manager_ctx = t;
  t->m.deleter = [](DLManagedTensor* m) { delete static_cast<Managed*>(m->manager_ctx); };
  return &t->m;
}

int leap_pyr_audit() { return state().audit ? 1 : 0; }

void* leap_pyr_stream() { return state().backend->stream(); }

void leap_pyr_begin() { state().backend->begin(); }

// The call's end: its timing and the reply; `message` from an exception the call raised.
void leap_pyr_end(int rc, const char* message) {
  State& s = state();
  s.backend->end(s.pending, rc);
  if (message && *message && s.pending.message[0] == 0) set_message(s.pending, message);
  send_reply(s.pending);
}

// The load's reply: loaded, or failed with why.
void leap_pyr_loaded(int ok, const char* message, double map_us, double library_us) {
  State& s = state();
  s.pending.kind = ok ? ReplyKind::loaded : ReplyKind::failed;
  s.pending.map_us = map_us;
  s.pending.library_us = library_us;
  if (message) set_message(s.pending, message);
  send_reply(s.pending);
}

}  // extern "C"
