// leap-bench-checkpoint: the learner's checkpoint of an LM policy, as the step's path pays for it.
// Baseline: save() on the path (the whole write). Now: snapshot() on the path (host copies of the
// model, its fp32 masters and AdamW's moments), its write() after the step, beside training.
// The policy comes from a model folder (e.g. tools/make_shaped_model.py --shape 0.5b) and takes
// one update first, so that the optimizer's state exists as at a real checkpoint. Prints a table,
// each repeat's figures, and the ratio of the path's times; checks that both folders load to the
// same weights.
//   ./build/leap-bench-checkpoint --model runs/shaped-0.5b [--device cuda] [--dtype auto] [--repeat 3] [--out DIR]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/error.h"
#include "policy/policy.h"
#include "tasks/task.h"

int main(int argc, char** argv) {
  using namespace leap;
  CLI::App app{"The learner's checkpoint on the step's path: save() against snapshot() + write() after"};
  std::string model, device = "cpu", dtype = "auto", out = "runs/bench-checkpoint";
  int repeat = 3;
  app.add_option("--model", model, "Hugging Face model folder")->required();
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--dtype", dtype, "auto, float32, bfloat16, float16");
  app.add_option("--repeat", repeat, "measurements of each (at least 1)")->check(CLI::PositiveNumber);
  app.add_option("--out", out, "scratch folder for the checkpoints (removed at the end)");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each repeat's line reaches a pipe even if the process dies later
  try {
    PolicyConfig c;
    c.kind = "lm";
    c.model = model;
    c.device = device;
    c.dtype = dtype;
    c.max_new_tokens = 16;
    c.lr = 1e-5;
    auto policy = make_policy(c, 1);
    const auto tasks = load_suite("builtin");
    std::vector<TrainSample> batch;
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      auto g = policy->generate(tasks.front(), Backend::cpu, {}, seed);
      TrainSample t;
      t.context = g.context;
      t.actions = g.actions;
      t.logprob = g.logprob;
      t.token_logprobs = g.token_logprobs;
      t.advantage = seed == 1 ? 1.0 : -1.0;
      batch.push_back(t);
    }
    policy->train(batch);  // AdamW's moments exist from here on

    std::filesystem::remove_all(out);
    std::vector<double> save_s, copy_s, write_s;
    for (int r = 0; r < repeat; ++r) {
      const std::string a = out + "/save-" + std::to_string(r), b = out + "/snapshot-" + std::to_string(r);
      auto t0 = Clock::now();
      policy->save(a);
      save_s.push_back(micros_since(t0) / 1e6);
      t0 = Clock::now();
      auto snap = policy->snapshot();
      copy_s.push_back(micros_since(t0) / 1e6);
      if (!snap) throw LeapError("the policy keeps no snapshot here (its state needs more memory than is available beyond the reserve for training)");
      t0 = Clock::now();
      snap->write(b);
      write_s.push_back(micros_since(t0) / 1e6);
      std::printf("repeat %d: save %.3f s; snapshot %.3f s + write %.3f s\n", r + 1, save_s.back(), copy_s.back(),
                  write_s.back());
    }
    policy.reset();  // room for the two loaded below
    auto weights_of = [&](const std::string& dir) {
      auto p = make_policy(c, 1);
      p->load(dir);
      return weights_checksum(p->weights());
    };
    const bool same = weights_of(out + "/save-0") == weights_of(out + "/snapshot-0");
    std::filesystem::remove_all(out);

    // The first snapshot allocates its memory (from a GPU, pins it); the later ones reuse it, as a
    // run's checkpoints after its first do.
    const auto save = bench::dist(save_s), write = bench::dist(write_s);
    const auto later = bench::dist(std::vector<double>(copy_s.begin() + 1, copy_s.end()));
    std::printf("\nmodel %s, device %s, dtype %s, %d repeat(s); median [max]\n\n", model.c_str(), device.c_str(),
                dtype.c_str(), repeat);
    std::printf("| checkpoint | on the step's path s | after the step s |\n|---|---:|---:|\n");
    std::printf("| save() (baseline) | %.3f [%.3f] | 0 |\n", save.p50, save.max);
    std::printf("| snapshot(), the first (allocates) + write() | %.3f | %.3f [%.3f] |\n", copy_s.front(), write.p50, write.max);
    if (repeat > 1) std::printf("| snapshot(), later (reuses) | %.3f [%.3f] | as above |\n", later.p50, later.max);
    std::printf("\nthe step's path, save() / later snapshot(): %.1fx; / the first: %.1fx; the folders load to the same weights: %s\n",
                save.p50 / std::max(repeat > 1 ? later.p50 : copy_s.front(), 1e-9), save.p50 / std::max(copy_s.front(), 1e-9),
                same ? "yes" : "NO");
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "leap-bench-checkpoint: %s\n", e.what());
    return 1;
  }
}
